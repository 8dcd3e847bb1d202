#pragma once

// Secure aggregation sums integers modulo 2^32. A float vector enters the ring as fixed point:
// each value clipped to [-bound, bound] and rounded to a multiple of 2^-f. f is chosen per round
// so that the sum over the whole cohort stays inside a signed 32-bit word, which makes the
// unmasked sum exact and its decoding unambiguous.

#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"

namespace edgesgd::secagg {

struct FixedPoint {
  std::uint32_t fraction_bits = 0;
  float bound = 0;  // every encoded value lies in [-bound, bound]
};

inline constexpr std::uint32_t kMaxFractionBits = 24;  // a float's mantissa holds no more
inline constexpr std::uint32_t kMinFractionBits = 8;

// The finest scale (at most 2^-24) at which `summands` values of magnitude at most `bound` sum
// without leaving [-(2^31 - 1), 2^31 - 1].
// Errors: kInvalidArgument for a bound that is not positive and finite or no summands;
// kOutOfRange when fewer than 8 fraction bits remain (bound x summands too large for 32 bits).
Result<FixedPoint> ChooseFixedPoint(float bound, std::uint32_t summands);

// round(clip(value) * 2^f) as a ring element (two's complement).
void EncodeFixedPoint(const FixedPoint& format, std::span<const float> values,
                      std::span<std::uint32_t> words);

// A ring element read as a signed integer: sums of signed encodings decode exactly while they
// stay inside the int32 range the format was chosen for.
// (C++20 defines the conversion as modular.)
constexpr std::int32_t SignedFromRing(std::uint32_t word) {
  return static_cast<std::int32_t>(word);
}
constexpr std::uint32_t RingFromSigned(std::int32_t value) {
  return static_cast<std::uint32_t>(value);
}

// sum * 2^-f for each word of an unmasked sum.
void DecodeFixedPointSum(const FixedPoint& format, std::span<const std::uint32_t> words,
                         std::span<float> values);

}  // namespace edgesgd::secagg
