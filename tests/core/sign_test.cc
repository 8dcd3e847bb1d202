#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/codecs/stochastic_sign.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/internal/reduce.h"

namespace edgesgd {
namespace {

using test_util::Layout;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::uint32_t kCanonicalNan = 0x7FC00000u;

struct Encoded {
  std::vector<std::uint32_t> words;
  std::vector<float> scales;
  PayloadView View() const { return PayloadView({}, {}, words, scales); }
};

Encoded EncodeSign(const SignParams& params, const TensorLayout& layout,
                   const std::vector<float>& input) {
  const PayloadShape shape = SignCodec::Shape(params, layout).value();
  Encoded encoded;
  encoded.words.assign(shape.words, 0xDEADBEEFu);  // garbage: Encode must write every word
  encoded.scales.assign(shape.scales, -7.0f);
  PayloadSpans out{{}, {}, encoded.words, encoded.scales};
  EXPECT_TRUE(SignCodec::Encode(params, layout, CodecContext{}, input, out, {}).ok());
  return encoded;
}

// Reference sign words: one coordinate at a time, bit = !(x < 0).
std::vector<std::uint32_t> NaiveWords(const TensorLayout& layout, const std::vector<float>& x) {
  std::vector<std::uint32_t> words;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t first = words.size();
    words.resize(first + (layout.size(t) + 31) / 32, 0u);
    for (std::size_t i = 0; i < layout.size(t); ++i) {
      if (!(x[layout.offset(t) + i] < 0.0f)) words[first + i / 32] |= 1u << (i % 32);
    }
  }
  return words;
}

// Reference mean |x|, written out independently of internal::SumAbs: element i in lane i % 8,
// lanes combined in the documented tree.
float NaiveMeanAbs(const float* x, std::size_t size) {
  std::array<float, 8> lanes{};
  for (std::size_t i = 0; i < size; ++i) lanes[i % 8] += std::fabs(x[i]);
  const float sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
                    ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  return sum / static_cast<float>(size);
}

// Gaussian values with a sprinkling of +0.0, -0.0, subnormals and large magnitudes.
std::vector<float> MixedInput(std::size_t size, std::uint32_t seed) {
  return test_util::MixedInput(size, seed, 20, [](int kind, auto normal) {
    switch (kind) {
      case 2:
        return -1e-40f;  // subnormal
      case 3:
        return 3e30f * normal();
      default:
        return normal();
    }
  });
}

std::uint32_t Bits(float v) { return std::bit_cast<std::uint32_t>(v); }

TEST(SignTest, ShapeCountsWordsPerTensor) {
  const TensorLayout layout = Layout({1, 32, 33, 64, 65});
  const PayloadShape shape = SignCodec::Shape(SignParams{}, layout).value();
  EXPECT_EQ(shape.words, 1u + 1u + 2u + 2u + 3u);
  EXPECT_EQ(shape.scales, 5u);
  EXPECT_EQ(shape.indices, 0u);
  EXPECT_EQ(shape.values, 0u);
  EXPECT_EQ(SignCodec::ScratchBytes(SignParams{}, layout), 0u);
}

TEST(SignTest, MatchesNaiveForOddSizesAndMultiTensorLayouts) {
  const std::vector<std::vector<std::uint64_t>> layouts = {
      {1},        {7},          {31},   {32},   {33},   {63},
      {64},       {65},         {1000}, {1023}, {4099}, {3, 70, 33, 1, 100},
      {5, 64, 7}, {257, 31, 96}};
  std::uint32_t seed = 1;
  for (const auto& sizes : layouts) {
    const TensorLayout layout = Layout(sizes);
    const std::vector<float> x = MixedInput(layout.dimension(), seed++);
    const Encoded encoded = EncodeSign(SignParams{}, layout, x);
    EXPECT_EQ(encoded.words, NaiveWords(layout, x)) << "layout of " << sizes.size();
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      const float* tensor = x.data() + layout.offset(t);
      EXPECT_EQ(Bits(encoded.scales[t]), Bits(NaiveMeanAbs(tensor, layout.size(t))));
      const float reference = internal::SumAbs(std::span<const float>(tensor, layout.size(t))) /
                              static_cast<float>(layout.size(t));
      EXPECT_EQ(Bits(encoded.scales[t]), Bits(reference));
    }
  }
}

// Fixed bytes for a fixed input (exact float arithmetic only): the SSE2, NEON and portable
// paths, on every architecture CI runs, must produce exactly these words and scales.
TEST(SignTest, GoldenBytes) {
  std::vector<float> x(107);
  for (int i = 0; i < 107; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<float>((i * 37) % 101 - 50) / 7.0f;
  }
  const Encoded encoded = EncodeSign(SignParams{}, Layout({70, 37}), x);
  EXPECT_EQ(encoded.words, (std::vector<std::uint32_t>{0x6d2da5a4u, 0x5b4b4969u, 0x0000001au,
                                                       0x5a5b4b49u, 0x00000012u}));
  ASSERT_EQ(encoded.scales.size(), 2u);
  EXPECT_EQ(Bits(encoded.scales[0]), 0x40685bf4u);
  EXPECT_EQ(Bits(encoded.scales[1]), 0x40670adfu);
}

TEST(SignTest, ZeroNegativeZeroAndNanCountAsNonNegative) {
  const std::vector<float> x = {0.0f, -0.0f, kNan, -kNan, -1e-45f, 1e-45f, -kInf, kInf, -2.0f};
  const TensorLayout layout = Layout({x.size()});
  const Encoded encoded = EncodeSign(SignParams{.scale = SignScale::kUnit}, layout, x);
  ASSERT_EQ(encoded.words.size(), 1u);
  EXPECT_EQ(encoded.words[0], 0b0'1010'1111u);
  EXPECT_EQ(encoded.scales[0], 1.0f);
}

TEST(SignTest, NanInputGivesCanonicalNanScale) {
  for (const float nan : {kNan, -kNan, std::bit_cast<float>(0x7F800001u)}) {
    std::vector<float> x = MixedInput(100, 3);
    x[41] = nan;
    const Encoded encoded = EncodeSign(SignParams{}, Layout({100}), x);
    EXPECT_EQ(Bits(encoded.scales[0]), kCanonicalNan);
  }
  // An infinite input is not NaN: |x| sums to +inf.
  std::vector<float> x = MixedInput(100, 4);
  x[7] = -kInf;
  EXPECT_EQ(EncodeSign(SignParams{}, Layout({100}), x).scales[0], kInf);
}

TEST(SignTest, SimdAndPortablePathsWriteIdenticalBytes) {
  for (const std::size_t size :
       {std::size_t{1}, std::size_t{32}, std::size_t{95}, std::size_t{4096}, std::size_t{100003}}) {
    std::vector<float> x = MixedInput(size + 3, static_cast<std::uint32_t>(size));
    // Start one float in, so the vector path runs on unaligned data.
    const std::span<const float> tensor(x.data() + 1, size);
    std::vector<std::uint32_t> fast((size + 31) / 32, 1u);
    std::vector<std::uint32_t> portable((size + 31) / 32, 2u);
    const float fast_sum = internal::SignPack(tensor, fast);
    const float portable_sum = internal::SignPackPortable(tensor, portable);
    EXPECT_EQ(fast, portable);
    EXPECT_EQ(Bits(fast_sum), Bits(portable_sum));
    EXPECT_EQ(Bits(fast_sum), Bits(internal::SumAbs(tensor)));
  }
}

TEST(SignTest, UnitScaleIsOne) {
  const TensorLayout layout = Layout({10, 40});
  const Encoded encoded =
      EncodeSign(SignParams{.scale = SignScale::kUnit}, layout, MixedInput(50, 5));
  EXPECT_EQ(encoded.scales, (std::vector<float>{1.0f, 1.0f}));
}

TEST(SignTest, RoundTripAddsWeightedSignedScale) {
  const TensorLayout layout = Layout({45, 1, 64, 100});
  const std::vector<float> x = MixedInput(layout.dimension(), 6);
  for (const SignScale scale_kind : {SignScale::kMeanAbs, SignScale::kUnit}) {
    const SignParams params{.scale = scale_kind};
    const Encoded encoded = EncodeSign(params, layout, x);
    std::vector<float> acc = MixedInput(layout.dimension(), 7);
    const std::vector<float> before = acc;
    const float weight = 0.375f;
    ASSERT_TRUE(
        SignCodec::DecodeAdd(params, layout, CodecContext{}, encoded.View(), weight, acc, {}).ok());
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      const float scale = encoded.scales[t];
      for (std::size_t i = 0; i < layout.size(t); ++i) {
        const std::size_t at = layout.offset(t) + i;
        const float sign = x[at] < 0.0f ? -scale : scale;
        EXPECT_EQ(acc[at], before[at] + weight * sign) << "coordinate " << at;
      }
    }
  }
}

TEST(SignTest, DecodeRejectsMalformedPayloadsAndLeavesAccumulatorUntouched) {
  const TensorLayout layout = Layout({33, 64, 5});
  const SignParams params{};
  const Encoded good = EncodeSign(params, layout, MixedInput(layout.dimension(), 8));
  std::vector<float> acc(layout.dimension(), 1.5f);
  const std::vector<float> before = acc;
  auto decode = [&](const PayloadView& view) {
    return SignCodec::DecodeAdd(params, layout, CodecContext{}, view, 1.0f, acc, {});
  };

  // Padding bits of a tensor's last word must be zero: tensor 0 uses 1 bit of word 1, tensor 2
  // uses 5 bits of word 4.
  for (const auto& [word, bit] :
       std::vector<std::pair<std::size_t, int>>{{1, 1}, {1, 31}, {4, 5}}) {
    Encoded bad = good;
    bad.words[word] |= 1u << bit;
    EXPECT_EQ(decode(bad.View()), Status::DataLoss()) << word << ":" << bit;
  }
  for (const float scale : {kNan, kInf, -kInf, -1.0f, -1e-38f}) {
    Encoded bad = good;
    bad.scales[1] = scale;
    EXPECT_EQ(decode(bad.View()), Status::DataLoss()) << scale;
  }
  {
    Encoded bad = good;
    bad.words.pop_back();
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
    bad = good;
    bad.words.push_back(0);
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
    bad = good;
    bad.scales.pop_back();
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
    const std::vector<std::uint32_t> index = {0};
    const std::vector<float> value = {0.0f};
    EXPECT_EQ(decode(PayloadView(index, {}, good.words, good.scales)), Status::DataLoss());
    EXPECT_EQ(decode(PayloadView({}, value, good.words, good.scales)), Status::DataLoss());
  }
  EXPECT_EQ(acc, before);
  EXPECT_TRUE(decode(good.View()).ok());
}

TEST(SignTest, RejectsBadParametersAndBuffers) {
  const TensorLayout layout = Layout({40, 9});
  const std::vector<float> x = MixedInput(layout.dimension(), 9);
  std::vector<std::uint32_t> words(3);
  std::vector<float> scales(2);
  std::vector<float> acc(layout.dimension());

  SignParams bad{};
  bad.scale = static_cast<SignScale>(9);
  EXPECT_EQ(SignCodec::Shape(bad, layout).status(), Status::InvalidArgument());
  EXPECT_EQ(SignCodec::Encode(bad, layout, {}, x, {{}, {}, words, scales}, {}),
            Status::InvalidArgument());
  EXPECT_EQ(SignCodec::Shape(SignParams{}, TensorLayout()).status(), Status::InvalidArgument());

  const SignParams params{};
  const std::vector<float> short_input(layout.dimension() - 1);
  EXPECT_EQ(SignCodec::Encode(params, layout, {}, short_input, {{}, {}, words, scales}, {}),
            Status::InvalidArgument());
  EXPECT_EQ(
      SignCodec::Encode(params, layout, {}, x, {{}, {}, std::span(words).first(2), scales}, {}),
      Status::ResourceExhausted());
  EXPECT_EQ(
      SignCodec::Encode(params, layout, {}, x, {{}, {}, words, std::span(scales).first(1)}, {}),
      Status::ResourceExhausted());
  ASSERT_TRUE(SignCodec::Encode(params, layout, {}, x, {{}, {}, words, scales}, {}).ok());

  const PayloadView view({}, {}, words, scales);
  EXPECT_EQ(SignCodec::DecodeAdd(bad, layout, {}, view, 1.0f, acc, {}), Status::InvalidArgument());
  EXPECT_EQ(SignCodec::DecodeAdd(params, layout, {}, view, 1.0f, std::span(acc).first(48), {}),
            Status::InvalidArgument());
  EXPECT_TRUE(SignCodec::DecodeAdd(params, layout, {}, view, 1.0f, acc, {}).ok());
}

// ---- Stochastic sign ----

Encoded EncodeStochastic(float bound, const TensorLayout& layout, const std::vector<float>& x,
                         const CodecContext& context, SignScale scale = SignScale::kUnit) {
  const StochasticSignParams params{.scale = scale, .noise_bound = bound};
  const PayloadShape shape = StochasticSignCodec::Shape(params, layout).value();
  EXPECT_EQ(shape.words, SignCodec::Shape(SignParams{scale}, layout).value().words);
  Encoded encoded;
  encoded.words.assign(shape.words, 0xDEADBEEFu);
  encoded.scales.assign(shape.scales, -7.0f);
  PayloadSpans out{{}, {}, encoded.words, encoded.scales};
  EXPECT_TRUE(StochasticSignCodec::Encode(params, layout, context, x, out, {}).ok());
  return encoded;
}

bool Bit(const Encoded& encoded, std::size_t i) { return (encoded.words[i / 32] >> (i % 32)) & 1u; }

// Each coordinate is +1 with probability (B + x) / (2B), clamped: over many rounds the fraction
// of +1 votes is that probability within five standard errors, and coordinates beyond +-B are
// certain.
TEST(SignTest, StochasticSignVotesPlusWithProbabilityLinearInX) {
  constexpr float kBound = 0.5f;
  const std::vector<float> x = {-0.75f, -0.5f, -0.375f, -0.125f, 0.0f,
                                0.125f, 0.25f, 0.4375f, 0.5f,    2.0f};
  const TensorLayout layout = Layout({x.size()});
  constexpr int kRounds = 20000;
  std::vector<int> plus(x.size(), 0);
  for (int round = 0; round < kRounds; ++round) {
    const Encoded encoded =
        EncodeStochastic(kBound, layout, x, CodecContext{17, static_cast<std::uint32_t>(round), 3});
    for (std::size_t i = 0; i < x.size(); ++i) plus[i] += Bit(encoded, i) ? 1 : 0;
    EXPECT_EQ(encoded.words[0] >> x.size(), 0u) << "padding bits";
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double p = std::clamp(static_cast<double>((kBound + x[i]) / (2.0f * kBound)), 0.0, 1.0);
    const double observed = static_cast<double>(plus[i]) / kRounds;
    const double tolerance = 5.0 * std::sqrt(p * (1.0 - p) / kRounds);
    EXPECT_NEAR(observed, p, tolerance + 1e-12) << "x = " << x[i];
  }
}

// Private randomness: the same context gives the same bits, another worker or round others;
// the scale is the plain sign's.
TEST(SignTest, StochasticSignIsAFunctionOfTheContext) {
  const TensorLayout layout = Layout({300, 45});
  const std::vector<float> x = MixedInput(layout.dimension(), 4);
  const CodecContext context{99, 7, 2};
  const Encoded first = EncodeStochastic(1.0f, layout, x, context, SignScale::kMeanAbs);
  EXPECT_EQ(first.words, EncodeStochastic(1.0f, layout, x, context, SignScale::kMeanAbs).words);
  EXPECT_NE(first.words, EncodeStochastic(1.0f, layout, x, CodecContext{99, 7, 3}).words);
  EXPECT_NE(first.words, EncodeStochastic(1.0f, layout, x, CodecContext{99, 8, 2}).words);
  EXPECT_EQ(first.scales, EncodeSign(SignParams{}, layout, x).scales);
  // A bound far below every |x| leaves only the plain signs.
  const std::vector<float> away = {-3.0f, 2.0f, -1.0f, 0.5f, 4.0f};
  const TensorLayout small = Layout({away.size()});
  EXPECT_EQ(EncodeStochastic(1e-3f, small, away, context).words, NaiveWords(small, away));
}

// Majority vote over devices whose values disagree: the plain votes follow the majority's sign,
// the stochastic votes the sign of the mean.
TEST(SignTest, StochasticVotesOfDisagreeingDevicesFollowTheMean) {
  // Three devices at +0.1, two at -0.6: the majority is positive, the mean (-0.18) negative.
  const std::vector<float> device_values = {0.1f, 0.1f, 0.1f, -0.6f, -0.6f};
  constexpr std::size_t kCoordinates = 4000;
  const TensorLayout layout = Layout({kCoordinates});
  std::vector<int> votes(kCoordinates, 0);
  for (std::uint32_t device = 0; device < device_values.size(); ++device) {
    const std::vector<float> x(kCoordinates, device_values[device]);
    const Encoded encoded = EncodeStochastic(1.0f, layout, x, CodecContext{5, 1, device});
    for (std::size_t i = 0; i < kCoordinates; ++i) votes[i] += Bit(encoded, i) ? 1 : -1;
  }
  std::size_t negative = 0;
  for (const int vote : votes) negative += vote < 0 ? 1u : 0u;
  // P(vote < 0) for five votes with p+ = 0.55, 0.55, 0.55, 0.2, 0.2 is about 0.63.
  EXPECT_GT(negative, kCoordinates * 58 / 100);
  EXPECT_LT(negative, kCoordinates * 68 / 100);
}

TEST(SignTest, StochasticSignParametersAreCheckedAndKeptByTheVoteForm) {
  for (const float bad : {0.0f, -1.0f, kNan, kInf, -0.0f - 1e-30f}) {
    EXPECT_EQ(StochasticSignCodec::Validate(StochasticSignParams{.noise_bound = bad}),
              Status::InvalidArgument())
        << bad;
  }
  EXPECT_EQ(StochasticSignCodec::Validate(
                StochasticSignParams{.scale = static_cast<SignScale>(7), .noise_bound = 1.0f}),
            Status::InvalidArgument());
  EXPECT_TRUE(StochasticSignCodec::Validate(StochasticSignParams{.noise_bound = 3.5f}).ok());
  const StochasticSignParams vote =
      StochasticSignCodec::VoteForm(StochasticSignParams{.noise_bound = 0.25f});
  EXPECT_EQ(vote.scale, SignScale::kUnit);
  EXPECT_EQ(vote.noise_bound, 0.25f);
}

// The two codecs share a payload: a stochastic payload decodes as a sign payload would, and is
// refused as one when malformed.
TEST(SignTest, StochasticPayloadsDecodeAsSignPayloads) {
  const TensorLayout layout = Layout({37, 5});
  const std::vector<float> x = MixedInput(layout.dimension(), 9);
  const Encoded encoded = EncodeStochastic(0.5f, layout, x, CodecContext{3, 1, 4},
                                           SignScale::kMeanAbs);
  std::vector<float> as_sign(layout.dimension(), 0.25f);
  std::vector<float> as_stochastic = as_sign;
  ASSERT_TRUE(SignCodec::DecodeAdd(SignParams{}, layout, {}, encoded.View(), 2.0f, as_sign, {})
                  .ok());
  ASSERT_TRUE(StochasticSignCodec::DecodeAdd(StochasticSignParams{}, layout, {}, encoded.View(),
                                             2.0f, as_stochastic, {})
                  .ok());
  EXPECT_EQ(as_sign, as_stochastic);
  Encoded padded = encoded;
  padded.words[1] |= 1u << 31;  // a padding bit of the 37-coordinate tensor
  EXPECT_EQ(StochasticSignCodec::DecodeAdd(StochasticSignParams{}, layout, {}, padded.View(),
                                           1.0f, as_stochastic, {}),
            Status::DataLoss());
  EXPECT_EQ(as_sign, as_stochastic);
}

}  // namespace
}  // namespace edgesgd
