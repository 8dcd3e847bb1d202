// Differential privacy's device-side pieces: clipping to an L2 bound, the codecs that keep the
// bound (KeepsNormBound, checked against what they decode to), error feedback with clipping, and
// the Gaussian noise's statistics and privacy of its key.

#include "edgesgd/core/privacy/differential_privacy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/codecs/qsgd.h"
#include "edgesgd/core/codecs/rand_k.h"
#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/error_feedback.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;
using test_util::DecodeDense;
using test_util::PayloadBuffers;

double Norm(const std::vector<float>& values) {
  double squares = 0.0;
  for (const float value : values)
    squares += static_cast<double>(value) * static_cast<double>(value);
  return std::sqrt(squares);
}

std::vector<float> Ramp(std::size_t d, float scale) {
  std::vector<float> values(d);
  for (std::size_t i = 0; i < d; ++i) {
    values[i] = scale * (static_cast<float>(i % 7) - 3.0f + 0.25f * static_cast<float>(i % 3));
  }
  return values;
}

TEST(DifferentialPrivacyTest, ClippingScalesDownToTheBoundAndKeepsTheDirection) {
  for (const float bound : {1e-3f, 0.5f, 1.0f, 7.0f, 1e4f}) {
    SCOPED_TRACE(bound);
    const std::vector<float> original = Ramp(1000, 3.0f);
    std::vector<float> clipped = original;
    const double norm = static_cast<double>(ClipToNorm(clipped, bound));
    EXPECT_NEAR(norm, Norm(original), 1e-6 * norm);
    if (norm <= static_cast<double>(bound)) {
      EXPECT_EQ(clipped, original);
      continue;
    }
    EXPECT_LE(Norm(clipped), static_cast<double>(bound));
    EXPECT_GE(Norm(clipped), static_cast<double>(bound) * (1.0 - 1e-6));
    const double scale = static_cast<double>(clipped[1]) / static_cast<double>(original[1]);
    for (std::size_t i = 0; i < original.size(); ++i) {
      const auto expected = static_cast<double>(original[i]);
      EXPECT_NEAR(static_cast<double>(clipped[i]), scale * expected,
                  1e-6 * std::fabs(expected) + 1e-12);
    }
  }
}

TEST(DifferentialPrivacyTest, CodecsThatKeepTheBoundNeverDecodeLonger) {
  const std::vector<std::uint64_t> sizes{300, 57, 1};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  std::vector<CodecParams> codecs = test_util::EveryCodec({});
  codecs.push_back(RandKParams{.k_ratio = 0.2f, .scaling = RandKScaling::kUnbiased});
  codecs.push_back(SignParams{.scale = SignScale::kUnit});
  std::size_t keeping = 0;
  for (const CodecParams& codec : codecs) {
    SCOPED_TRACE(CodecName(codec));
    const std::vector<float> input = test_util::UniformVector(layout.dimension(), 3, 1, 0.5f);
    const double input_norm = Norm(input);
    double longest = 0.0;
    for (std::uint32_t round = 0; round < 20; ++round) {
      PayloadBuffers payload(EncodedShape(codec, layout).value());
      std::vector<std::byte> scratch(CodecScratchBytes(codec, layout));
      const CodecContext context{9, round, 1};
      ASSERT_TRUE(AllCodecs().Encode(codec, layout, context, input, payload.spans(), scratch).ok());
      longest = std::max(longest, Norm(DecodeDense(codec, layout, context, payload.view())));
    }
    if (KeepsNormBound(codec)) {
      ++keeping;
      EXPECT_LE(longest, input_norm * (1.0 + 1e-6));
    } else {
      // Each refused codec really can lengthen an input (else the refusal would be needless).
      EXPECT_GT(longest, input_norm) << "refused but never longer";
    }
  }
  // identity, top_k, rand_k (none), random_block, sign and stochastic_sign (mean_abs), reg_top_k
  EXPECT_EQ(keeping, 7u);
}

TEST(DifferentialPrivacyTest, ErrorFeedbackSendsAtMostTheClipNormAndKeepsTheRest) {
  const TensorLayout layout = TensorLayout::Single(200).value();
  const CodecParams codec = test_util::EveryCodec({})[kCodecId<TopKCodec>];
  for (const FeedbackKind kind : {FeedbackKind::kNone, FeedbackKind::kEf}) {
    SCOPED_TRACE(static_cast<int>(kind));
    FeedbackParams feedback;
    feedback.kind = kind;
    feedback.learning_rate = 1.0f;
    feedback.momentum = 0.0f;
    ArenaBox box(ErrorFeedbackWorker::StateBytes(layout, codec, feedback));
    ErrorFeedbackWorker worker;
    ASSERT_TRUE(worker.Init(box.arena, AllCodecs(), layout, codec, feedback).ok());
    constexpr float kClip = 0.5f;
    worker.SetClipNorm(kClip);
    const std::vector<float> model(layout.dimension(), 0.0f);
    PayloadBuffers payload(EncodedShape(codec, layout).value());
    for (std::uint32_t round = 0; round < 5; ++round) {
      ASSERT_TRUE(worker.BeginRound(model).ok());
      const std::vector<float> gradient = Ramp(layout.dimension(), 10.0f);  // norm far above C
      ASSERT_TRUE(worker.LocalStep(gradient).ok());
      const CodecContext context{1, round, 1};
      ASSERT_TRUE(worker.Compress(context, payload.spans()).ok());
      const std::vector<float> sent = DecodeDense(codec, layout, context, payload.view());
      EXPECT_LE(Norm(sent), static_cast<double>(kClip) * (1.0 + 1e-6));
      EXPECT_GT(Norm(sent), 0.0);
      if (kind == FeedbackKind::kEf) {
        // The residual is what compression dropped from the clipped p, so sent + e has norm C.
        std::vector<float> corrected(layout.dimension());
        for (std::size_t j = 0; j < corrected.size(); ++j) {
          corrected[j] = sent[j] + worker.residual()[j];
        }
        EXPECT_NEAR(Norm(corrected), kClip, 1e-5);
      }
    }
  }
}

TEST(DifferentialPrivacyTest, NoiseIsStandardNormalAndKeyed) {
  constexpr std::size_t kDraws = 200000;
  constexpr double kStddev = 2.5;
  std::vector<float> values(kDraws, 1.0f);
  GaussianNoise({{77, 0}, 3, 4, kNoiseOnValues}).AddTo(values, kStddev);
  double sum = 0.0;
  double squares = 0.0;
  std::size_t beyond_two = 0;
  for (const float value : values) {
    const double z = (static_cast<double>(value) - 1.0) / kStddev;
    sum += z;
    squares += z * z;
    if (std::fabs(z) > 2.0) ++beyond_two;
  }
  const double mean = sum / kDraws;
  const double variance = squares / kDraws - mean * mean;
  EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(static_cast<double>(kDraws)));
  EXPECT_NEAR(variance, 1.0, 0.02);
  // P(|Z| > 2) = 0.0455 for a normal: the tails are right, not only the moments.
  EXPECT_NEAR(static_cast<double>(beyond_two) / kDraws, 0.0455, 0.003);

  // Same key, round and holder: the same noise; any of them different, either half of the
  // 128-bit key included: other noise.
  const auto draw = [](SecretKey key, std::uint32_t round, std::uint32_t holder,
                       std::uint32_t part) {
    std::vector<float> noise(8, 0.0f);
    GaussianNoise({key, round, holder, part}).AddTo(noise, 1.0);
    return noise;
  };
  const SecretKey key{77, 0x5EC2E7};
  EXPECT_EQ(draw(key, 3, 4, 0), draw(key, 3, 4, 0));
  EXPECT_NE(draw(key, 3, 4, 0), draw({78, 0x5EC2E7}, 3, 4, 0));
  EXPECT_NE(draw(key, 3, 4, 0), draw({77, 0x5EC2E8}, 3, 4, 0));
  EXPECT_NE(draw(key, 3, 4, 0), draw(key, 4, 4, 0));
  EXPECT_NE(draw(key, 3, 4, 0), draw(key, 3, 5, 0));
  EXPECT_NE(draw(key, 3, 4, 0), draw(key, 3, 4, 1));
}

TEST(DifferentialPrivacyTest, ParametersAreValidatedOnlyWhenOn) {
  PrivacyParams params;
  params.clip = -1.0f;
  EXPECT_TRUE(ValidatePrivacyParams(params).ok());  // off reads nothing
  params.mode = PrivacyMode::kCentral;
  EXPECT_EQ(ValidatePrivacyParams(params), Status::InvalidArgument());
  params.clip = 1.0f;
  EXPECT_TRUE(ValidatePrivacyParams(params).ok());
  params.noise_multiplier = std::nanf("");
  EXPECT_EQ(ValidatePrivacyParams(params), Status::InvalidArgument());
  params.noise_multiplier = 0.0f;  // clipping only is allowed
  EXPECT_TRUE(ValidatePrivacyParams(params).ok());
  params.delta = 1.0f;
  EXPECT_EQ(ValidatePrivacyParams(params), Status::InvalidArgument());
  params.delta = 1e-5f;
  params.mode = static_cast<PrivacyMode>(7);
  EXPECT_EQ(ValidatePrivacyParams(params), Status::InvalidArgument());
}

TEST(DifferentialPrivacyTest, AdaptiveClippingFollowsItsRuleAndSharesTheBudget) {
  PrivacyParams params{.mode = PrivacyMode::kCentral, .clip = 1.0f, .noise_multiplier = 1.0f};
  // Fixed clipping: the whole multiplier goes to the updates.
  EXPECT_EQ(UpdateNoiseMultiplier(params), 1.0);
  params.target_quantile = 0.5f;
  params.clip_learning_rate = 0.2f;
  params.count_noise = 0.4f;  // not above z / 2
  EXPECT_EQ(ValidatePrivacyParams(params), Status::InvalidArgument());
  params.count_noise = 5.0f;
  ASSERT_TRUE(ValidatePrivacyParams(params).ok());
  // 1/z^2 = 1/z'^2 + 1/(2 sigma_b)^2: z' = (1 - 1/100)^(-1/2).
  EXPECT_NEAR(UpdateNoiseMultiplier(params), 1.0 / std::sqrt(0.99), 1e-12);
  // Too few unclipped updates: the bound grows; too many: it shrinks; at the target: it stays.
  EXPECT_FLOAT_EQ(NextClipBound(2.0f, 0.0, params), 2.0f * std::exp(0.1f));
  EXPECT_FLOAT_EQ(NextClipBound(2.0f, 1.0, params), 2.0f * std::exp(-0.1f));
  EXPECT_EQ(NextClipBound(2.0f, 0.5, params), 2.0f);
  // However wild the noised fraction, the bound stays a positive finite float.
  EXPECT_GT(NextClipBound(1e-30f, 1e6, params), 0.0f);
  EXPECT_TRUE(std::isfinite(NextClipBound(1e30f, -1e6, params)));
  // Normalisation: a fixed bound ignores adaptive clipping's fields; off ignores everything.
  PrivacyParams fixed = params;
  fixed.target_quantile = 0.0f;
  EXPECT_EQ(NormalizedPrivacyParams(fixed).count_noise, PrivacyParams{}.count_noise);
  EXPECT_EQ(NormalizedPrivacyParams(params), params);
  fixed.mode = PrivacyMode::kOff;
  EXPECT_EQ(NormalizedPrivacyParams(fixed), PrivacyParams{});
}

}  // namespace
}  // namespace edgesgd
