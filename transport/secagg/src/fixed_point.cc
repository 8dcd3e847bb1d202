#include "edgesgd/secagg/fixed_point.h"

#include <cmath>

#include "edgesgd/core/check.h"

namespace edgesgd::secagg {

Result<FixedPoint> ChooseFixedPoint(float bound, std::uint32_t summands) {
  if (!(bound > 0.0f) || !std::isfinite(bound)) {
    return Status::InvalidArgument("the fixed-point bound must be positive and finite");
  }
  if (summands == 0) return Status::InvalidArgument("a sum needs at least one summand");
  constexpr double kLargestSum = 2147483647.0;  // 2^31 - 1
  for (std::uint32_t bits = kMaxFractionBits + 1; bits-- > kMinFractionBits;) {
    // The largest encoded magnitude is round(bound * 2^f); the sum of `summands` of them must fit.
    const double largest =
        std::nearbyint(static_cast<double>(bound) * std::ldexp(1.0, static_cast<int>(bits)));
    if (largest * summands <= kLargestSum) return FixedPoint{bits, bound};
  }
  return Status::OutOfRange(
      "the clipping bound times the cohort size leaves fewer than 8 fraction bits in a 32-bit sum");
}

void EncodeFixedPoint(const FixedPoint& format, std::span<const float> values,
                      std::span<std::uint32_t> words) {
  EDGESGD_CHECK(values.size() == words.size());
  const double scale = std::ldexp(1.0, static_cast<int>(format.fraction_bits));
  const auto bound = static_cast<double>(format.bound);
  for (std::size_t i = 0; i < values.size(); ++i) {
    auto value = static_cast<double>(values[i]);
    if (!(value >= -bound)) value = std::isnan(value) ? 0.0 : -bound;  // NaN encodes as 0
    if (value > bound) value = bound;
    words[i] = RingFromSigned(static_cast<std::int32_t>(std::nearbyint(value * scale)));
  }
}

void DecodeFixedPointSum(const FixedPoint& format, std::span<const std::uint32_t> words,
                         std::span<float> values) {
  EDGESGD_CHECK(values.size() == words.size());
  const double step = std::ldexp(1.0, -static_cast<int>(format.fraction_bits));
  for (std::size_t i = 0; i < words.size(); ++i) {
    values[i] = static_cast<float>(SignedFromRing(words[i]) * step);
  }
}

}  // namespace edgesgd::secagg
