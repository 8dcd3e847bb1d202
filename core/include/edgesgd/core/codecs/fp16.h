#pragma once

// IEEE-754 half precision: every coordinate rounded to the nearest binary16 value (ties to even),
// 16 bits instead of 32. Magnitudes beyond the largest half, 65504, saturate to +-65504 (with
// error feedback the clipped part stays in the residual); NaN and infinity are refused (the run
// diverged). The rounding is deterministic, so the codec needs no randomness.
//
// Payload: `words` only, two halves per word: coordinate 2k of a tensor in the low 16 bits of
// the tensor's word k, coordinate 2k + 1 in the high bits; each tensor starts on a fresh word and
// an odd tensor's last high half is zero. Receivers reject a half that is NaN or infinite.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd {

using Fp16Params = NoParams<struct Fp16Codec>;

struct Fp16Codec : WithoutParameters<Fp16Params> {
  using Params = Fp16Params;
  static constexpr std::string_view kName = "fp16";
  static constexpr std::string_view kSummary =
      "IEEE half precision (round to nearest even, saturating at 65504), 2 bytes per coordinate";
  static constexpr PayloadLayout kLayout = PayloadLayout::kPackedWords;
  static constexpr CodecTraits kTraits{.downlink_recompress = true, .consensus_step = 1.0f};

  static constexpr std::size_t WordsFor(std::size_t size) { return (size + 1) / 2; }
  static constexpr Result<PayloadShape> Shape(const Params&, const TensorLayout& layout) {
    return SumOverTensors(layout,
                          [](std::size_t size) { return PayloadShape{.words = WordsFor(size)}; });
  }
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }

  // Encode reads `input` (layout.dimension() floats) and writes Shape().words words. Errors:
  // kInvalidArgument (input size, a NaN or infinite input), kResourceExhausted (out.words too
  // small). Does not allocate.
  // DecodeAdd verifies the whole payload first (word count, no NaN or infinite half, zero padding),
  // then accumulator += weight * decode(payload) (a half converts to float exactly). Errors:
  // kInvalidArgument (accumulator size), kDataLoss (malformed payload; the accumulator is left
  // untouched). Does not allocate.
  EDGESGD_CODEC_OPERATIONS(Params);
};

namespace internal {

// The half nearest to `value` (ties to even), saturated to +-65504; `value` must be finite.
// Branch-free (both roundings are computed and one is kept) so that loops over it vectorise.
constexpr std::uint16_t HalfFromFloat(float value) {
  constexpr std::uint32_t kLargestHalf = 0x477FE000u;         // 65504 as a float
  constexpr std::uint32_t kSmallestNormalHalf = 0x38800000u;  // 2^-14
  constexpr std::uint32_t kHalfOfOne = 0x3F000000u;           // 0.5f: its ulp is the half ulp 2^-24
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = std::min(bits & 0x7FFFFFFFu, kLargestHalf);
  // Below 2^-14 the half is subnormal: adding 0.5f rounds |x| to a multiple of 2^-24 (ties to
  // even), which leaves the half's mantissa in the sum's low bits.
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(magnitude) + 0.5f) - kHalfOfOne;
  // Otherwise: round the 13 dropped mantissa bits to nearest even, then move the exponent from
  // bias 127 to bias 15.
  const std::uint32_t normal = (magnitude + 0xFFFu + ((magnitude >> 13) & 1u) - (112u << 23)) >> 13;
  const std::uint32_t use_subnormal =
      0u - static_cast<std::uint32_t>(magnitude < kSmallestNormalHalf);
  return static_cast<std::uint16_t>(sign | (subnormal & use_subnormal) | (normal & ~use_subnormal));
}

// The float equal to `half` (exact), for a half that is not NaN or infinite.
constexpr float FloatFromHalf(std::uint16_t half) {
  const std::uint32_t sign = std::uint32_t{half & 0x8000u} << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1Fu;
  const std::uint32_t mantissa = half & 0x3FFu;
  const float subnormal = static_cast<float>(mantissa) * 0x1p-24f;  // exact: mantissa < 2^10
  const std::uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
  const std::uint32_t use_subnormal = 0u - static_cast<std::uint32_t>(exponent == 0);
  return std::bit_cast<float>(sign | (std::bit_cast<std::uint32_t>(subnormal) & use_subnormal) |
                              (normal & ~use_subnormal));
}

}  // namespace internal

}  // namespace edgesgd
