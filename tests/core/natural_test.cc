#include "edgesgd/core/codecs/natural.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/internal/philox_batch.h"
#include "edgesgd/core/random.h"
#include "test_util.h"

namespace edgesgd {
namespace {

using test_util::kInf;
using test_util::kNaN;
using test_util::PayloadBuffers;

constexpr CodecParams kNatural = NaturalParams{};

TensorLayout Layout(std::initializer_list<std::uint64_t> sizes) {
  return TensorLayout::FromSizes(std::span<const std::uint64_t>(sizes.begin(), sizes.size()))
      .value();
}

// Encodes `x` in `context` and returns the decoded vector (decode-add into zeros).
std::vector<float> RoundTrip(std::span<const float> x, const TensorLayout& layout,
                             const CodecContext& context, PayloadBuffers* keep = nullptr) {
  PayloadBuffers payload(EncodedShape(kNatural, layout).value());
  EXPECT_TRUE(AllCodecs().Encode(kNatural, layout, context, x, payload.spans(), {}).ok());
  std::vector<float> decoded(x.size(), 0.0f);
  EXPECT_TRUE(
      AllCodecs().DecodeAdd(kNatural, layout, context, payload.view(), 1.0f, decoded, {}).ok());
  if (keep != nullptr) *keep = payload;
  return decoded;
}

TEST(NaturalTest, SendsNineBitsPerCoordinateInPlanesOnFreshWords) {
  // Tensor of 100: 25 exponent words + 4 sign words; tensor of 33: 9 + 2.
  const TensorLayout layout = Layout({100, 33});
  const PayloadShape shape = EncodedShape(kNatural, layout).value();
  EXPECT_EQ(shape.words, 25u + 4u + 9u + 2u);
  EXPECT_EQ(shape.indices + shape.values + shape.scales, 0u);
  EXPECT_EQ(PayloadLayoutOf(kNatural), PayloadLayout::kPackedWords);
  // 9 bits per coordinate up to the padding of two planes.
  const std::size_t d = 1 << 20;
  EXPECT_EQ(MaxEncodedBytes(kNatural, Layout({d})), d * 9 / 8);
}

TEST(NaturalTest, PowersOfTwoAndZeroTravelExactly) {
  const std::vector<float> x = {1.0f, -2.0f, 0.25f, 0x1p-126f, 0x1p127f, -0.0f,
                                0.0f, -1024.0f};
  const std::vector<float> decoded = RoundTrip(x, Layout({x.size()}), {3, 1, 2});
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(decoded[i], x[i]) << i;
}

TEST(NaturalTest, RoundsToOneOfTheTwoNeighbouringPowersOfTwoKeepingTheSign) {
  const std::vector<float> x = test_util::UniformVector(5000, 11, 0, 100.0f);
  const std::vector<float> decoded = RoundTrip(x, Layout({x.size()}), {5, 7, 1});
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float below = std::exp2(std::floor(std::log2(std::fabs(x[i]))));
    ASSERT_TRUE(std::fabs(decoded[i]) == below || std::fabs(decoded[i]) == 2.0f * below)
        << x[i] << " -> " << decoded[i];
    ASSERT_EQ(std::signbit(decoded[i]), std::signbit(x[i]));
  }
}

TEST(NaturalTest, IsUnbiased) {
  // Mean of 20,000 independent roundings (one round each) against x, within 4 standard errors;
  // one rounding between lo and hi has variance (|x| - lo)(hi - |x|): hi = 2 lo for normal x,
  // lo = 0 and hi = 2^-126 for a subnormal.
  const std::vector<float> x = {1.25f, -3.7f, 1e-3f, 0.75f, -1.9999f, 0x1.8p-130f};
  const TensorLayout layout = Layout({x.size()});
  constexpr int kRounds = 20000;
  std::vector<double> sum(x.size(), 0.0);
  for (int round = 0; round < kRounds; ++round) {
    const std::vector<float> decoded =
        RoundTrip(x, layout, {9, static_cast<std::uint32_t>(round), 4});
    for (std::size_t i = 0; i < x.size(); ++i) sum[i] += static_cast<double>(decoded[i]);
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double mean = sum[i] / kRounds;
    const double magnitude = std::fabs(static_cast<double>(x[i]));
    const double lo = magnitude < 0x1p-126 ? 0.0 : std::exp2(std::floor(std::log2(magnitude)));
    const double hi = magnitude < 0x1p-126 ? 0x1p-126 : 2.0 * lo;
    const double sigma = std::sqrt((magnitude - lo) * (hi - magnitude) / kRounds);
    EXPECT_NEAR(mean, static_cast<double>(x[i]), 4.0 * sigma) << i;
  }
}

// The documented draws, replayed: each coordinate's top 16 mantissa bits are set equal to its
// 16-bit draw, so every coordinate is a tie, settled by the 7 bits of its tie block against the
// low mantissa bits. Covers both halves of a chunk's words and a second chunk.
TEST(NaturalTest, TiesAreSettledByTheTieBlockAsDocumented) {
  constexpr std::size_t kSize = 1100;
  const CodecContext context{21, 4, 3};
  const std::uint32_t tensor = 0;
  const internal::PhiloxPlan plan = internal::MakePhiloxPlan(
      context.seed, context.round, tensor,
      StreamId(RandomPurpose::kQuantizationDither, context.worker));
  std::vector<float> x(kSize);
  std::vector<bool> up(kSize);
  for (std::size_t i = 0; i < kSize; ++i) {
    const std::size_t j = i % 512;
    const auto block = static_cast<std::uint32_t>(64 * (i / 512) + (j % 256) / 4);
    const std::uint32_t draw =
        (internal::PhiloxPlanBlock(plan, block)[j % 4] >> (16 * (j / 256))) & 0xFFFFu;
    const std::uint32_t low = static_cast<std::uint32_t>(i * 37 % 128);
    const auto tie_block = 0x80000000u + static_cast<std::uint32_t>(i / 4);
    const std::uint32_t tie_bits = internal::PhiloxPlanBlock(plan, tie_block)[i % 4] >> 25;
    // 1.m times 2^(i % 5), negative for odd i.
    const std::uint32_t exponent = 127 + static_cast<std::uint32_t>(i % 5);
    const auto sign = static_cast<std::uint32_t>(i % 2);
    x[i] = std::bit_cast<float>((sign << 31) | (exponent << 23) | (draw << 7) | low);
    up[i] = tie_bits < low;
  }
  const TensorLayout layout = Layout({kSize});
  PayloadBuffers payload(EncodedShape(kNatural, layout).value());
  ASSERT_TRUE(AllCodecs().Encode(kNatural, layout, context, x, payload.spans(), {}).ok());
  std::size_t rounded_up = 0;
  for (std::size_t i = 0; i < kSize; ++i) {
    const std::uint32_t sent = (payload.words[i / 4] >> (8 * (i % 4))) & 0xFFu;
    const std::uint32_t exponent = (std::bit_cast<std::uint32_t>(x[i]) >> 23) & 0xFFu;
    ASSERT_EQ(sent, exponent + (up[i] ? 1u : 0u)) << i;
    rounded_up += up[i] ? 1u : 0u;
  }
  EXPECT_GT(rounded_up, kSize / 4);  // both outcomes occur
  EXPECT_LT(rounded_up, 3 * kSize / 4);
}

TEST(NaturalTest, TheTopOfTheFloatRangeRoundsDownAndSubnormalsToZeroOrTheSmallestNormal) {
  const std::vector<float> x = {0x1.fffffep127f, -0x1.8p127f, 0x1.8p-130f, -0x1p-140f};
  for (std::uint32_t round = 0; round < 200; ++round) {
    const std::vector<float> decoded = RoundTrip(x, Layout({x.size()}), {1, round, 1});
    EXPECT_EQ(decoded[0], 0x1p127f);
    EXPECT_EQ(decoded[1], -0x1p127f);
    EXPECT_TRUE(decoded[2] == 0.0f || decoded[2] == 0x1p-126f) << decoded[2];
    EXPECT_TRUE(decoded[3] == 0.0f || decoded[3] == -0x1p-126f) << decoded[3];
  }
}

TEST(NaturalTest, TheSameContextGivesTheSameBytesAndAnotherWorkerOthers) {
  const std::vector<float> x = test_util::UniformVector(3000, 3, 1, 1.0f);
  const TensorLayout layout = Layout({1000, 2000});
  PayloadBuffers first(EncodedShape(kNatural, layout).value());
  PayloadBuffers again = first;
  PayloadBuffers other = first;
  RoundTrip(x, layout, {8, 2, 1}, &first);
  RoundTrip(x, layout, {8, 2, 1}, &again);
  RoundTrip(x, layout, {8, 2, 2}, &other);
  EXPECT_EQ(first.words, again.words);
  EXPECT_NE(first.words, other.words);
}

TEST(NaturalTest, RefusesNonFiniteInput) {
  const TensorLayout layout = Layout({4});
  PayloadBuffers payload(EncodedShape(kNatural, layout).value());
  for (const float bad : {kNaN, kInf, -kInf}) {
    const std::vector<float> x = {1.0f, bad, 2.0f, 3.0f};
    EXPECT_EQ(AllCodecs().Encode(kNatural, layout, {}, x, payload.spans(), {}),
              Status::InvalidArgument());
  }
}

TEST(NaturalTest, DecodeRejectsMalformedPayloadsAndLeavesTheAccumulatorAlone) {
  const std::vector<float> x = test_util::UniformVector(37, 5, 2, 4.0f);
  const TensorLayout layout = Layout({37});
  PayloadBuffers payload(EncodedShape(kNatural, layout).value());
  RoundTrip(x, layout, {1, 1, 1}, &payload);
  const auto rejected = [&](const PayloadBuffers& bad) {
    std::vector<float> acc(37, 1.0f);
    const Status status =
        AllCodecs().DecodeAdd(kNatural, layout, {1, 1, 1}, bad.view(), 1.0f, acc, {});
    return status == Status::DataLoss() && acc == std::vector<float>(37, 1.0f);
  };
  PayloadBuffers exponent_255 = payload;
  exponent_255.words[3] |= 0xFFu << 8;  // coordinate 13
  EXPECT_TRUE(rejected(exponent_255));
  PayloadBuffers exponent_padding = payload;
  exponent_padding.words[9] |= 0x100u;  // byte 37, past the last coordinate
  EXPECT_TRUE(rejected(exponent_padding));
  PayloadBuffers sign_padding = payload;
  sign_padding.words.back() |= 1u << 5;  // sign bit 37
  EXPECT_TRUE(rejected(sign_padding));
  PayloadBuffers short_payload = payload;
  short_payload.words.pop_back();
  EXPECT_TRUE(rejected(short_payload));
}

TEST(NaturalTest, ErrorFeedbackKeepsWhatTheRoundingMoved) {
  // One worker, H = 1, no momentum: p = lr * g + e; e' = p - C(p). Then p - C(p) - e' = 0 and
  // the sent C(p) plus the new residual equals the input, coordinate by coordinate.
  const TensorLayout layout = Layout({64});
  const FeedbackParams& feedback = test_util::kUnitStepEf;
  test_util::ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, kNatural, feedback));
  ErrorFeedbackWorker worker;
  ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, kNatural, feedback).ok());
  const std::vector<float> model(64, 0.0f);
  const std::vector<float> gradient = test_util::UniformVector(64, 2, 3, 3.0f);
  ASSERT_TRUE(worker.BeginRound(model).ok());
  ASSERT_TRUE(worker.LocalStep(gradient).ok());
  PayloadBuffers payload(EncodedShape(kNatural, layout).value());
  const CodecContext context{4, 0, 1};
  ASSERT_TRUE(worker.Compress(context, payload.spans()).ok());
  std::vector<float> sent(64, 0.0f);
  ASSERT_TRUE(AllCodecs().DecodeAdd(kNatural, layout, context, payload.view(), 1.0f, sent, {}).ok());
  for (std::size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(sent[i] + worker.residual()[i], gradient[i]) << i;
  }
}

}  // namespace
}  // namespace edgesgd
