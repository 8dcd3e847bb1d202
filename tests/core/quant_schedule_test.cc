// The DQ-SGD quantization schedule of the qsgd codec (QuantScheduleKind::kDq): DqBits, the
// round's parameters a sender picks (QsgdCodec::RoundParams) and the headers a receiver accepts
// (QsgdCodec::ParamsForHeader).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/codecs/qsgd.h"
#include "edgesgd/core/error_feedback.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;
using test_util::Layout;
using test_util::PayloadBuffers;

QsgdParams Dq(float k, float rho, std::uint32_t bits_min = 2, std::uint32_t bits_max = 8) {
  return QsgdParams{.schedule = QuantScheduleKind::kDq,
                    .bits_min = bits_min,
                    .bits_max = bits_max,
                    .dq_k = k,
                    .dq_rho = rho};
}

QsgdParams Qsgd(std::uint32_t levels, std::uint32_t bucket = 512) {
  return QsgdParams{.levels = levels, .bucket = bucket};
}

// The level count `params` quantizes round `round` of `rounds` with, for a gradient of `norm`.
Result<std::uint32_t> RoundLevels(const QsgdParams& params, std::uint32_t round,
                                  std::uint32_t rounds, float norm) {
  const float gradient[] = {norm};
  EDGESGD_TRY_ASSIGN(const QsgdParams chosen,
                     QsgdCodec::RoundParams(params, round, rounds, gradient));
  return chosen.levels;
}

// Whether a receiver running `params` decodes a frame quantized with `levels`.
bool Accepts(const QsgdParams& params, std::uint32_t levels) {
  return QsgdCodec::ParamsForHeader(params, {.levels = levels, .bucket = params.bucket}).ok();
}

// The rule written out independently: s = ceil(norm * rho^((T-1-t)/2) * K),
// bits = 1 + ceil(log2(s + 1)), clipped.
std::uint32_t ReferenceBits(double norm, double rho, double k, std::uint32_t t,
                            std::uint32_t rounds, std::uint32_t bits_min, std::uint32_t bits_max) {
  const double s = std::ceil(norm * std::pow(rho, (rounds - 1.0 - t) / 2.0) * k);
  const double bits = 1.0 + std::ceil(std::log2(s + 1.0));
  return static_cast<std::uint32_t>(std::clamp(bits, double(bits_min), double(bits_max)));
}

TEST(QuantScheduleTest, DqBitsFollowTheRule) {
  // Last round (no contraction left): s = ceil(norm * K).
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), 1.0f, 599, 600).value(), 6u);    // s = 20 -> 1 + 5
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), 0.125f, 599, 600).value(), 3u);  // s = ceil(2.5) -> 1 + 2
  EXPECT_EQ(DqBits(Dq(1.0f, 0.5f), 3.0f, 9, 10).value(), 3u);         // s = 3 -> 1 + 2
  EXPECT_EQ(DqBits(Dq(1.0f, 0.5f), 3.5f, 9, 10).value(), 4u);         // s = 4 -> 1 + 3
  // Two rounds before the end: one factor of rho.
  EXPECT_EQ(DqBits(Dq(1.0f, 0.5f), 7.0f, 7, 10).value(), 4u);  // s = ceil(3.5) = 4 -> 1 + 3
  EXPECT_EQ(DqBits(Dq(1.0f, 0.5f), 6.0f, 7, 10).value(), 3u);  // s = 3 -> 1 + 2
  for (const float norm : {0.01f, 0.3f, 1.0f, 2.5f, 40.0f}) {
    for (const std::uint32_t t : {0u, 1u, 250u, 598u, 599u}) {
      EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), norm, t, 600).value(),
                ReferenceBits(static_cast<double>(norm), 0.99, 20.0, t, 600, 2, 8))
          << "norm " << norm << " round " << t;
    }
  }
}

TEST(QuantScheduleTest, DqBitsClipToTheRange) {
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), 0.0f, 599, 600).value(), 2u);  // s = 0: 1 bit -> min
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), 1e6f, 599, 600).value(), 8u);  // s huge -> max
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f, 3, 5), 1e-3f, 0, 600).value(), 3u);
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f, 3, 5), 1e3f, 599, 600).value(), 5u);
  // Beyond every level count a 16-bit field holds (and beyond uint32): still bits_max.
  EXPECT_EQ(DqBits(Dq(3e38f, 1.0f, 2, 16), 3e38f, 0, 1).value(), 16u);
  // A round past the end counts as the last.
  EXPECT_EQ(DqBits(Dq(20.0f, 0.5f), 1.0f, 1000, 600).value(),
            DqBits(Dq(20.0f, 0.5f), 1.0f, 599, 600).value());
}

TEST(QuantScheduleTest, DqBitsNeverDecreaseAsTheEndApproaches) {
  // Fewer rounds left (larger t) and larger norms never mean fewer bits.
  for (const float rho : {0.5f, 0.9f, 0.99f, 1.0f}) {
    for (const float norm : {0.05f, 0.5f, 5.0f}) {
      std::uint32_t previous = 0;
      for (std::uint32_t t = 0; t < 400; ++t) {
        const std::uint32_t bits = DqBits(Dq(20.0f, rho), norm, t, 400).value();
        EXPECT_GE(bits, previous) << "rho " << rho << " norm " << norm << " round " << t;
        EXPECT_GE(DqBits(Dq(20.0f, rho), 2.0f * norm, t, 400).value(), bits);
        previous = bits;
      }
    }
  }
  // rho = 1: the rounds left do not matter.
  EXPECT_EQ(DqBits(Dq(20.0f, 1.0f), 0.3f, 0, 400).value(),
            DqBits(Dq(20.0f, 1.0f), 0.3f, 399, 400).value());
  // rho < 1 really does spend fewer bits early.
  EXPECT_LT(DqBits(Dq(20.0f, 0.99f), 1.0f, 0, 600).value(),
            DqBits(Dq(20.0f, 0.99f), 1.0f, 599, 600).value());
}

TEST(QuantScheduleTest, RejectsBadParameters) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(QsgdCodec::Validate(QsgdParams{}).ok());
  EXPECT_TRUE(QsgdCodec::Validate(Dq(20.0f, 0.99f)).ok());
  EXPECT_TRUE(QsgdCodec::Validate(Dq(20.0f, 1.0f, 2, 16)).ok());
  EXPECT_TRUE(QsgdCodec::Validate(Dq(20.0f, 0.99f, 4, 4)).ok());
  const QsgdParams bad[] = {
      Dq(20.0f, 0.99f, 1, 8), Dq(20.0f, 0.99f, 2, 17), Dq(20.0f, 0.99f, 6, 5), Dq(0.0f, 0.99f),
      Dq(-1.0f, 0.99f),       Dq(kNan, 0.99f),         Dq(kInf, 0.99f),        Dq(20.0f, 0.0f),
      Dq(20.0f, 1.01f),       Dq(20.0f, kNan),         Dq(20.0f, -0.5f),
  };
  for (const QsgdParams& params : bad) {
    EXPECT_EQ(QsgdCodec::Validate(params), Status::InvalidArgument());
    EXPECT_EQ(DqBits(params, 1.0f, 0, 10).status(), Status::InvalidArgument());
    EXPECT_EQ(RoundLevels(params, 0, 10, 1.0f).status(), Status::InvalidArgument());
  }
  QsgdParams unknown;
  unknown.schedule = static_cast<QuantScheduleKind>(7);
  EXPECT_EQ(QsgdCodec::Validate(unknown), Status::InvalidArgument());
  // Bad norms and run lengths.
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), -1.0f, 0, 10).status(), Status::InvalidArgument());
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), kNan, 0, 10).status(), Status::InvalidArgument());
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), kInf, 0, 10).status(), Status::InvalidArgument());
  EXPECT_EQ(DqBits(Dq(20.0f, 0.99f), 1.0f, 0, 0).status(), Status::InvalidArgument());
  EXPECT_EQ(RoundLevels(Dq(20.0f, 0.99f), 0, 0, 1.0f).status(), Status::InvalidArgument());
  EXPECT_EQ(RoundLevels(Qsgd(0), 0, 10, 1.0f).status(), Status::InvalidArgument());
  EXPECT_EQ(RoundLevels(Qsgd(kMaxQsgdLevels + 1), 0, 10, 1.0f).status(), Status::InvalidArgument());
  ASSERT_TRUE(RoundLevels(Dq(20.0f, 0.99f), 0, 10, 1.0f).ok());
  EXPECT_EQ(RoundLevels(Dq(20.0f, 0.99f), 0, 10, kNan).status(), Status::InvalidArgument());
}

TEST(QuantScheduleTest, FixedScheduleAlwaysUsesTheCodecLevels) {
  const QsgdParams fixed = Qsgd(7);
  EXPECT_EQ(QsgdCodec::MaxLevels(fixed), 7u);
  EXPECT_EQ(QsgdCodec::QuantizedHeaderOf(fixed), (QuantizedHeader{.levels = 7, .bucket = 512}));
  for (const std::uint32_t t : {0u, 50u, 99u}) {
    EXPECT_EQ(RoundLevels(fixed, t, 100, 1e-9f).value(), 7u);
    EXPECT_EQ(RoundLevels(fixed, t, 100, 1e9f).value(), 7u);
  }
  // A fixed schedule never reads the gradient, even a non-finite one.
  const std::vector<float> nan_gradient(3, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(QsgdCodec::RoundParams(fixed, 3, 100, nan_gradient).value(), fixed);
  EXPECT_TRUE(Accepts(fixed, 7));
  EXPECT_FALSE(Accepts(fixed, 3));
  EXPECT_FALSE(Accepts(fixed, 127));
  // Nor a frame bucketed differently from the run.
  EXPECT_EQ(QsgdCodec::ParamsForHeader(fixed, {.levels = 7, .bucket = 256}).status(),
            Status::DataLoss());
}

TEST(QuantScheduleTest, DqScheduleUsesFullLevelCountsOfItsBitWidths) {
  const QsgdParams dq = Dq(20.0f, 0.99f, 3, 6);
  EXPECT_EQ(QsgdCodec::MaxLevels(dq), 31u);                  // 6 bits
  EXPECT_EQ(QsgdCodec::QuantizedHeaderOf(dq).levels, 31u);   // frames are sized for it
  EXPECT_EQ(RoundLevels(dq, 599, 600, 1.0f).value(), 31u);   // s = 20 -> 6 bits -> 31 levels
  EXPECT_EQ(RoundLevels(dq, 599, 600, 0.125f).value(), 3u);  // s = ceil(2.5) = 3 -> 3 bits
  EXPECT_EQ(RoundLevels(dq, 0, 600, 1e-6f).value(), 3u);     // clipped up to 3 bits
  // The round's parameters are a fixed schedule at the chosen count, in the run's buckets.
  const float unit_gradient[] = {1.0f};
  EXPECT_EQ(QsgdCodec::RoundParams(dq, 599, 600, unit_gradient).value(),
            (QsgdParams{.levels = 31, .bucket = dq.bucket}));
  // The norm is the Euclidean one: (3, 4) has norm 5.
  const std::vector<float> gradient = {3.0f, 0.0f, 4.0f};
  EXPECT_EQ(QsgdCodec::RoundParams(dq, 599, 600, gradient).value().levels,
            RoundLevels(dq, 599, 600, 5.0f).value());
  for (const std::uint32_t levels : {3u, 7u, 15u, 31u}) {
    EXPECT_TRUE(Accepts(dq, levels)) << levels;
    EXPECT_EQ(QsgdCodec::ParamsForHeader(dq, {.levels = levels, .bucket = dq.bucket}).value(),
              (QsgdParams{.levels = levels, .bucket = dq.bucket}));
  }
  for (const std::uint32_t levels : {0u, 1u, 2u, 4u, 20u, 63u, 127u}) {
    EXPECT_FALSE(Accepts(dq, levels)) << levels;
  }
}

// A worker whose level count changes every round: the payload shrinks and grows inside the
// buffers sized at Init, error feedback stays exact, and a receiver decodes each round's frame
// with the levels it names.
TEST(QuantScheduleTest, ErrorFeedbackWorkerQuantizesWithTheRoundsLevels) {
  const TensorLayout layout = Layout({700, 300});
  const CodecParams codec = Qsgd(127, 128);  // 8 bits
  FeedbackParams feedback;
  feedback.kind = FeedbackKind::kEf;
  feedback.learning_rate = 0.1f;
  feedback.momentum = 0.0f;
  ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
  ErrorFeedbackWorker worker;
  ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
  PayloadBuffers buffers(worker.payload_shape());
  const std::size_t max_words = worker.payload_shape().words;

  ArenaBox aggregator_box(MeanAggregator::StateBytes(layout, codec));
  MeanAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(aggregator_box.arena, AllCodecs(), layout, codec).ok());

  EXPECT_EQ(worker.SetRoundParams(Qsgd(0, 128)), Status::InvalidArgument());
  EXPECT_EQ(worker.SetRoundParams(Qsgd(255, 128)), Status::InvalidArgument());
  std::vector<float> model(layout.dimension(), 0.0f);
  std::vector<float> gradient(layout.dimension());
  for (std::size_t i = 0; i < gradient.size(); ++i) {
    gradient[i] = std::sin(0.37f * static_cast<float>(i)) + 0.01f;
  }
  for (const std::uint32_t levels : {1u, 7u, 127u, 3u}) {
    ASSERT_TRUE(worker.SetRoundParams(Qsgd(levels, 128)).ok());
    EXPECT_EQ(std::get<QsgdParams>(worker.codec()).levels, levels);
    EXPECT_LE(worker.payload_shape().words, max_words);
    EXPECT_EQ(worker.payload_shape().words, EncodedShape(Qsgd(levels, 128), layout).value().words);
    ASSERT_TRUE(worker.BeginRound(model).ok());
    ASSERT_TRUE(worker.LocalStep(gradient).ok());
    const std::vector<float> before(worker.residual().begin(), worker.residual().end());  // p
    const CodecContext context{1, levels, 1};
    ASSERT_TRUE(worker.Compress(context, buffers.spans()).ok());
    // Conservation: C(p) + e_new = p, with C(p) decoded at the round's level count.
    const PayloadView view(
        buffers.indices, buffers.values,
        std::span<const std::uint32_t>(buffers.words).first(worker.payload_shape().words),
        buffers.scales);
    const std::vector<float> sent =
        test_util::DecodeDense(Qsgd(levels, 128), layout, context, view);
    for (std::size_t i = 0; i < sent.size(); ++i) {
      const float p = before[i];  // for H = 1 the step went straight into the residual
      EXPECT_NEAR(sent[i] + worker.residual()[i], p, 1e-5f) << "levels " << levels << " i " << i;
    }
    aggregator.Reset();
    ASSERT_TRUE(aggregator.AddWithParams(Qsgd(levels, 128), view, context).ok());
    const std::span<const float> mean = aggregator.Mean().value();
    for (std::size_t i = 0; i < sent.size(); ++i) ASSERT_EQ(mean[i], sent[i]);
  }
  // The aggregator refuses parameters of another codec.
  aggregator.Reset();
  CodecParams identity;
  EXPECT_EQ(aggregator.AddWithParams(identity, PayloadView(), CodecContext{1, 0, 1}),
            Status::InvalidArgument());
  // The round's parameters must be of the worker's codec.
  ErrorFeedbackWorker sign_worker;
  const CodecParams sign = SignParams{};
  ArenaBox sign_box(ErrorFeedbackWorker::StateBytes(layout, sign, feedback));
  ASSERT_TRUE(sign_worker.Init(sign_box.arena, AllCodecs(), layout, sign, feedback).ok());
  EXPECT_EQ(sign_worker.SetRoundParams(Qsgd(3)), Status::InvalidArgument());
  EXPECT_EQ(sign_worker.codec(), sign);
  ErrorFeedbackWorker uninitialized;
  EXPECT_EQ(uninitialized.SetRoundParams(Qsgd(3)), Status::FailedPrecondition());
}

}  // namespace
}  // namespace edgesgd
