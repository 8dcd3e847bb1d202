#include "edgesgd/core/codecs/rand_k.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/random.h"

namespace edgesgd {
namespace {

using test_util::GaussianVector;
using test_util::Layout;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Scratch as u32 storage, so it is suitably aligned.
std::vector<std::uint32_t> ScratchFor(const RandKParams& params, const TensorLayout& layout) {
  return std::vector<std::uint32_t>(RandKCodec::ScratchBytes(params, layout) / 4 + 1, 0xFFFFFFFFu);
}

std::span<std::byte> AsBytes(std::vector<std::uint32_t>& words) {
  return std::as_writable_bytes(std::span(words));
}

std::vector<std::uint32_t> Indices(const RandKParams& params, const TensorLayout& layout,
                                   const CodecContext& context, std::size_t tensor) {
  std::vector<std::uint32_t> scratch = ScratchFor(params, layout);
  std::vector<std::uint32_t> indices(layout.size(tensor), 0xFFFFFFFFu);
  const Result<std::size_t> k =
      RandKCodec::SelectedIndices(params, layout, context, tensor, indices, AsBytes(scratch));
  EXPECT_TRUE(k.ok());
  indices.resize(k.ok() ? k.value() : 0);
  return indices;
}

std::vector<float> Encode(const RandKParams& params, const TensorLayout& layout,
                          const CodecContext& context, const std::vector<float>& x) {
  std::vector<float> values(RandKCodec::Shape(params, layout).value().values, kNan);
  std::vector<std::uint32_t> scratch = ScratchFor(params, layout);
  EXPECT_TRUE(
      RandKCodec::Encode(params, layout, context, x, {{}, values, {}, {}}, AsBytes(scratch)).ok());
  return values;
}

// The selection spelled out with a std::set: Floyd over the shared stream, drawing the left-out
// coordinates instead when k > size / 2. Pins down which indices the wire format implies.
std::vector<std::uint32_t> NaiveFloyd(const CodecContext& context, std::uint32_t tensor,
                                      std::uint32_t size, std::uint32_t k) {
  const bool complement = k > size - k;
  const std::uint32_t marks = complement ? size - k : k;
  CounterRng rng(context.seed, context.round, tensor, StreamId(RandomPurpose::kSparsifySelection));
  std::set<std::uint32_t> chosen;
  for (std::uint32_t j = size - marks; j < size; ++j) {
    const std::uint32_t t = rng.NextBelow(j + 1);
    chosen.insert(chosen.count(t) != 0 ? j : t);
  }
  if (!complement) return std::vector<std::uint32_t>(chosen.begin(), chosen.end());
  std::vector<std::uint32_t> result;
  for (std::uint32_t i = 0; i < size; ++i) {
    if (chosen.count(i) == 0) result.push_back(i);
  }
  return result;
}

// |observed - expected| within 5 standard deviations of a binomial count.
void ExpectBinomial(double observed, double trials, double p, const char* what) {
  const double sigma = std::sqrt(trials * p * (1.0 - p));
  EXPECT_NEAR(observed, trials * p, 5.0 * sigma) << what;
}

TEST(RandKTest, ShapeAndScratch) {
  const TensorLayout layout = Layout({1000, 7, 3});
  const RandKParams params{.k_ratio = 0.1f};
  const PayloadShape shape = RandKCodec::Shape(params, layout).value();
  EXPECT_EQ(shape.values, 100u + 1u + 1u);
  EXPECT_EQ(shape.indices + shape.words + shape.scales, 0u);
  EXPECT_EQ(RandKCodec::ScratchBytes(params, layout), (1000u + 31u) / 32u * 4u);
  EXPECT_EQ(RandKCodec::ValueScale(RandKScaling::kUnbiased, 1000, 100), 10.0f);
  EXPECT_EQ(RandKCodec::ValueScale(RandKScaling::kNone, 1000, 100), 1.0f);
}

TEST(RandKTest, IndicesAreDistinctAscendingAndInRange) {
  for (const std::size_t size : {1u, 2u, 31u, 32u, 33u, 100u, 1000u, 4097u}) {
    for (const float ratio : {0.001f, 0.1f, 0.5f, 0.51f, 0.9f, 1.0f}) {
      const TensorLayout layout = Layout({size});
      const RandKParams params{.k_ratio = ratio};
      const std::vector<std::uint32_t> indices = Indices(params, layout, {7, 3, 0}, 0);
      ASSERT_EQ(indices.size(), SparseCount(size, ratio).value());
      for (std::size_t n = 0; n < indices.size(); ++n) {
        ASSERT_LT(indices[n], size);
        if (n > 0) {
          ASSERT_LT(indices[n - 1], indices[n]) << size << " " << ratio;
        }
      }
    }
  }
}

TEST(RandKTest, IndicesFollowFloydOverTheSharedStream) {
  const TensorLayout layout = Layout({1, 50, 333, 64});
  for (const float ratio : {0.02f, 0.3f, 0.5f, 0.7f, 1.0f}) {
    const RandKParams params{.k_ratio = ratio};
    for (std::uint32_t round = 0; round < 5; ++round) {
      const CodecContext context{0x0123456789ABCDEFull, round, 0};
      for (std::uint32_t t = 0; t < layout.tensor_count(); ++t) {
        const auto size = static_cast<std::uint32_t>(layout.size(t));
        const auto k = static_cast<std::uint32_t>(SparseCount(size, ratio).value());
        EXPECT_EQ(Indices(params, layout, context, t), NaiveFloyd(context, t, size, k));
      }
    }
  }
}

// Fixed indices for a fixed seed: every architecture (CI runs these under qemu) must agree.
TEST(RandKTest, GoldenIndices) {
  const TensorLayout layout = Layout({100, 37});
  const CodecContext context{42, 7, 0};
  EXPECT_EQ(Indices(RandKParams{.k_ratio = 0.05f}, layout, context, 0),
            (std::vector<std::uint32_t>{27, 53, 80, 84, 97}));
  EXPECT_EQ(Indices(RandKParams{.k_ratio = 0.05f}, layout, context, 1),
            (std::vector<std::uint32_t>{18, 36}));
  // k = 33 of 37: Floyd draws the four coordinates left out.
  std::vector<std::uint32_t> all_but;
  for (std::uint32_t i = 0; i < 37; ++i) {
    if (i != 13 && i != 17 && i != 34 && i != 36) all_but.push_back(i);
  }
  EXPECT_EQ(Indices(RandKParams{.k_ratio = 0.9f}, layout, context, 1), all_but);
}

// 2^24 coordinates: ~168k draws read thousands of Philox blocks, and NextBelow rejects a few
// hundred of them, so the batched generator is checked against CounterRng well past its
// buffer boundaries and on the rejection path.
TEST(RandKTest, IndicesFollowFloydOnALargeTensor) {
  constexpr std::uint32_t kSize = 1u << 24;
  const TensorLayout layout = Layout({kSize});
  const CodecContext context{0xC0FFEEull, 12, 0};
  const std::vector<std::uint32_t> indices =
      Indices(RandKParams{.k_ratio = 0.01f}, layout, context, 0);
  const auto k = static_cast<std::uint32_t>(SparseCount(kSize, 0.01f).value());
  EXPECT_EQ(indices, NaiveFloyd(context, 0, kSize, k));
}

TEST(RandKTest, SameSeedAndRoundGiveSameIndicesOnEveryWorker) {
  const TensorLayout layout = Layout({500, 500});
  const RandKParams params{.k_ratio = 0.05f};
  const std::vector<std::uint32_t> reference = Indices(params, layout, {11, 4, 0}, 0);
  for (std::uint32_t worker = 1; worker < 5; ++worker) {
    EXPECT_EQ(Indices(params, layout, {11, 4, worker}, 0), reference);
  }
  EXPECT_NE(Indices(params, layout, {11, 5, 0}, 0), reference);  // other round
  EXPECT_NE(Indices(params, layout, {12, 4, 0}, 0), reference);  // other seed
  EXPECT_NE(Indices(params, layout, {11, 4, 0}, 1), reference);  // other tensor

  // Workers with different data send values at the same coordinates.
  const std::vector<float> x0 = GaussianVector(1000, 1);
  const std::vector<float> x1 = GaussianVector(1000, 2);
  const std::vector<float> v0 = Encode(params, layout, {11, 4, 0}, x0);
  const std::vector<float> v1 = Encode(params, layout, {11, 4, 3}, x1);
  for (std::size_t n = 0; n < reference.size(); ++n) {
    EXPECT_EQ(v0[n], x0[reference[n]]);
    EXPECT_EQ(v1[n], x1[reference[n]]);
  }
}

TEST(RandKTest, EachCoordinateChosenWithFrequencyKOverD) {
  constexpr std::uint32_t kSize = 200;
  constexpr int kRounds = 20000;
  // 0.05 runs Floyd on the kept coordinates, 0.8 on the left-out ones.
  for (const float ratio : {0.05f, 0.8f}) {
    const TensorLayout layout = Layout({kSize});
    const RandKParams params{.k_ratio = ratio};
    const std::size_t k = SparseCount(kSize, ratio).value();
    std::vector<int> counts(kSize, 0);
    for (int round = 0; round < kRounds; ++round) {
      const CodecContext context{static_cast<std::uint64_t>(round % 7),
                                 static_cast<std::uint32_t>(round), 0};
      for (const std::uint32_t index : Indices(params, layout, context, 0)) ++counts[index];
    }
    const double p = static_cast<double>(k) / kSize;
    for (std::uint32_t i = 0; i < kSize; ++i) ExpectBinomial(counts[i], kRounds, p, "coordinate");
  }
}

TEST(RandKTest, EverySubsetIsEquallyLikely) {
  constexpr int kRounds = 20000;
  // 5 choose 2 and 5 choose 3 both have 10 subsets; k = 3 uses the complement path.
  for (const float ratio : {0.4f, 0.6f}) {
    const TensorLayout layout = Layout({5});
    const RandKParams params{.k_ratio = ratio};
    std::map<std::uint32_t, int> counts;
    for (int round = 0; round < kRounds; ++round) {
      std::uint32_t mask = 0;
      for (const std::uint32_t index :
           Indices(params, layout, {99, static_cast<std::uint32_t>(round), 0}, 0)) {
        mask |= 1u << index;
      }
      ++counts[mask];
    }
    ASSERT_EQ(counts.size(), 10u);
    for (const auto& [mask, count] : counts) ExpectBinomial(count, kRounds, 0.1, "subset");
  }
}

TEST(RandKTest, ScaledDecodeIsUnbiased) {
  constexpr std::size_t kSize = 64;
  constexpr int kRounds = 20000;
  const TensorLayout layout = Layout({kSize});
  const RandKParams params{.k_ratio = 0.125f, .scaling = RandKScaling::kUnbiased};  // k = 8
  const std::vector<float> x = GaussianVector(kSize, 3);
  std::vector<double> sum(kSize, 0.0);
  std::vector<std::uint32_t> scratch = ScratchFor(params, layout);
  for (int round = 0; round < kRounds; ++round) {
    const CodecContext context{static_cast<std::uint64_t>(1000 + round % 13),
                               static_cast<std::uint32_t>(round), 0};
    const std::vector<float> values = Encode(params, layout, context, x);
    std::vector<float> decoded(kSize, 0.0f);
    ASSERT_TRUE(RandKCodec::DecodeAdd(params, layout, context, PayloadView({}, values, {}, {}),
                                      1.0f, decoded, AsBytes(scratch))
                    .ok());
    for (std::size_t i = 0; i < kSize; ++i) sum[i] += static_cast<double>(decoded[i]);
  }
  // Each decoded coordinate is x * d/k with probability k/d, else 0: variance x^2 (d/k - 1).
  double ratio_sum = 0.0;
  for (std::size_t i = 0; i < kSize; ++i) {
    const double mean = sum[i] / kRounds;
    const double sigma = std::fabs(static_cast<double>(x[i])) * std::sqrt(8.0 - 1.0) /
                         std::sqrt(static_cast<double>(kRounds));
    EXPECT_NEAR(mean, static_cast<double>(x[i]), 5.0 * sigma + 1e-9) << "coordinate " << i;
    ratio_sum += mean / static_cast<double>(x[i]);
  }
  // Exactly k coordinates per round, each weighted d/k, so sum_i mean_i / x_i is d up to float
  // rounding: a slightly wrong scale, too small for the per-coordinate bound, shows here.
  EXPECT_NEAR(ratio_sum, static_cast<double>(kSize), 1e-4 * kSize);
}

TEST(RandKTest, ValuesAreInputAtSelectedIndices) {
  const TensorLayout layout = Layout({300, 45, 1000, 1});
  const std::vector<float> x = GaussianVector(layout.dimension(), 4);
  const CodecContext context{5, 17, 2};
  for (const RandKScaling scaling : {RandKScaling::kNone, RandKScaling::kUnbiased}) {
    const RandKParams params{.k_ratio = 0.1f, .scaling = scaling};
    const std::vector<float> values = Encode(params, layout, context, x);
    std::size_t n = 0;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      const std::vector<std::uint32_t> indices = Indices(params, layout, context, t);
      const float scale = RandKCodec::ValueScale(scaling, layout.size(t), indices.size());
      for (const std::uint32_t index : indices) {
        const float expected = x[layout.offset(t) + index];
        EXPECT_EQ(values[n++], scaling == RandKScaling::kNone ? expected : expected * scale);
      }
    }
    EXPECT_EQ(n, values.size());
  }
}

TEST(RandKTest, RoundTripAddsWeightedValuesAtSelectedIndices) {
  const TensorLayout layout = Layout({300, 45, 1000});
  const RandKParams params{.k_ratio = 0.2f, .scaling = RandKScaling::kUnbiased};
  const CodecContext context{77, 3, 1};
  const std::vector<float> x = GaussianVector(layout.dimension(), 5);
  const std::vector<float> values = Encode(params, layout, context, x);
  std::vector<float> acc = GaussianVector(layout.dimension(), 6);
  std::vector<float> expected = acc;
  std::size_t n = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    for (const std::uint32_t index : Indices(params, layout, context, t)) {
      expected[layout.offset(t) + index] += -0.25f * values[n++];
    }
  }
  std::vector<std::uint32_t> scratch = ScratchFor(params, layout);
  // Another worker id decodes the same coordinates.
  ASSERT_TRUE(RandKCodec::DecodeAdd(params, layout, {77, 3, 9}, PayloadView({}, values, {}, {}),
                                    -0.25f, acc, AsBytes(scratch))
                  .ok());
  EXPECT_EQ(acc, expected);
}

TEST(RandKTest, DecodeRejectsMalformedPayloadsAndLeavesAccumulatorUntouched) {
  const TensorLayout layout = Layout({100, 20});
  const RandKParams params{.k_ratio = 0.1f};
  const CodecContext context{1, 2, 0};
  const std::vector<float> good = Encode(params, layout, context, GaussianVector(120, 7));
  std::vector<std::uint32_t> scratch = ScratchFor(params, layout);
  std::vector<float> acc(layout.dimension(), 2.0f);
  const std::vector<float> before = acc;
  auto decode = [&](const PayloadView& view) {
    return RandKCodec::DecodeAdd(params, layout, context, view, 1.0f, acc, AsBytes(scratch));
  };
  for (const float poison : {kNan, kInf, -kInf}) {
    std::vector<float> bad = good;
    bad.back() = poison;
    EXPECT_EQ(decode(PayloadView({}, bad, {}, {})), Status::DataLoss());
  }
  std::vector<float> shorter(good.begin(), good.end() - 1);
  std::vector<float> longer = good;
  longer.push_back(0.0f);
  EXPECT_EQ(decode(PayloadView({}, shorter, {}, {})), Status::DataLoss());
  EXPECT_EQ(decode(PayloadView({}, longer, {}, {})), Status::DataLoss());
  const std::vector<std::uint32_t> one_word = {0};
  const std::vector<float> one_scale = {1.0f};
  EXPECT_EQ(decode(PayloadView(one_word, good, {}, {})), Status::DataLoss());
  EXPECT_EQ(decode(PayloadView({}, good, one_word, {})), Status::DataLoss());
  EXPECT_EQ(decode(PayloadView({}, good, {}, one_scale)), Status::DataLoss());
  EXPECT_EQ(acc, before);
  EXPECT_TRUE(decode(PayloadView({}, good, {}, {})).ok());
}

TEST(RandKTest, RejectsBadParametersAndBuffers) {
  const TensorLayout layout = Layout({100, 20});
  const std::vector<float> x = GaussianVector(layout.dimension(), 8);
  for (const float ratio : {0.0f, -0.1f, 1.5f, kNan, kInf}) {
    const RandKParams params{.k_ratio = ratio};
    EXPECT_EQ(RandKCodec::Shape(params, layout).status(), Status::InvalidArgument()) << ratio;
    EXPECT_EQ(RandKCodec::ScratchBytes(params, layout), 0u);
    std::vector<float> values(200);
    std::vector<std::uint32_t> scratch(100);
    EXPECT_EQ(RandKCodec::Encode(params, layout, {}, x, {{}, values, {}, {}}, AsBytes(scratch)),
              Status::InvalidArgument());
  }
  RandKParams bad_scaling{.k_ratio = 0.1f};
  bad_scaling.scaling = static_cast<RandKScaling>(5);
  EXPECT_EQ(RandKCodec::Shape(bad_scaling, layout).status(), Status::InvalidArgument());
  EXPECT_EQ(RandKCodec::Shape(RandKParams{.k_ratio = 0.1f}, TensorLayout()).status(),
            Status::InvalidArgument());

  const RandKParams params{.k_ratio = 0.1f};  // 10 + 2 values, 16 scratch bytes
  std::vector<float> values(12);
  std::vector<std::uint32_t> scratch(5);
  const auto bytes = AsBytes(scratch);
  EXPECT_TRUE(RandKCodec::Encode(params, layout, {}, x, {{}, values, {}, {}}, bytes).ok());
  EXPECT_EQ(
      RandKCodec::Encode(params, layout, {}, std::span(x).first(119), {{}, values, {}, {}}, bytes),
      Status::InvalidArgument());
  EXPECT_EQ(
      RandKCodec::Encode(params, layout, {}, x, {{}, std::span(values).first(11), {}, {}}, bytes),
      Status::ResourceExhausted());
  EXPECT_EQ(RandKCodec::Encode(params, layout, {}, x, {{}, values, {}, {}}, bytes.first(15)),
            Status::ResourceExhausted());
  EXPECT_EQ(RandKCodec::Encode(params, layout, {}, x, {{}, values, {}, {}}, bytes.subspan(1)),
            Status::InvalidArgument());

  std::vector<float> acc(layout.dimension());
  const PayloadView view({}, values, {}, {});
  EXPECT_EQ(RandKCodec::DecodeAdd(params, layout, {}, view, 1.0f, acc, bytes.first(15)),
            Status::ResourceExhausted());
  EXPECT_EQ(RandKCodec::DecodeAdd(params, layout, {}, view, 1.0f, acc, bytes.subspan(1)),
            Status::InvalidArgument());
  EXPECT_EQ(RandKCodec::DecodeAdd(params, layout, {}, view, 1.0f, std::span(acc).first(5), bytes),
            Status::InvalidArgument());

  std::vector<std::uint32_t> indices(10);
  EXPECT_EQ(RandKCodec::SelectedIndices(params, layout, {}, 2, indices, bytes).status(),
            Status::InvalidArgument());
  EXPECT_EQ(RandKCodec::SelectedIndices(params, layout, {}, 0, std::span(indices).first(9), bytes)
                .status(),
            Status::ResourceExhausted());
  EXPECT_EQ(RandKCodec::SelectedIndices(params, layout, {}, 0, indices, bytes).value(), 10u);
}

}  // namespace
}  // namespace edgesgd
