#include "edgesgd/core/codec_registry.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/test_util.h"

namespace edgesgd {
namespace {

using test_util::EveryCodec;
using test_util::kNaN;

// Every codec at its defaults, at a test's settings, and with each choice and schedule away
// from its default.
std::vector<CodecParams> ParameterVariety() {
  std::vector<CodecParams> all;
  for (CodecId id = 0; id < kCodecCount; ++id) all.push_back(DefaultCodecParams(id).value());
  for (const CodecParams& params : EveryCodec({})) all.push_back(params);
  all.push_back(RandKParams{.k_ratio = 0.5f, .scaling = RandKScaling::kUnbiased});
  all.push_back(SignParams{.scale = SignScale::kUnit});
  all.push_back(QsgdParams{.levels = 3,
                           .bucket = 100,
                           .schedule = QuantScheduleKind::kDq,
                           .bits_min = 3,
                           .bits_max = 6,
                           .dq_k = 7.5f,
                           .dq_rho = 0.5f});
  all.push_back(RegTopKParams{.k_ratio = 0.3f, .mu = 2.5f, .q = 1e6f});
  return all;
}

std::vector<std::uint32_t> WordsOf(const CodecParams& params) {
  std::array<std::uint32_t, kMaxCodecParamWords> words{};
  const std::size_t count = ParamWords(params, words);
  return std::vector<std::uint32_t>(words.begin(), words.begin() + static_cast<long>(count));
}

// The words of `params` with the field named `name` set to `word`.
std::vector<std::uint32_t> WithField(const CodecParams& params, std::string_view name,
                                     std::uint32_t word) {
  std::vector<std::uint32_t> words = WordsOf(params);
  std::size_t index = 0;
  bool found = false;
  ForEachParamField(params, [&](const CodecFieldValue& field) {
    if (field.name == name) {
      words[index] = word;
      found = true;
    }
    ++index;
  });
  EXPECT_TRUE(found) << CodecName(params) << " has no field " << name;
  return words;
}

TEST(CodecRegistryTest, IdsAreTheVariantIndices) {
  ForEachCodec([](auto codec) {
    using Codec = typename decltype(codec)::type;
    const CodecParams params = typename Codec::Params{};
    EXPECT_EQ(kCodecId<Codec>, params.index()) << Codec::kName;
    EXPECT_EQ(CodecIdOf(params), kCodecId<Codec>) << Codec::kName;
    EXPECT_TRUE((std::is_same_v<CodecFor<typename Codec::Params>, Codec>)) << Codec::kName;
  });
  static_assert(kCodecId<IdentityCodec> == 0 && kCodecId<RegTopKCodec> == 6);
}

TEST(CodecRegistryTest, DefaultParamsRoundTripTheNames) {
  for (CodecId id = 0; id < kCodecCount; ++id) {
    const std::string_view name = CodecName(id);
    SCOPED_TRACE(std::string(name));
    const Result<CodecParams> by_name = DefaultCodecParams(name);
    ASSERT_TRUE(by_name.ok());
    EXPECT_EQ(CodecIdOf(by_name.value()), id);
    EXPECT_EQ(CodecName(by_name.value()), name);
    EXPECT_TRUE(SameCodecParams(by_name.value(), DefaultCodecParams(id).value()));
  }
  EXPECT_EQ(DefaultCodecParams("top-k").status(), Status::NotFound());
  EXPECT_EQ(DefaultCodecParams("").status(), Status::NotFound());
  EXPECT_EQ(DefaultCodecParams(static_cast<CodecId>(kCodecCount)).status(), Status::NotFound());
  EXPECT_EQ(CodecName(static_cast<CodecId>(kCodecCount)), "unknown");
}

TEST(CodecRegistryTest, ParamsSurviveTheirWordsExactly) {
  for (const CodecParams& params : ParameterVariety()) {
    SCOPED_TRACE(std::string(CodecName(params)));
    const std::vector<std::uint32_t> words = WordsOf(params);
    const Result<CodecParams> back = ParamsFromWords(CodecIdOf(params), words);
    ASSERT_TRUE(back.ok()) << back.status().reason();
    EXPECT_EQ(back.value(), params);
    EXPECT_TRUE(SameCodecParams(back.value(), params));
    EXPECT_EQ(WordsOf(back.value()), words);
  }
}

TEST(CodecRegistryTest, ParamsFromWordsRefusesAnotherWordCount) {
  for (const CodecParams& params : ParameterVariety()) {
    SCOPED_TRACE(std::string(CodecName(params)));
    std::vector<std::uint32_t> words = WordsOf(params);
    words.push_back(0);
    EXPECT_EQ(ParamsFromWords(CodecIdOf(params), words).status(), Status::DataLoss());
    words.pop_back();
    if (words.empty()) continue;
    words.pop_back();
    EXPECT_EQ(ParamsFromWords(CodecIdOf(params), words).status(), Status::DataLoss());
  }
  EXPECT_EQ(ParamsFromWords(static_cast<CodecId>(kCodecCount), {}).status(), Status::NotFound());
}

TEST(CodecRegistryTest, ParamsFromWordsRefusesValuesOutsideTheirDomainWithTheCodecsReason) {
  struct Case {
    CodecParams params;
    std::string_view field;
    std::uint32_t word;
    std::string_view reason;  // a part of the codec's reason
  };
  const auto bits = [](float value) { return std::bit_cast<std::uint32_t>(value); };
  const Case cases[] = {
      {TopKParams{}, "k_ratio", bits(0.0f), "k ratio"},
      {TopKParams{}, "k_ratio", bits(kNaN), "k ratio"},
      {RandKParams{}, "k_ratio", bits(1.5f), "k ratio"},
      {RandKParams{}, "rand_k_scaling", 2, "rand_k scaling"},
      {RandomBlockParams{}, "block_ratio", 0, "block ratio"},
      {SignParams{}, "sign_scale", 2, "sign scale"},
      {QsgdParams{}, "bits", 0, "qsgd levels"},
      {QsgdParams{}, "bits", kMaxQsgdLevels + 1, "qsgd levels"},
      {QsgdParams{}, "bucket", 0, "bucket"},
      {QsgdParams{}, "quant_schedule", 2, "schedule"},
      {QsgdParams{.schedule = QuantScheduleKind::kDq}, "bits_max", 17, "bits"},
      {QsgdParams{.schedule = QuantScheduleKind::kDq}, "dq_rho", bits(0.0f), "rho"},
      {RegTopKParams{}, "k_ratio", bits(-0.5f), "k ratio"},
      {RegTopKParams{}, "mu", bits(0.0f), "mu"},
      {RegTopKParams{}, "reg_q", bits(kNaN), "Q"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(CodecName(c.params)) + " " + std::string(c.field));
    const Status status =
        ParamsFromWords(CodecIdOf(c.params), WithField(c.params, c.field, c.word)).status();
    EXPECT_EQ(status, Status::InvalidArgument());
    EXPECT_NE(std::string_view(status.reason()).find(c.reason), std::string_view::npos)
        << status.reason();
  }
}

TEST(CodecRegistryTest, SameCodecParamsComparesBits) {
  const CodecParams nan = TopKParams{.k_ratio = kNaN};
  EXPECT_FALSE(nan == nan);  // what the comparison operator says
  EXPECT_TRUE(SameCodecParams(nan, nan));
  const CodecParams positive_zero = RegTopKParams{.mu = 0.0f};
  const CodecParams negative_zero = RegTopKParams{.mu = -0.0f};
  EXPECT_TRUE(positive_zero == negative_zero);
  EXPECT_FALSE(SameCodecParams(positive_zero, negative_zero));
  // Another codec with the same words is another configuration.
  const CodecParams half = TopKParams{.k_ratio = 0.5f};
  const CodecParams same_bits =
      RandomBlockParams{.block_ratio = std::bit_cast<std::uint32_t>(0.5f)};
  ASSERT_EQ(WordsOf(half), WordsOf(same_bits));
  EXPECT_FALSE(SameCodecParams(half, same_bits));
  EXPECT_FALSE(SameCodecParams(IdentityParams{}, SignParams{}));
  EXPECT_FALSE(SameCodecParams(TopKParams{.k_ratio = 0.5f}, TopKParams{.k_ratio = 0.25f}));
  EXPECT_TRUE(SameCodecParams(QsgdParams{}, QsgdParams{}));
}

TEST(CodecRegistryTest, EveryDescriptorsLayoutHoldsItsShape) {
  const std::vector<TensorLayout> layouts = {test_util::Layout({1}), test_util::Layout({33}),
                                             test_util::Layout({29, 64, 3, 100})};
  for (const CodecParams& params : ParameterVariety()) {
    SCOPED_TRACE(std::string(CodecName(params)));
    for (const TensorLayout& layout : layouts) {
      const Result<PayloadShape> shape = EncodedShape(params, layout);
      ASSERT_TRUE(shape.ok());
      EXPECT_TRUE(LayoutHolds(PayloadLayoutOf(params), shape.value()));
    }
  }
  // Not every layout holds every shape: indices have no place in a dense payload.
  EXPECT_FALSE(LayoutHolds(PayloadLayout::kDense, EncodedShape(TopKParams{}, layouts[2]).value()));
  EXPECT_FALSE(LayoutHolds(PayloadLayout::kSparse, EncodedShape(SignParams{}, layouts[2]).value()));
}

TEST(CodecRegistryTest, ARegistryKnowsOnlyTheCodecsItWasBuiltFrom) {
  const CodecRegistry& top_k_only = test_util::TopKOnlyCodecs();
  ASSERT_NE(top_k_only.Find(kCodecId<TopKCodec>), nullptr);
  EXPECT_EQ(top_k_only.Find(kCodecId<TopKCodec>)->id, kCodecId<TopKCodec>);
  EXPECT_EQ(top_k_only.Find(kCodecId<QsgdCodec>), nullptr);
  EXPECT_TRUE(top_k_only.For(TopKParams{}).ok());
  EXPECT_EQ(top_k_only.For(QsgdParams{}).status(), Status::FailedPrecondition());
  EXPECT_EQ(top_k_only.Mask(), std::uint32_t{1} << kCodecId<TopKCodec>);
  EXPECT_EQ(top_k_only.ops().size(), 1u);

  const TensorLayout layout = test_util::Layout({16});
  const std::vector<float> input(16, 1.0f);
  std::vector<float> accumulator(16, 0.0f);
  test_util::PayloadBuffers payload(EncodedShape(QsgdParams{}, layout).value());
  EXPECT_EQ(top_k_only.Encode(QsgdParams{}, layout, {}, input, payload.spans(), {}),
            Status::FailedPrecondition());
  EXPECT_EQ(top_k_only.DecodeAdd(QsgdParams{}, layout, {}, payload.view(), 1.0f, accumulator, {}),
            Status::FailedPrecondition());
  EXPECT_EQ(top_k_only.RoundParams(QsgdParams{}, 0, 1, input).status(),
            Status::FailedPrecondition());

  EXPECT_EQ(AllCodecs().Mask(), (std::uint32_t{1} << kCodecCount) - 1);
  EXPECT_EQ(AllCodecs().ops().size(), kCodecCount);
}

// A host build compiles every codec; EDGESGD_CODECS, which a microcontroller build sets, is a
// list of names separated by commas (the Cortex-M smoke image checks what it leaves out).
TEST(CodecRegistryTest, AHostBuildCompilesEveryCodecAndBuildListsSplitOnCommas) {
  EXPECT_EQ(kBuiltCodecCount, kCodecCount);
  ForEachCodec([](auto codec) { EXPECT_TRUE(kCodecInBuild<typename decltype(codec)::type>); });
  std::vector<std::string_view> names;
  internal::ForEachListedName("identity,top_k,sign", [&](std::string_view name) {
    names.push_back(name);
  });
  EXPECT_EQ(names, (std::vector<std::string_view>{"identity", "top_k", "sign"}));
  names.clear();
  internal::ForEachListedName("", [&](std::string_view name) { names.push_back(name); });
  EXPECT_TRUE(names.empty());
}

// The operations check which codec their parameters belong to: a registry entry never reads
// another codec's parameters as its own.
TEST(CodecRegistryTest, OperationsRefuseAnotherCodecsParams) {
  const TensorLayout layout = test_util::Layout({40, 24});
  const std::vector<float> input = test_util::UniformVector(layout.dimension(), 1, 2, 1.0f);
  const std::vector<CodecParams> codecs = EveryCodec({});
  for (const CodecOps& ops : AllCodecs().ops()) {
    for (const CodecParams& params : codecs) {
      if (CodecIdOf(params) == ops.id) continue;
      SCOPED_TRACE(std::string(CodecName(ops.id)) + " given " + std::string(CodecName(params)));
      test_util::PayloadBuffers payload(EncodedShape(params, layout).value());
      std::vector<float> accumulator(layout.dimension(), 0.0f);
      std::vector<std::byte> scratch(CodecScratchBytes(params, layout));
      EXPECT_EQ(ops.encode(params, layout, {}, input, payload.spans(), scratch),
                Status::InvalidArgument());
      EXPECT_EQ(ops.decode_add(params, layout, {}, payload.view(), 1.0f, accumulator, scratch),
                Status::InvalidArgument());
      EXPECT_EQ(accumulator, std::vector<float>(layout.dimension(), 0.0f));
    }
  }
}

// The decode contract (codec.h): a payload with a NaN or an infinity in any float field is
// refused whole, whichever field and whichever position, and the accumulator keeps its values.
TEST(CodecRegistryTest, EveryDecoderRefusesANonFiniteFloatAndAddsNothing) {
  const TensorLayout layout = test_util::Layout({40, 24});
  const std::vector<float> input = test_util::UniformVector(layout.dimension(), 3, 1, 1.0f);
  const std::vector<float> before(layout.dimension(), 1.5f);
  for (const CodecParams& params : EveryCodec({})) {
    const PayloadShape shape = EncodedShape(params, layout).value();
    test_util::PayloadBuffers encoded(shape);
    std::vector<std::byte> scratch(CodecScratchBytes(params, layout));
    ASSERT_TRUE(AllCodecs().Encode(params, layout, {}, input, encoded.spans(), scratch).ok());
    for (const bool in_scales : {false, true}) {
      const std::size_t size = in_scales ? shape.scales : shape.values;
      for (const std::size_t at : {std::size_t{0}, size / 2, size - 1}) {
        if (size == 0) break;
        for (const float bad : {kNaN, test_util::kInf, -test_util::kInf}) {
          SCOPED_TRACE(std::string(CodecName(params)) + (in_scales ? " scale " : " value ") +
                       std::to_string(at) + " = " + std::to_string(bad));
          test_util::PayloadBuffers poisoned = encoded;
          (in_scales ? poisoned.scales : poisoned.values)[at] = bad;
          std::vector<float> accumulator = before;
          EXPECT_EQ(AllCodecs().DecodeAdd(params, layout, {}, poisoned.view(), 1.0f, accumulator,
                                          scratch),
                    Status::DataLoss());
          EXPECT_EQ(accumulator, before);
        }
      }
    }
  }
}

// Optional hooks: a registry answers for codecs without one as if the hook did nothing.
TEST(CodecRegistryTest, MissingHooksKeepTheParameters) {
  const TensorLayout layout = test_util::Layout({40});
  const std::vector<float> gradient(40, 1.0f);
  for (const CodecParams& params : EveryCodec({})) {
    SCOPED_TRACE(std::string(CodecName(params)));
    const Result<const CodecOps*> found = AllCodecs().For(params);
    ASSERT_TRUE(found.ok());
    const CodecOps& ops = *found.value();
    EXPECT_EQ(ops.check_shared != nullptr, std::holds_alternative<RandomBlockParams>(params));
    EXPECT_EQ(ops.round_params != nullptr, std::holds_alternative<QsgdParams>(params));
    EXPECT_EQ(ops.selector_encode != nullptr, std::holds_alternative<RegTopKParams>(params));
    const Result<CodecParams> round = AllCodecs().RoundParams(params, 0, 10, gradient);
    ASSERT_TRUE(round.ok());
    EXPECT_TRUE(SameCodecParams(round.value(), params));  // every list entry is fixed
    if (ops.check_shared == nullptr) {
      EXPECT_TRUE(AllCodecs().CheckShared(params, layout, {}, PayloadView()).ok());
    }
  }
}

}  // namespace
}  // namespace edgesgd
