#include <algorithm>
#include <cmath>
#include <numbers>

#include "edgesgd/core/privacy/differential_privacy.h"

namespace edgesgd {

float ClipToNorm(std::span<float> values, float bound) {
  // Kahan summation: the rounding of each addition is carried into the next.
  float squares = 0.0f;
  float carried = 0.0f;
  for (const float value : values) {
    const float term = value * value - carried;
    const float sum = squares + term;
    carried = (sum - squares) - term;
    squares = sum;
  }
  const float norm = std::sqrt(squares);
  if (norm > bound) {
    // Rounding the scale down keeps the clipped norm at most the bound.
    const float scale = std::nextafter(bound / norm, 0.0f);
    for (float& value : values) value *= scale;
  }
  return norm;
}

double UpdateNoiseMultiplier(const PrivacyParams& params) {
  const auto z = static_cast<double>(params.noise_multiplier);
  if (!AdaptsClipping(params) || z == 0.0) return z;
  const double count_multiplier = 2.0 * static_cast<double>(params.count_noise);
  return 1.0 / std::sqrt(1.0 / (z * z) - 1.0 / (count_multiplier * count_multiplier));
}

float NextClipBound(float bound, double unclipped_fraction, const PrivacyParams& params) {
  const double step = static_cast<double>(params.clip_learning_rate) *
                      (unclipped_fraction - static_cast<double>(params.target_quantile));
  // Kept a positive normal float whatever the noise does, so that it stays a valid bound.
  const double next = static_cast<double>(bound) * std::exp(-step);
  return static_cast<float>(std::clamp(next, 1e-30, 1e30));
}

void AddNoiseShare(const PrivacyParams& params, float bound, std::uint32_t cohort,
                   const NoiseStream& stream, std::span<float> values) {
  const double whole = stream.part == kNoiseOnCount ? static_cast<double>(params.count_noise)
                                                    : SumNoiseStddev(params, bound);
  GaussianNoise(stream).AddTo(values,
                              whole / std::sqrt(static_cast<double>(cohort < 1 ? 1 : cohort)));
}

double GaussianNoise::NextUnitOpen() {
  // 53 random bits, shifted off zero so the logarithm below is finite.
  const std::uint64_t high = rng_.NextU32() >> 6;
  const std::uint64_t low = rng_.NextU32() >> 5;
  return (static_cast<double>((high << 27) | low) + 1.0) * 0x1.0p-53;
}

void GaussianNoise::AddTo(std::span<float> values, double stddev) {
  for (float& value : values) {
    double draw;
    if (has_spare_) {
      draw = spare_;
      has_spare_ = false;
    } else {
      const double radius = std::sqrt(-2.0 * std::log(NextUnitOpen()));
      const double angle = 2.0 * std::numbers::pi * NextUnitOpen();
      draw = radius * std::cos(angle);
      spare_ = radius * std::sin(angle);
      has_spare_ = true;
    }
    value = static_cast<float>(static_cast<double>(value) + stddev * draw);
  }
}

}  // namespace edgesgd
