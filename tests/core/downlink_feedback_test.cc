#include "edgesgd/core/downlink_feedback.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/test_util.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;
using test_util::DecodeDense;
using test_util::kNaN;
using test_util::PayloadBuffers;

TensorLayout TestLayout() {
  const std::uint64_t sizes[] = {40, 7, 81};
  return TensorLayout::FromSizes(sizes).value();
}

CodecParams Codec(CodecId id) {
  return test_util::EveryCodec({.k_ratio = 0.1f, .qsgd_levels = 7, .qsgd_bucket = 16})[id];
}

std::vector<float> RandomVector(std::size_t d, std::uint32_t stream) {
  return test_util::UniformVector(d, 5, stream, 1.0f);
}

TEST(DownlinkFeedbackTest, SupportsExactlyTheStatelessCodecsWithoutPayloadSums) {
  const TensorLayout layout = TestLayout();
  for (CodecId id = 0; id < kCodecCount; ++id) {
    const CodecParams codec = Codec(id);
    const bool supported = id == kCodecId<TopKCodec> || id == kCodecId<SignCodec> ||
                           id == kCodecId<QsgdCodec> || id == kCodecId<NaturalCodec> ||
                           id == kCodecId<Fp16Codec> || id == kCodecId<StochasticSignCodec>;
    EXPECT_EQ(TraitsOf(codec).downlink_recompress, supported) << CodecName(id);
    EXPECT_EQ(DownlinkFeedback::StateBytes(layout, codec) > 0, supported) << CodecName(id);
    ArenaBox box(1 << 16);
    DownlinkFeedback feedback;
    const Status init = feedback.Init(box.arena, AllCodecs(), layout, codec);
    EXPECT_EQ(init.ok(), supported) << CodecName(id);
    if (supported) {
      EXPECT_EQ(box.arena.used_bytes(), DownlinkFeedback::StateBytes(layout, codec));
    } else {
      EXPECT_EQ(init.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(box.arena.used_bytes(), 0u);
    }
  }
}

TEST(DownlinkFeedbackTest, InitTakesNothingFromASmallArena) {
  const TensorLayout layout = TestLayout();
  const CodecParams codec = Codec(kCodecId<TopKCodec>);
  ArenaBox box(DownlinkFeedback::StateBytes(layout, codec) - 8);
  DownlinkFeedback feedback;
  EXPECT_EQ(feedback.Init(box.arena, AllCodecs(), layout, codec).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(
      feedback.Init(box.arena, test_util::TopKOnlyCodecs(), layout, Codec(kCodecId<SignCodec>))
          .code(),
      StatusCode::kFailedPrecondition);
  EXPECT_EQ(box.arena.used_bytes(), 0u);
  EXPECT_EQ(feedback.Compress(RandomVector(layout.dimension(), 0), {1, 0, 0}, {}).status().code(),
            StatusCode::kFailedPrecondition);
}

// Nothing is lost, only delayed: after any number of rounds, what was broadcast plus what the
// residual holds is everything that went in.
class DownlinkFeedbackCodecTest : public ::testing::TestWithParam<CodecId> {};

TEST_P(DownlinkFeedbackCodecTest, BroadcastPlusResidualIsEveryUpdate) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec = Codec(GetParam());
  ArenaBox box(DownlinkFeedback::StateBytes(layout, codec));
  DownlinkFeedback feedback;
  ASSERT_TRUE(feedback.Init(box.arena, AllCodecs(), layout, codec).ok());
  PayloadBuffers payload(EncodedShape(codec, layout).value());
  std::vector<double> fed(d, 0.0), delivered(d, 0.0);
  for (std::uint32_t round = 0; round < 30; ++round) {
    const std::vector<float> update = RandomVector(d, round);
    const CodecContext context{9, round, 0};
    const Result<PayloadShape> sent = feedback.Compress(update, context, payload.spans());
    ASSERT_TRUE(sent.ok());
    EXPECT_EQ(sent.value(), EncodedShape(codec, layout).value());
    const std::vector<float> broadcast = DecodeDense(codec, layout, context, payload.view());
    for (std::size_t i = 0; i < d; ++i) {
      fed[i] += static_cast<double>(update[i]);
      delivered[i] += static_cast<double>(broadcast[i]);
    }
  }
  for (std::size_t i = 0; i < d; ++i) {
    EXPECT_NEAR(delivered[i] + static_cast<double>(feedback.residual()[i]), fed[i], 1e-4)
        << "coordinate " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedCodecs, DownlinkFeedbackCodecTest,
                         ::testing::ValuesIn(test_util::CodecIds([](const CodecTraits& traits) {
                           return traits.downlink_recompress;
                         })),
                         test_util::CodecIdName);

TEST(DownlinkFeedbackTest, TopKSendsTheLargestOfResidualPlusUpdate) {
  const TensorLayout layout = TensorLayout::Single(10).value();
  const CodecParams codec = TopKParams{.k_ratio = 0.2f};  // 2 of 10
  ArenaBox box(DownlinkFeedback::StateBytes(layout, codec));
  DownlinkFeedback feedback;
  ASSERT_TRUE(feedback.Init(box.arena, AllCodecs(), layout, codec).ok());
  PayloadBuffers payload(EncodedShape(codec, layout).value());
  const std::vector<float> first = {0.9f, 0, 0, 0.5f, 0, 0, 0, 0, -1.0f, 0.1f};
  ASSERT_TRUE(feedback.Compress(first, {1, 0, 0}, payload.spans()).ok());
  EXPECT_EQ(payload.indices, (std::vector<std::uint32_t>{0, 8}));
  // 0.5 was held back; with another 0.2 on coordinate 3 it now beats the fresh 0.6 at 5.
  const std::vector<float> second = {0, 0, 0, 0.2f, 0, 0.6f, 0, 0, 0, 0.75f};
  ASSERT_TRUE(feedback.Compress(second, {1, 1, 0}, payload.spans()).ok());
  EXPECT_EQ(payload.indices, (std::vector<std::uint32_t>{3, 9}));
  EXPECT_FLOAT_EQ(payload.values[0], 0.7f);
  EXPECT_FLOAT_EQ(payload.values[1], 0.85f);
  const std::vector<float> expected_residual = {0, 0, 0, 0, 0, 0.6f, 0, 0, 0, 0};
  for (std::size_t i = 0; i < 10; ++i)
    EXPECT_FLOAT_EQ(feedback.residual()[i], expected_residual[i]);
}

TEST(DownlinkFeedbackTest, ErrorsChangeNothing) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec = Codec(kCodecId<TopKCodec>);
  ArenaBox box(DownlinkFeedback::StateBytes(layout, codec));
  DownlinkFeedback feedback;
  ASSERT_TRUE(feedback.Init(box.arena, AllCodecs(), layout, codec).ok());
  const PayloadShape shape = EncodedShape(codec, layout).value();
  PayloadBuffers payload(shape);
  ASSERT_TRUE(feedback.Compress(RandomVector(d, 1), {1, 0, 0}, payload.spans()).ok());
  const std::vector<float> before(feedback.residual().begin(), feedback.residual().end());

  PayloadBuffers short_payload({shape.indices - 1, shape.values, 0, 0});
  EXPECT_EQ(feedback.Compress(RandomVector(d, 2), {1, 1, 0}, short_payload.spans()).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(feedback.Compress(RandomVector(d - 1, 2), {1, 1, 0}, payload.spans()).status().code(),
            StatusCode::kInvalidArgument);
  std::vector<float> stored = RandomVector(d, 3);
  stored[5] = kNaN;
  EXPECT_EQ(feedback.RestoreResidual(std::as_bytes(std::span(stored))).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(feedback.RestoreResidual(std::as_bytes(std::span(stored).first(d - 1))).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(std::vector<float>(feedback.residual().begin(), feedback.residual().end()), before);
}

TEST(DownlinkFeedbackTest, RestoredResidualContinuesTheRun) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec = Codec(kCodecId<TopKCodec>);
  ArenaBox box(2 * DownlinkFeedback::StateBytes(layout, codec));
  DownlinkFeedback original, restored;
  ASSERT_TRUE(original.Init(box.arena, AllCodecs(), layout, codec).ok());
  ASSERT_TRUE(restored.Init(box.arena, AllCodecs(), layout, codec).ok());
  PayloadBuffers a(EncodedShape(codec, layout).value()), b(EncodedShape(codec, layout).value());
  ASSERT_TRUE(original.Compress(RandomVector(d, 4), {1, 0, 0}, a.spans()).ok());
  // Stored at an odd offset, as inside a checkpoint file read into a byte buffer.
  std::vector<std::byte> file(1 + d * sizeof(float));
  std::memcpy(file.data() + 1, original.residual().data(), d * sizeof(float));
  ASSERT_TRUE(restored.RestoreResidual(std::span(file).subspan(1)).ok());
  ASSERT_TRUE(original.Compress(RandomVector(d, 5), {1, 1, 0}, a.spans()).ok());
  ASSERT_TRUE(restored.Compress(RandomVector(d, 5), {1, 1, 0}, b.spans()).ok());
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.values, b.values);
}

}  // namespace
}  // namespace edgesgd
