#include "edgesgd/core/aggregator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;
using test_util::DecodeDense;
using test_util::EveryCodec;
using test_util::kInf;
using test_util::kNaN;
using test_util::PayloadBuffers;

TensorLayout TestLayout() {
  const std::uint64_t sizes[] = {29, 64, 3, 100};
  return TensorLayout::FromSizes(sizes).value();
}

std::vector<float> RandomVector(std::size_t d, std::uint32_t stream) {
  return test_util::UniformVector(d, 17, stream, 2.0f);
}

TEST(AggregatorTest, MeanOfIdentityPayloadsIsTheDenseMean) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams identity;
  ArenaBox box(MeanAggregator::StateBytes(layout, identity));
  MeanAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(box.arena, AllCodecs(), layout, identity).ok());
  std::vector<std::vector<float>> inputs;
  for (std::uint32_t i = 0; i < 3; ++i) {
    inputs.push_back(RandomVector(d, i));
    PayloadView view({}, inputs.back(), {}, {});
    ASSERT_TRUE(aggregator.Add(view, {}).ok());
  }
  EXPECT_EQ(aggregator.count(), 3u);
  EXPECT_EQ(aggregator.total_weight(), 3.0f);
  const Result<std::span<const float>> mean = aggregator.Mean();
  ASSERT_TRUE(mean.ok());
  for (std::size_t j = 0; j < d; ++j) {
    // Same order of operations as the aggregator: sum in arrival order, then divide.
    const float expected = ((inputs[0][j] + inputs[1][j]) + inputs[2][j]) / 3.0f;
    ASSERT_EQ(mean.value()[j], expected) << j;
  }
  // Mean() is idempotent.
  const Result<std::span<const float>> again = aggregator.Mean();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()[5], mean.value()[5]);
}

TEST(AggregatorTest, WeightedMeanAndServerStep) {
  const TensorLayout layout = TensorLayout::Single(3).value();
  ArenaBox box(MeanAggregator::StateBytes(layout, CodecParams{}));
  MeanAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(box.arena, AllCodecs(), layout, CodecParams{}).ok());
  const std::vector<float> a = {1.0f, 2.0f, -4.0f};
  const std::vector<float> b = {5.0f, -2.0f, 0.0f};
  ASSERT_TRUE(aggregator.Add(PayloadView({}, a, {}, {}), {}, 1.0f).ok());
  ASSERT_TRUE(aggregator.AddDense(b, 3.0f).ok());
  std::vector<float> x = {10.0f, 10.0f, 10.0f};
  // x -= (1 a + 3 b) / 4
  ASSERT_TRUE(aggregator.AddScaledMean(-1.0f, x).ok());
  EXPECT_EQ(x, (std::vector<float>{6.0f, 11.0f, 11.0f}));
  ASSERT_TRUE(aggregator.AddScaledMean(0.5f, x).ok());
  EXPECT_EQ(x, (std::vector<float>{8.0f, 10.5f, 10.5f}));
}

// One payload of any codec: the mean is its decode.
TEST(AggregatorTest, AcceptsEveryCodec) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  for (const CodecParams& codec : EveryCodec({})) {
    SCOPED_TRACE(CodecName(codec));
    ArenaBox box(MeanAggregator::StateBytes(layout, codec));
    MeanAggregator aggregator;
    ASSERT_TRUE(aggregator.Init(box.arena, AllCodecs(), layout, codec).ok());
    EXPECT_EQ(box.arena.used_bytes(), MeanAggregator::StateBytes(layout, codec));
    PayloadBuffers payload(EncodedShape(codec, layout).value());
    const CodecContext context{8, 3, 1};
    std::vector<std::byte> scratch(CodecScratchBytes(codec, layout));
    const std::vector<float> input = RandomVector(d, 9);
    ASSERT_TRUE(AllCodecs().Encode(codec, layout, context, input, payload.spans(), scratch).ok());
    ASSERT_TRUE(aggregator.Add(payload.view(), context).ok());
    const Result<std::span<const float>> mean = aggregator.Mean();
    ASSERT_TRUE(mean.ok());
    const std::vector<float> decoded = DecodeDense(codec, layout, context, payload.view());
    for (std::size_t j = 0; j < d; ++j) ASSERT_EQ(mean.value()[j], decoded[j]) << j;
  }
}

TEST(AggregatorTest, CorruptPayloadLeavesTheSumUntouched) {
  const TensorLayout layout = TensorLayout::Single(4).value();
  ArenaBox box(MeanAggregator::StateBytes(layout, CodecParams{}));
  MeanAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(box.arena, AllCodecs(), layout, CodecParams{}).ok());
  const std::vector<float> good = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> short_values = {1.0f, 2.0f, 3.0f};
  ASSERT_TRUE(aggregator.Add(PayloadView({}, good, {}, {}), {}).ok());
  EXPECT_EQ(aggregator.Add(PayloadView({}, short_values, {}, {}), {}), Status::DataLoss());
  EXPECT_EQ(aggregator.count(), 1u);
  const Result<std::span<const float>> mean = aggregator.Mean();
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(std::vector<float>(mean.value().begin(), mean.value().end()), good);
  // Finished: further contributions wait for Reset.
  EXPECT_EQ(aggregator.Add(PayloadView({}, good, {}, {}), {}), Status::FailedPrecondition());
  EXPECT_EQ(aggregator.AddDense(good), Status::FailedPrecondition());
  aggregator.Reset();
  EXPECT_EQ(aggregator.count(), 0u);
  EXPECT_EQ(aggregator.Mean().status(), Status::FailedPrecondition());
  ASSERT_TRUE(aggregator.AddDense(good, 2.0f).ok());
  ASSERT_TRUE(aggregator.Mean().ok());
  EXPECT_EQ(aggregator.Mean().value()[3], 4.0f);
}

TEST(AggregatorTest, RejectsBadArguments) {
  const TensorLayout layout = TensorLayout::Single(4).value();
  MeanAggregator aggregator;
  std::vector<float> x(4, 0.0f);
  EXPECT_EQ(aggregator.AddDense(x), Status::FailedPrecondition());
  EXPECT_EQ(aggregator.Mean().status(), Status::FailedPrecondition());
  EXPECT_EQ(aggregator.AddScaledMean(-1.0f, x), Status::FailedPrecondition());
  {
    ArenaBox box(MeanAggregator::StateBytes(layout, CodecParams{}) - 1);
    EXPECT_EQ(aggregator.Init(box.arena, AllCodecs(), layout, CodecParams{}),
              Status::ResourceExhausted());
    EXPECT_EQ(box.arena.used_bytes(), 0u);
    const CodecParams bad = QsgdParams{.levels = 0};
    EXPECT_EQ(aggregator.Init(box.arena, AllCodecs(), layout, bad), Status::InvalidArgument());
    EXPECT_EQ(MeanAggregator::StateBytes(layout, bad), 0u);
    EXPECT_EQ(aggregator.Init(box.arena, AllCodecs(), TensorLayout(), CodecParams{}),
              Status::InvalidArgument());
    EXPECT_EQ(aggregator.Init(box.arena, test_util::TopKOnlyCodecs(), layout, CodecParams{}),
              Status::FailedPrecondition());
    box.arena.Seal();
    EXPECT_EQ(aggregator.Init(box.arena, AllCodecs(), layout, CodecParams{}),
              Status::FailedPrecondition());
  }
  ArenaBox box(MeanAggregator::StateBytes(layout, CodecParams{}));
  ASSERT_TRUE(aggregator.Init(box.arena, AllCodecs(), layout, CodecParams{}).ok());
  for (const float weight : {0.0f, -1.0f, kNaN, kInf}) {
    EXPECT_EQ(aggregator.AddDense(x, weight), Status::InvalidArgument());
    EXPECT_EQ(aggregator.Add(PayloadView({}, x, {}, {}), {}, weight), Status::InvalidArgument());
  }
  EXPECT_EQ(aggregator.AddDense(std::span(x).first(3)), Status::InvalidArgument());
  std::vector<float> poisoned = {1.0f, kNaN, 0.0f, 0.0f};
  EXPECT_EQ(aggregator.AddDense(poisoned), Status::DataLoss());
  EXPECT_EQ(aggregator.count(), 0u);
  ASSERT_TRUE(aggregator.AddDense(x).ok());
  EXPECT_EQ(aggregator.AddScaledMean(-1.0f, std::span(x).first(3)), Status::InvalidArgument());
  EXPECT_EQ(aggregator.AddScaledMean(kNaN, x), Status::InvalidArgument());
}

// Payload-space aggregation gives the same vector as decoding every payload densely.
TEST(AggregatorTest, PayloadMeanEqualsDenseMean) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  constexpr std::uint32_t kWorkers = 5;
  std::vector<CodecParams> summable;
  for (const CodecParams& codec : EveryCodec({})) {
    if (!TraitsOf(codec).payload_sum) continue;
    summable.push_back(codec);
    if (const auto* rand_k = std::get_if<RandKParams>(&codec)) {
      summable.push_back(
          RandKParams{.k_ratio = rand_k->k_ratio, .scaling = RandKScaling::kUnbiased});
    }
  }
  for (const CodecParams& params : summable) {
    SCOPED_TRACE(CodecName(params));
    ArenaBox dense_box(MeanAggregator::StateBytes(layout, params));
    MeanAggregator dense;
    ASSERT_TRUE(dense.Init(dense_box.arena, AllCodecs(), layout, params).ok());
    const std::size_t bytes = PayloadAggregator::StateBytes(layout, params);
    ArenaBox payload_box(bytes);
    PayloadAggregator compressed;
    ASSERT_TRUE(compressed.Init(payload_box.arena, layout, params).ok());
    EXPECT_EQ(payload_box.arena.used_bytes(), bytes);

    const PayloadShape shape = EncodedShape(params, layout).value();
    EXPECT_EQ(compressed.payload_shape(), shape);
    std::vector<std::byte> scratch(CodecScratchBytes(params, layout));
    for (std::uint32_t round = 0; round < 3; ++round) {
      dense.Reset();
      compressed.Reset();
      for (std::uint32_t i = 0; i < kWorkers; ++i) {
        // Same seed and round for everyone (shared indices); the worker id differs.
        const CodecContext context{123, round, i};
        PayloadBuffers payload(shape);
        const std::vector<float> input = RandomVector(d, round * 100 + i);
        ASSERT_TRUE(
            AllCodecs().Encode(params, layout, context, input, payload.spans(), scratch).ok());
        const float weight = 1.0f + static_cast<float>(i % 2);
        ASSERT_TRUE(dense.Add(payload.view(), context, weight).ok());
        ASSERT_TRUE(compressed.Add(payload.view(), weight).ok());
      }
      const Result<PayloadView> aggregate = compressed.Mean();
      ASSERT_TRUE(aggregate.ok());
      EXPECT_EQ(aggregate.value().values.size(), shape.values);
      EXPECT_EQ(aggregate.value().indices.size(), shape.indices);
      const std::vector<float> decoded =
          DecodeDense(params, layout, CodecContext{123, round, 0}, aggregate.value());
      const Result<std::span<const float>> mean = dense.Mean();
      ASSERT_TRUE(mean.ok());
      for (std::size_t j = 0; j < d; ++j) {
        ASSERT_NEAR(decoded[j], mean.value()[j], 1e-6f * (1.0f + std::abs(mean.value()[j])))
            << "round " << round << " coordinate " << j;
      }
    }
  }
}

TEST(AggregatorTest, PayloadAggregatorChecksBlockStarts) {
  const TensorLayout layout = TestLayout();
  const CodecParams codec = RandomBlockParams{.block_ratio = 4};
  ArenaBox box(PayloadAggregator::StateBytes(layout, codec));
  PayloadAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(box.arena, layout, codec).ok());
  PayloadBuffers payload(EncodedShape(codec, layout).value());
  const std::vector<float> input = RandomVector(layout.dimension(), 1);
  ASSERT_TRUE(AllCodecs().Encode(codec, layout, {4, 2, 0}, input, payload.spans(), {}).ok());
  ASSERT_TRUE(aggregator.Add(payload.view()).ok());

  PayloadBuffers shifted = payload;
  shifted.indices[1] = (shifted.indices[1] + 1) % 64;
  EXPECT_EQ(aggregator.Add(shifted.view()), Status::InvalidArgument());
  PayloadBuffers outside = payload;
  outside.indices[2] = 3;  // the third tensor has 3 coordinates
  EXPECT_EQ(aggregator.Add(outside.view()), Status::DataLoss());
  PayloadBuffers poisoned = payload;
  poisoned.values[0] = kInf;
  EXPECT_EQ(aggregator.Add(poisoned.view()), Status::DataLoss());
  PayloadBuffers truncated = payload;
  truncated.values.pop_back();
  EXPECT_EQ(aggregator.Add(truncated.view()), Status::DataLoss());
  EXPECT_EQ(aggregator.Add(payload.view(), 0.0f), Status::InvalidArgument());
  EXPECT_EQ(aggregator.count(), 1u);

  const Result<PayloadView> mean = aggregator.Mean();
  ASSERT_TRUE(mean.ok());
  EXPECT_TRUE(std::equal(mean.value().indices.begin(), mean.value().indices.end(),
                         payload.indices.begin()));
  EXPECT_TRUE(
      std::equal(mean.value().values.begin(), mean.value().values.end(), payload.values.begin()));
  EXPECT_EQ(aggregator.Add(payload.view()), Status::FailedPrecondition());
  aggregator.Reset();
  EXPECT_EQ(aggregator.Mean().status(), Status::FailedPrecondition());
  // After Reset another round's starts are accepted.
  ASSERT_TRUE(AllCodecs().Encode(codec, layout, {4, 3, 0}, input, shifted.spans(), {}).ok());
  EXPECT_TRUE(aggregator.Add(shifted.view()).ok());
}

TEST(AggregatorTest, PayloadAggregatorRejectsCodecsWithoutPayloadSums) {
  const TensorLayout layout = TestLayout();
  for (const CodecParams& codec : EveryCodec({})) {
    const std::size_t bytes = PayloadAggregator::StateBytes(layout, codec);
    ArenaBox box(bytes + 1024);
    PayloadAggregator aggregator;
    if (TraitsOf(codec).payload_sum) {
      EXPECT_GT(bytes, 0u);
      ASSERT_TRUE(aggregator.Init(box.arena, layout, codec).ok());
      EXPECT_EQ(box.arena.used_bytes(), bytes);
    } else {
      EXPECT_EQ(bytes, 0u);
      EXPECT_EQ(aggregator.Init(box.arena, layout, codec), Status::InvalidArgument());
      EXPECT_EQ(box.arena.used_bytes(), 0u);
    }
  }
  PayloadAggregator uninitialized;
  EXPECT_EQ(uninitialized.Add(PayloadView()), Status::FailedPrecondition());
  EXPECT_EQ(uninitialized.Mean().status(), Status::FailedPrecondition());
  static_assert(TraitsOf(RandKParams{}).payload_sum && !TraitsOf(TopKParams{}).payload_sum);
}

TEST(AggregatorTest, StateBytesMatchesArenaUsage) {
  for (const std::uint64_t size : {1u, 31u, 1000u}) {
    const std::uint64_t sizes[] = {size, 7};
    const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
    for (const CodecParams& codec : EveryCodec({})) {
      const std::size_t bytes = MeanAggregator::StateBytes(layout, codec);
      EXPECT_EQ(bytes, ArenaBytesFor<float>(layout.dimension()) +
                           ArenaBytes(CodecScratchBytes(codec, layout)));
      ArenaBox box(bytes);
      MeanAggregator aggregator;
      ASSERT_TRUE(aggregator.Init(box.arena, AllCodecs(), layout, codec).ok());
      EXPECT_EQ(box.arena.used_bytes(), bytes);
    }
  }
}

}  // namespace
}  // namespace edgesgd
