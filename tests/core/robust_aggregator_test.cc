#include "edgesgd/core/robust_aggregator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/codec_registry.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;
using test_util::kInf;
using test_util::PayloadBuffers;

using Rows = std::vector<std::vector<float>>;

// A robust aggregator over dense (identity) rows, sized for `capacity` updates.
struct RobustBox {
  RobustBox(const TensorLayout& layout, const RobustParams& params, std::uint32_t capacity)
      : box(RobustAggregator::StateBytes(layout, CodecParams{}, params, capacity)) {
    status = robust.Init(box.arena, AllCodecs(), layout, CodecParams{}, params, capacity);
  }
  std::vector<float> Aggregate(const Rows& rows) {
    robust.Reset();
    for (const std::vector<float>& row : rows) {
      EXPECT_TRUE(robust.Add(CodecParams{}, PayloadView({}, row, {}, {}), {}).ok());
    }
    const Result<std::span<const float>> out = robust.Aggregate();
    EXPECT_TRUE(out.ok());
    return out.ok() ? std::vector<float>(out.value().begin(), out.value().end())
                    : std::vector<float>();
  }
  ArenaBox box;
  RobustAggregator robust;
  Status status;
};

TensorLayout Dense(std::size_t d) { return TensorLayout::Single(d).value(); }

Rows RandomRows(std::size_t n, std::size_t d, std::uint32_t stream) {
  Rows rows;
  for (std::size_t i = 0; i < n; ++i) {
    rows.push_back(test_util::UniformVector(d, 23, stream + static_cast<std::uint32_t>(i), 1.0f));
  }
  return rows;
}

TEST(RobustAggregatorTest, MedianOfOddAndEvenCounts) {
  RobustBox box(Dense(3), {.rule = RobustRule::kMedian}, 4);
  ASSERT_TRUE(box.status.ok());
  EXPECT_EQ(box.Aggregate({{1, -5, 0}, {7, 2, 0}, {3, 100, 0}}), (std::vector<float>{3, 2, 0}));
  // Even: the mean of the two middle values.
  EXPECT_EQ(box.Aggregate({{1, -5, 2}, {7, 2, 2}, {3, 100, 2}, {-50, 4, 2}}),
            (std::vector<float>{2, 3, 2}));
}

TEST(RobustAggregatorTest, TrimmedMeanDropsFFromEachEnd) {
  RobustBox box(Dense(2), {.rule = RobustRule::kTrimmedMean, .byzantine = 1}, 5);
  ASSERT_TRUE(box.status.ok());
  EXPECT_EQ(box.Aggregate({{1, 10}, {2, -1e6f}, {3, 20}, {1e6f, 30}, {4, 40}}),
            (std::vector<float>{3, 20}));
  // Fewer updates than 2f + 1: it trims what it can, down to the median.
  RobustBox wide(Dense(1), {.rule = RobustRule::kTrimmedMean, .byzantine = 4}, 5);
  EXPECT_EQ(wide.Aggregate({{9}, {1}, {5}}), (std::vector<float>{5}));
}

TEST(RobustAggregatorTest, TrimmedMeanWithoutTrimmingIsTheMean) {
  const std::size_t d = 50;
  const Rows rows = RandomRows(4, d, 1);
  RobustBox box(Dense(d), {.rule = RobustRule::kTrimmedMean, .byzantine = 0}, 4);
  const std::vector<float> out = box.Aggregate(rows);
  for (std::size_t j = 0; j < d; ++j) {
    const float mean = (rows[0][j] + rows[1][j] + rows[2][j] + rows[3][j]) / 4.0f;
    EXPECT_NEAR(out[j], mean, 1e-6f) << j;
  }
}

// Multi-Krum keeps the n - f updates closest to their neighbours: far outliers are left out,
// and the result is the mean of the honest rows exactly (summed in row order).
TEST(RobustAggregatorTest, MultiKrumLeavesOutliersOut) {
  const std::size_t d = 20;
  Rows rows = RandomRows(7, d, 10);
  for (float& v : rows[2]) v = 50.0f;   // far away
  for (float& v : rows[5]) v *= -40.0f;  // scaled and flipped
  RobustBox box(Dense(d), {.rule = RobustRule::kMultiKrum, .byzantine = 2}, 7);
  ASSERT_TRUE(box.status.ok());
  const std::vector<float> out = box.Aggregate(rows);
  for (std::size_t j = 0; j < d; ++j) {
    const float expected =
        ((((rows[0][j] + rows[1][j]) + rows[3][j]) + rows[4][j]) + rows[6][j]) / 5.0f;
    EXPECT_EQ(out[j], expected) << j;
  }
}

TEST(RobustAggregatorTest, MultiKrumOfOneOrTwoUpdates) {
  RobustBox box(Dense(2), {.rule = RobustRule::kMultiKrum, .byzantine = 3}, 4);
  EXPECT_EQ(box.Aggregate({{1, 2}}), (std::vector<float>{1, 2}));
  // f >= n: one update (the lower row among equal scores) is kept.
  EXPECT_EQ(box.Aggregate({{1, 2}, {3, 4}}), (std::vector<float>{1, 2}));
}

// With a radius no update reaches, one pass of centered clipping is the mean; and the centre
// carries over to the next round.
TEST(RobustAggregatorTest, CenteredClippingWithAWideRadiusIsTheMean) {
  const std::size_t d = 30;
  const Rows rows = RandomRows(5, d, 3);
  RobustBox box(Dense(d), {.rule = RobustRule::kCenteredClipping, .clip_radius = 1e6f}, 5);
  ASSERT_TRUE(box.status.ok());
  const std::vector<float> out = box.Aggregate(rows);
  for (std::size_t j = 0; j < d; ++j) {
    float mean = 0.0f;
    for (const auto& row : rows) mean += row[j];
    EXPECT_NEAR(out[j], mean / 5.0f, 1e-5f) << j;
  }
  const std::span<const float> center = box.robust.center();
  ASSERT_EQ(center.size(), d);
  EXPECT_EQ(std::vector<float>(center.begin(), center.end()), out);
}

// Each update moves the aggregate at most tau / n away from the centre per pass, whatever its
// size: one attacker cannot drag it.
TEST(RobustAggregatorTest, CenteredClippingBoundsEachUpdatesPull) {
  const float tau = 0.5f;
  RobustBox box(Dense(2), {.rule = RobustRule::kCenteredClipping, .clip_radius = tau}, 4);
  const std::vector<float> out =
      box.Aggregate({{0, 0}, {0, 0}, {0, 0}, {3e4f, -4e4f}});  // |attacker| = 5e4
  const float moved = std::hypot(out[0], out[1]);
  EXPECT_NEAR(moved, tau / 4.0f, 1e-6f);
  // Several passes move the centre further towards the honest updates only.
  RobustBox passes(Dense(2),
                   {.rule = RobustRule::kCenteredClipping, .clip_radius = tau, .clip_iterations = 3},
                   4);
  const std::vector<float> three = passes.Aggregate({{0, 0}, {0, 0}, {0, 0}, {3e4f, -4e4f}});
  EXPECT_LE(std::hypot(three[0], three[1]), 3.0f * tau / 4.0f + 1e-6f);
}

TEST(RobustAggregatorTest, CentreRestoresOnlyFromFiniteBytesOfItsSize) {
  const std::size_t d = 3;
  RobustBox box(Dense(d), {.rule = RobustRule::kCenteredClipping}, 2);
  std::vector<float> saved = {0.5f, -1.0f, 2.0f};
  std::vector<std::byte> unaligned(1 + d * sizeof(float));
  std::memcpy(unaligned.data() + 1, saved.data(), d * sizeof(float));
  ASSERT_TRUE(box.robust.RestoreCenter(std::span(unaligned).subspan(1)).ok());
  EXPECT_EQ(std::vector<float>(box.robust.center().begin(), box.robust.center().end()), saved);
  std::vector<float> poisoned = saved;
  poisoned[1] = kInf;
  EXPECT_EQ(box.robust.RestoreCenter(std::as_bytes(std::span(poisoned))),
            Status::InvalidArgument());
  EXPECT_EQ(box.robust.RestoreCenter(std::as_bytes(std::span(saved).first(2))),
            Status::InvalidArgument());
  EXPECT_EQ(std::vector<float>(box.robust.center().begin(), box.robust.center().end()), saved);
  // The other rules keep no centre.
  RobustBox median(Dense(d), {.rule = RobustRule::kMedian}, 2);
  EXPECT_TRUE(median.robust.center().empty());
  EXPECT_TRUE(median.robust.RestoreCenter({}).ok());
}

// Compressed updates are decoded into rows: the median of top_k payloads is the median of the
// decoded vectors.
TEST(RobustAggregatorTest, DecodesCompressedPayloads) {
  const TensorLayout layout = Dense(40);
  const CodecParams top_k = TopKParams{.k_ratio = 0.25f};
  const RobustParams params{.rule = RobustRule::kMedian};
  ArenaBox box(RobustAggregator::StateBytes(layout, top_k, params, 3));
  RobustAggregator robust;
  ASSERT_TRUE(robust.Init(box.arena, AllCodecs(), layout, top_k, params, 3).ok());
  Rows decoded;
  for (std::uint32_t i = 0; i < 3; ++i) {
    const std::vector<float> input = test_util::UniformVector(40, 5, i, 1.0f);
    PayloadBuffers payload(EncodedShape(top_k, layout).value());
    std::vector<std::byte> scratch(CodecScratchBytes(top_k, layout));
    ASSERT_TRUE(AllCodecs().Encode(top_k, layout, {}, input, payload.spans(), scratch).ok());
    ASSERT_TRUE(robust.Add(top_k, payload.view(), {}).ok());
    decoded.push_back(test_util::DecodeDense(top_k, layout, {}, payload.view()));
  }
  const std::span<const float> out = robust.Aggregate().value();
  for (std::size_t j = 0; j < 40; ++j) {
    std::vector<float> column = {decoded[0][j], decoded[1][j], decoded[2][j]};
    std::sort(column.begin(), column.end());
    EXPECT_EQ(out[j], column[1]) << j;
  }
}

TEST(RobustAggregatorTest, StateBytesIsExactlyWhatInitTakes) {
  const TensorLayout layout = test_util::Layout({7, 30});
  for (const RobustRule rule : {RobustRule::kMedian, RobustRule::kTrimmedMean,
                                RobustRule::kMultiKrum, RobustRule::kCenteredClipping}) {
    for (const CodecParams& codec : {CodecParams{}, CodecParams{TopKParams{.k_ratio = 0.2f}},
                                     CodecParams{QsgdParams{}}}) {
      const RobustParams params{.rule = rule};
      const std::size_t bytes = RobustAggregator::StateBytes(layout, codec, params, 6);
      ASSERT_GT(bytes, 6u * 37u * sizeof(float));
      ArenaBox box(bytes);
      RobustAggregator robust;
      ASSERT_TRUE(robust.Init(box.arena, AllCodecs(), layout, codec, params, 6).ok());
      EXPECT_EQ(box.arena.used_bytes(), bytes);
      ArenaBox short_box(bytes - 1);
      RobustAggregator refused;
      EXPECT_EQ(refused.Init(short_box.arena, AllCodecs(), layout, codec, params, 6),
                Status::ResourceExhausted());
      EXPECT_EQ(short_box.arena.used_bytes(), 0u);
    }
  }
}

TEST(RobustAggregatorTest, RefusesWhatItCannotDo) {
  const TensorLayout layout = Dense(4);
  EXPECT_EQ(RobustAggregator::StateBytes(layout, {}, {.rule = RobustRule::kNone}, 3), 0u);
  EXPECT_EQ(RobustAggregator::StateBytes(layout, {}, {.rule = RobustRule::kMedian}, 0), 0u);
  EXPECT_FALSE(ValidateRobustParams({.rule = RobustRule::kCenteredClipping, .clip_radius = 0.0f})
                   .ok());
  EXPECT_FALSE(ValidateRobustParams(
                   {.rule = RobustRule::kCenteredClipping, .clip_iterations = kMaxClipIterations + 1})
                   .ok());
  EXPECT_FALSE(ValidateRobustParams({.rule = static_cast<RobustRule>(9)}).ok());

  RobustBox box(layout, {.rule = RobustRule::kMedian}, 2);
  EXPECT_EQ(box.robust.Aggregate().status(), Status::FailedPrecondition());  // nothing added
  const std::vector<float> row = {1, 2, 3, 4};
  ASSERT_TRUE(box.robust.Add({}, PayloadView({}, row, {}, {}), {}).ok());
  ASSERT_TRUE(box.robust.Add({}, PayloadView({}, row, {}, {}), {}).ok());
  // Full: a third update does not fit the rows it was sized for.
  EXPECT_EQ(box.robust.Add({}, PayloadView({}, row, {}, {}), {}), Status::FailedPrecondition());
  box.robust.Reset();
  // A malformed payload is not kept.
  const std::vector<float> short_row = {1, 2};
  EXPECT_EQ(box.robust.Add({}, PayloadView({}, short_row, {}, {}), {}), Status::DataLoss());
  EXPECT_EQ(box.robust.count(), 0u);
  EXPECT_EQ(box.robust.Add(TopKParams{}, PayloadView({}, row, {}, {}), {}),
            Status::InvalidArgument());
}

}  // namespace
}  // namespace edgesgd
