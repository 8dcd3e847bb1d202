#pragma once

// QSGD under secure aggregation. Plain QSGD scales each bucket by its own norm, a real number
// that differs between devices and that a masked sum could neither add nor hide. Here every
// device of a round quantizes with one scale S that the server announces (for example the
// clipping bound of the updates), so the levels of all devices mean the same and their integer
// sum is the sum of the quantized values:
//   r     = min(|v| * (s / S), s)                    (s = the levels, as in the qsgd codec)
//   level = sign(v) * (floor(r) + 1 with probability r - floor(r), else floor(r))
// Unbiased for |v| <= S; larger values clip to level +-s; NaN encodes as level 0. The shifted
// level + s, in 0..2s, goes into a lane (lanes.h) sized for the whole cohort's sum, 2 s n, so
// the unmasked lane sum L of the n' devices that survived gives sum(level) = L - n' s exactly,
// and the sum of their quantized values is S / s * (L - n' s).
//
// A coordinate costs 32 / floor(32 / lane_bits) bits instead of the plain codec's
// 1 + ceil(log2(s + 1)) (and no bucket norms travel): a masked sum of n levels has 2 s n + 1
// possible values.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/random.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd::secagg {

struct SharedScaleLevels {
  float scale = 0;              // S: the magnitude that maps to the top level
  std::uint32_t levels = 0;     // s
  std::uint32_t summands = 0;   // the cohort the lanes are sized for
  std::uint32_t lane_bits = 0;  // LaneBits(2 s summands)
};

// The lanes for `summands` devices quantizing to `levels` levels of `scale`.
// Errors: kInvalidArgument for a scale that is not positive and finite, levels outside
// 1..kMaxQsgdLevels or no summands; kOutOfRange when 2 s n does not fit a 32-bit lane.
Result<SharedScaleLevels> ChooseSharedScaleLevels(float scale, std::uint32_t levels,
                                                  std::uint32_t summands);

// Words the levels of `coordinates` values take.
std::size_t SharedScaleLevelWords(const SharedScaleLevels& format, std::size_t coordinates);

// Quantizes `values` and packs their shifted levels into `words` (SharedScaleLevelWords long).
// The rounding draws one uniform float per value from `dither`, a stream private to the device.
void EncodeSharedScaleLevels(const SharedScaleLevels& format, std::span<const float> values,
                             CounterRng& dither, std::span<std::uint32_t> words);

// The same lanes from a qsgd payload (QsgdCodec) quantized with QsgdParams::shared_scale ==
// format.scale and levels == format.levels: `payload_words` as the codec packs them for `layout`
// (one field per coordinate, each tensor from a fresh word), `words` SharedScaleLevelWords long.
// The quantization, and with it the error a device's error feedback keeps, is the codec's.
// Errors: kInvalidArgument for payload words of another length or a level above s (words is
// then unspecified).
Status EncodeQsgdPayloadLevels(const SharedScaleLevels& format, const TensorLayout& layout,
                               std::span<const std::uint32_t> payload_words,
                               std::span<std::uint32_t> words);

// The sum of the quantized values of `survivors` devices (at most format.summands) from the
// unmasked sum of their encodings.
void DecodeSharedScaleLevelSum(const SharedScaleLevels& format,
                               std::span<const std::uint32_t> words, std::uint32_t survivors,
                               std::span<float> values);

}  // namespace edgesgd::secagg
