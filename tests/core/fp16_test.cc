#include "edgesgd/core/codecs/fp16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "test_util.h"

namespace edgesgd {
namespace {

using internal::FloatFromHalf;
using internal::HalfFromFloat;
using test_util::kInf;
using test_util::kNaN;
using test_util::PayloadBuffers;

constexpr CodecParams kFp16 = Fp16Params{};

// The value of a finite half, computed independently of the codec: (-1)^s 2^(e-15) (1 + m/1024),
// or 2^-14 m/1024 for e = 0.
double HalfValue(std::uint16_t half) {
  const int exponent = (half >> 10) & 0x1F;
  const int mantissa = half & 0x3FF;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                         : std::ldexp(1024 + mantissa, exponent - 25);
  return (half & 0x8000) != 0 ? -magnitude : magnitude;
}

TEST(Fp16Test, KnownConversions) {
  static_assert(HalfFromFloat(1.0f) == 0x3C00);
  static_assert(HalfFromFloat(-2.0f) == 0xC000);
  static_assert(HalfFromFloat(65504.0f) == 0x7BFF);
  static_assert(HalfFromFloat(0.1f) == 0x2E66);
  static_assert(HalfFromFloat(0x1p-24f) == 0x0001);  // the smallest subnormal
  static_assert(HalfFromFloat(0x1p-14f) == 0x0400);  // the smallest normal
  static_assert(HalfFromFloat(-0.0f) == 0x8000);
  static_assert(FloatFromHalf(0x3555) == 0x1.554p-2f);
  static_assert(FloatFromHalf(0x0001) == 0x1p-24f);
  static_assert(FloatFromHalf(0xFBFF) == -65504.0f);
}

TEST(Fp16Test, SaturatesBeyondTheLargestHalf) {
  for (const float big : {65519.0f, 65520.0f, 1e6f, 3.4e38f}) {
    EXPECT_EQ(HalfFromFloat(big), 0x7BFF) << big;
    EXPECT_EQ(HalfFromFloat(-big), 0xFBFF) << big;
  }
}

TEST(Fp16Test, TiesGoToEven) {
  EXPECT_EQ(HalfFromFloat(0x1p-25f), 0x0000);         // half of the smallest subnormal
  EXPECT_EQ(HalfFromFloat(0x1.8p-24f), 0x0002);       // 1.5 ulp -> 2
  EXPECT_EQ(HalfFromFloat(1.0f + 0x1p-11f), 0x3C00);  // between 1 and 1 + 2^-10 -> 1
  EXPECT_EQ(HalfFromFloat(1.0f + 0x1.8p-10f), 0x3C02);  // between 1 + 1 ulp and 1 + 2 ulp -> 2
}

TEST(Fp16Test, EveryFiniteHalfRoundTripsExactly) {
  for (std::uint32_t half = 0; half < 0x10000; ++half) {
    if ((half & 0x7C00) == 0x7C00) continue;  // infinities and NaNs
    const auto h = static_cast<std::uint16_t>(half);
    ASSERT_EQ(static_cast<double>(FloatFromHalf(h)), HalfValue(h)) << half;
    ASSERT_EQ(HalfFromFloat(FloatFromHalf(h)), h) << half;
  }
}

TEST(Fp16Test, RoundsToTheNearestHalf) {
  // Against a search over the two neighbouring halves: the chosen one is never farther.
  const std::vector<float> x = test_util::UniformVector(20000, 1, 0, 70000.0f);
  for (const float value : x) {
    const double exact = static_cast<double>(value);
    const std::uint16_t half = HalfFromFloat(value);
    const double error = std::fabs(HalfValue(half) - exact);
    for (const int step : {-1, 1}) {
      const auto neighbour = static_cast<std::uint16_t>(half + step);
      if ((neighbour & 0x7C00) == 0x7C00 || ((neighbour ^ half) & 0x8000) != 0) continue;
      ASSERT_LE(error, std::fabs(HalfValue(neighbour) - exact)) << value;
    }
  }
}

// Encode and DecodeAdd (on x86-64 the F16C instructions where the CPU has them) against the
// portable conversion: around every power of two and rounding tie of the half range, the subnormal
// halves, the saturation boundary and zeros of both signs, in tensors of odd and even sizes.
TEST(Fp16Test, EncodeAndDecodeMatchThePortableConversion) {
  std::vector<float> x;
  for (int exponent = -26; exponent <= 16; ++exponent) {
    const float power = std::ldexp(1.0f, exponent);
    for (const float step : {0.0f, 1.0f / 2048, 1.0f / 1024, 3.0f / 2048, 0.999f / 2048}) {
      for (const float sign : {1.0f, -1.0f}) {
        x.push_back(sign * power * (1.0f + step));
        x.push_back(sign * std::nextafter(power * (1.0f + step), 0.0f));
      }
    }
  }
  for (const float edge : {65504.0f, 65519.0f, 65520.0f, 1e30f, 0.0f, -0.0f}) {
    x.push_back(edge);
    x.push_back(-edge);
  }
  const std::vector<float> uniform = test_util::UniformVector(997, 3, 0, 70000.0f);
  x.insert(x.end(), uniform.begin(), uniform.end());
  const std::vector<std::uint64_t> sizes = {x.size() / 2 + 1, x.size() - x.size() / 2 - 1};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  PayloadBuffers payload(EncodedShape(kFp16, layout).value());
  ASSERT_TRUE(AllCodecs().Encode(kFp16, layout, {}, x, payload.spans(), {}).ok());
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    for (std::size_t i = 0; i < layout.size(t); ++i) {
      const float value = x[layout.offset(t) + i];
      const std::uint32_t half = (payload.words[word + i / 2] >> (16 * (i % 2))) & 0xFFFFu;
      ASSERT_EQ(half, internal::HalfFromFloat(value)) << value;
    }
    word += (layout.size(t) + 1) / 2;
  }
  // And back: acc + weight * half, the product and the sum rounded separately.
  const float weight = 0.37f;
  std::vector<float> acc = test_util::UniformVector(x.size(), 4, 0, 10.0f);
  std::vector<float> expected = acc;
  for (std::size_t i = 0; i < x.size(); ++i) {
    expected[i] += weight * internal::FloatFromHalf(internal::HalfFromFloat(x[i]));
  }
  ASSERT_TRUE(AllCodecs().DecodeAdd(kFp16, layout, {}, payload.view(), weight, acc, {}).ok());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(acc[i]), std::bit_cast<std::uint32_t>(expected[i]))
        << i;
  }
}

TEST(Fp16Test, PacksTwoHalvesPerWordAndEachTensorOnFreshWords) {
  const std::vector<std::uint64_t> sizes = {3, 2};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  EXPECT_EQ(EncodedShape(kFp16, layout).value().words, 3u);
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 65504.0f, -0.0f};
  PayloadBuffers payload(EncodedShape(kFp16, layout).value());
  ASSERT_TRUE(AllCodecs().Encode(kFp16, layout, {}, x, payload.spans(), {}).ok());
  EXPECT_EQ(payload.words, (std::vector<std::uint32_t>{0xC0003C00u, 0x00003800u, 0x80007BFFu}));
  std::vector<float> decoded(5, 0.0f);
  ASSERT_TRUE(AllCodecs().DecodeAdd(kFp16, layout, {}, payload.view(), 1.0f, decoded, {}).ok());
  EXPECT_EQ(decoded, (std::vector<float>{1.0f, -2.0f, 0.5f, 65504.0f, 0.0f}));
}

TEST(Fp16Test, RefusesNonFiniteInputAndRejectsMalformedPayloads) {
  const std::vector<std::uint64_t> sizes = {3};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  PayloadBuffers payload(EncodedShape(kFp16, layout).value());
  for (const float bad : {kNaN, kInf, -kInf}) {
    const std::vector<float> x = {1.0f, 2.0f, bad};
    EXPECT_EQ(AllCodecs().Encode(kFp16, layout, {}, x, payload.spans(), {}),
              Status::InvalidArgument());
  }
  const std::vector<float> x = {1.0f, 2.0f, 3.0f};
  ASSERT_TRUE(AllCodecs().Encode(kFp16, layout, {}, x, payload.spans(), {}).ok());
  const auto rejected = [&](const PayloadBuffers& bad) {
    std::vector<float> acc(3, 1.0f);
    return AllCodecs().DecodeAdd(kFp16, layout, {}, bad.view(), 1.0f, acc, {}) ==
               Status::DataLoss() &&
           acc == std::vector<float>(3, 1.0f);
  };
  PayloadBuffers infinity = payload;
  infinity.words[0] = (infinity.words[0] & 0xFFFF0000u) | 0x7C00u;
  EXPECT_TRUE(rejected(infinity));
  PayloadBuffers nan = payload;
  nan.words[0] |= 0x7E00u << 16;
  EXPECT_TRUE(rejected(nan));
  PayloadBuffers padding = payload;
  padding.words[1] |= 0x3C00u << 16;  // a half past the tensor's last coordinate
  EXPECT_TRUE(rejected(padding));
  PayloadBuffers short_payload = payload;
  short_payload.words.pop_back();
  EXPECT_TRUE(rejected(short_payload));
}

TEST(Fp16Test, ErrorFeedbackKeepsTheRoundingAndTheClippedPart) {
  const std::vector<std::uint64_t> sizes = {4};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  const FeedbackParams& feedback = test_util::kUnitStepEf;
  test_util::ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, kFp16, feedback));
  ErrorFeedbackWorker worker;
  ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, kFp16, feedback).ok());
  const std::vector<float> model(4, 0.0f);
  const std::vector<float> gradient = {0.1f, 1e5f, -3.14159f, 1e-9f};
  ASSERT_TRUE(worker.BeginRound(model).ok());
  ASSERT_TRUE(worker.LocalStep(gradient).ok());
  PayloadBuffers payload(EncodedShape(kFp16, layout).value());
  ASSERT_TRUE(worker.Compress({}, payload.spans()).ok());
  std::vector<float> sent(4, 0.0f);
  ASSERT_TRUE(AllCodecs().DecodeAdd(kFp16, layout, {}, payload.view(), 1.0f, sent, {}).ok());
  EXPECT_EQ(sent[1], 65504.0f);
  EXPECT_EQ(worker.residual()[1], 1e5f - 65504.0f);  // the clipped part waits for later rounds
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(sent[i] + worker.residual()[i], gradient[i]) << i;
  }
}

}  // namespace
}  // namespace edgesgd
