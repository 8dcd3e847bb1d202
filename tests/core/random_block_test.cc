#include "edgesgd/core/codecs/random_block.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "edgesgd/core/random.h"

namespace edgesgd {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TensorLayout Layout(const std::vector<std::uint64_t>& sizes) {
  return TensorLayout::FromSizes(sizes).value();
}

struct Encoded {
  std::vector<std::uint32_t> starts;
  std::vector<float> values;
  PayloadView View() const { return PayloadView(starts, values, {}, {}); }
};

Encoded EncodeBlock(const RandomBlockParams& params, const TensorLayout& layout,
                    const CodecContext& context, const std::vector<float>& x) {
  const PayloadShape shape = RandomBlockCodec::Shape(params, layout).value();
  Encoded encoded;
  encoded.starts.assign(shape.indices, 0xFFFFFFFFu);
  encoded.values.assign(shape.values, kNan);
  EXPECT_TRUE(RandomBlockCodec::Encode(params, layout, context, x,
                                       {encoded.starts, encoded.values, {}, {}}, {})
                  .ok());
  return encoded;
}

// x[i] = base + i, so every value names the coordinate it came from.
std::vector<float> Ramp(std::size_t size, float base = 0.0f) {
  std::vector<float> x(size);
  for (std::size_t i = 0; i < size; ++i) x[i] = base + static_cast<float>(i);
  return x;
}

// The block's values read naively, coordinate by coordinate modulo the tensor size.
void ExpectBlockValues(const TensorLayout& layout, const std::uint32_t ratio,
                       const Encoded& encoded, const std::vector<float>& x) {
  std::size_t n = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::size_t length = RandomBlockCodec::BlockLength(size, ratio);
    ASSERT_LT(encoded.starts[t], size);
    for (std::size_t j = 0; j < length; ++j) {
      EXPECT_EQ(encoded.values[n++], x[layout.offset(t) + (encoded.starts[t] + j) % size]);
    }
  }
  EXPECT_EQ(n, encoded.values.size());
}

TEST(RandomBlockTest, ShapeHasOneStartPerTensorAndAtLeastOneValue) {
  const TensorLayout layout = Layout({1000, 10, 64});
  const PayloadShape shape =
      RandomBlockCodec::Shape(RandomBlockParams{.block_ratio = 64}, layout).value();
  EXPECT_EQ(shape.indices, 3u);
  EXPECT_EQ(shape.values, 15u + 1u + 1u);
  EXPECT_EQ(shape.words + shape.scales, 0u);
  EXPECT_EQ(RandomBlockCodec::BlockLength(10, 1), 10u);
  EXPECT_EQ(RandomBlockCodec::BlockLength(10, 0), 1u);  // invalid, but no division by zero
}

TEST(RandomBlockTest, StartIsTheSharedStreamDraw) {
  for (std::uint32_t round = 0; round < 20; ++round) {
    const CodecContext context{0xFEEDFACECAFEBEEFull, round, 5};
    for (std::uint32_t tensor = 0; tensor < 3; ++tensor) {
      CounterRng rng(context.seed, round, tensor, StreamId(RandomPurpose::kBlockStart));
      EXPECT_EQ(RandomBlockCodec::BlockStart(context, tensor, 12345), rng.NextBelow(12345));
    }
  }
  EXPECT_EQ(RandomBlockCodec::BlockStart({}, 0, 1), 0u);
}

// Fixed starts for a fixed seed: every architecture (CI runs these under qemu) must agree.
TEST(RandomBlockTest, GoldenStarts) {
  const std::uint32_t expected[] = {477, 577, 10, 707};
  for (std::uint32_t round = 0; round < 4; ++round) {
    EXPECT_EQ(RandomBlockCodec::BlockStart({42, round, 0}, 1, 1000), expected[round]);
  }
}

TEST(RandomBlockTest, SameBlockOnEveryWorker) {
  const TensorLayout layout = Layout({640, 100, 33});
  const RandomBlockParams params{.block_ratio = 8};
  for (std::uint32_t round = 0; round < 10; ++round) {
    std::vector<std::uint32_t> reference;
    for (std::uint32_t worker = 0; worker < 4; ++worker) {
      const std::vector<float> x = Ramp(layout.dimension(), 10000.0f * static_cast<float>(worker));
      const Encoded encoded = EncodeBlock(params, layout, {42, round, worker}, x);
      if (worker == 0) reference = encoded.starts;
      EXPECT_EQ(encoded.starts, reference);
      ExpectBlockValues(layout, 8, encoded, x);
    }
  }
}

TEST(RandomBlockTest, WrapsAtTheTensorEnd) {
  // Tensor 1 (100 coordinates, blocks of 25) wraps whenever its start is above 75; the block
  // must come back to the tensor's own start, not spill into a neighbour.
  const TensorLayout layout = Layout({50, 100, 30});
  const RandomBlockParams params{.block_ratio = 4};
  const std::vector<float> x = Ramp(layout.dimension());
  int wrapped = 0;
  for (std::uint32_t round = 0; round < 200; ++round) {
    const Encoded encoded = EncodeBlock(params, layout, {3, round, 0}, x);
    ExpectBlockValues(layout, 4, encoded, x);
    if (encoded.starts[1] > 75) {
      ++wrapped;
      const std::size_t head = 100 - encoded.starts[1];
      EXPECT_EQ(encoded.values[12 + head], 50.0f);  // tensor 1's values follow tensor 0's 12
    }
  }
  EXPECT_GT(wrapped, 0);
}

TEST(RandomBlockTest, EveryStartReachableRoughlyUniformly) {
  constexpr std::uint32_t kSize = 37;
  constexpr int kPerStart = 1000;
  constexpr int kRounds = kSize * kPerStart;
  std::vector<int> counts(kSize, 0);
  for (int round = 0; round < kRounds; ++round) {
    ++counts[RandomBlockCodec::BlockStart({9, static_cast<std::uint32_t>(round), 0}, 1, kSize)];
  }
  const double p = 1.0 / kSize;
  const double sigma = std::sqrt(kRounds * p * (1.0 - p));
  for (std::uint32_t s = 0; s < kSize; ++s) {
    EXPECT_GT(counts[s], 0);
    EXPECT_NEAR(counts[s], kPerStart, 5.0 * sigma) << "start " << s;
  }
}

TEST(RandomBlockTest, RoundTripAddsWeightedBlock) {
  const TensorLayout layout = Layout({50, 100, 30});
  const RandomBlockParams params{.block_ratio = 3};
  const std::vector<float> x = Ramp(layout.dimension(), 0.5f);
  for (std::uint32_t round = 0; round < 20; ++round) {
    const Encoded encoded = EncodeBlock(params, layout, {8, round, 1}, x);
    std::vector<float> acc = Ramp(layout.dimension(), -3.25f);
    std::vector<float> expected = acc;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      const std::size_t size = layout.size(t);
      for (std::size_t j = 0; j < RandomBlockCodec::BlockLength(size, 3); ++j) {
        const std::size_t at = layout.offset(t) + (encoded.starts[t] + j) % size;
        expected[at] += -0.5f * x[at];
      }
    }
    // The transmitted starts locate the blocks: any context decodes the same way.
    ASSERT_TRUE(RandomBlockCodec::DecodeAdd(params, layout, {1234, round + 77, 6}, encoded.View(),
                                            -0.5f, acc, {})
                    .ok());
    EXPECT_EQ(acc, expected);
  }
}

TEST(RandomBlockTest, DecodeRejectsMalformedPayloadsAndLeavesAccumulatorUntouched) {
  const TensorLayout layout = Layout({50, 100, 30});
  const RandomBlockParams params{.block_ratio = 4};
  const Encoded good = EncodeBlock(params, layout, {1, 1, 0}, Ramp(layout.dimension()));
  std::vector<float> acc(layout.dimension(), 4.0f);
  const std::vector<float> before = acc;
  auto decode = [&](const PayloadView& view) {
    return RandomBlockCodec::DecodeAdd(params, layout, {}, view, 1.0f, acc, {});
  };
  for (const std::uint32_t start : {100u, 101u, 0xFFFFFFFFu}) {
    Encoded bad = good;
    bad.starts[1] = start;
    EXPECT_EQ(decode(bad.View()), Status::DataLoss()) << start;
  }
  {
    Encoded bad = good;
    bad.starts[2] = 30;
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
  }
  for (const float poison : {kNan, kInf, -kInf}) {
    Encoded bad = good;
    bad.values[20] = poison;
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
  }
  {
    Encoded bad = good;
    bad.values.pop_back();
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
    bad = good;
    bad.values.push_back(1.0f);
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
    bad = good;
    bad.starts.pop_back();
    EXPECT_EQ(decode(bad.View()), Status::DataLoss());
    const std::vector<std::uint32_t> word = {0};
    EXPECT_EQ(decode(PayloadView(good.starts, good.values, word, {})), Status::DataLoss());
  }
  EXPECT_EQ(acc, before);
  EXPECT_TRUE(decode(good.View()).ok());
}

TEST(RandomBlockTest, RejectsBadParametersAndBuffers) {
  const TensorLayout layout = Layout({50, 100});
  const std::vector<float> x = Ramp(layout.dimension());
  std::vector<std::uint32_t> starts(2);
  std::vector<float> values(12 + 25);
  const RandomBlockParams bad{.block_ratio = 0};
  EXPECT_EQ(RandomBlockCodec::Shape(bad, layout).status(), Status::InvalidArgument());
  EXPECT_EQ(RandomBlockCodec::Encode(bad, layout, {}, x, {starts, values, {}, {}}, {}),
            Status::InvalidArgument());
  EXPECT_EQ(RandomBlockCodec::Shape(RandomBlockParams{.block_ratio = 4}, TensorLayout()).status(),
            Status::InvalidArgument());

  const RandomBlockParams params{.block_ratio = 4};
  EXPECT_EQ(RandomBlockCodec::Encode(params, layout, {}, std::span(x).first(149),
                                     {starts, values, {}, {}}, {}),
            Status::InvalidArgument());
  EXPECT_EQ(RandomBlockCodec::Encode(params, layout, {}, x,
                                     {std::span(starts).first(1), values, {}, {}}, {}),
            Status::ResourceExhausted());
  EXPECT_EQ(RandomBlockCodec::Encode(params, layout, {}, x,
                                     {starts, std::span(values).first(36), {}, {}}, {}),
            Status::ResourceExhausted());
  ASSERT_TRUE(RandomBlockCodec::Encode(params, layout, {}, x, {starts, values, {}, {}}, {}).ok());

  std::vector<float> acc(layout.dimension());
  const PayloadView view(starts, values, {}, {});
  EXPECT_EQ(
      RandomBlockCodec::DecodeAdd(params, layout, {}, view, 1.0f, std::span(acc).first(149), {}),
      Status::InvalidArgument());
  EXPECT_EQ(RandomBlockCodec::DecodeAdd(bad, layout, {}, view, 1.0f, acc, {}),
            Status::InvalidArgument());
  EXPECT_TRUE(RandomBlockCodec::DecodeAdd(params, layout, {}, view, 1.0f, acc, {}).ok());
}

}  // namespace
}  // namespace edgesgd
