#pragma once

// Exact selection of the k largest keys of a float array, shared by Top-k (keys = |x|) and
// RegTop-k (keys = non-negative scores).
//
// Order. The key of a float is its bit pattern with the sign bit cleared, compared as an unsigned
// integer. For non-NaN floats that is the order of |x| (with -0 == +0); every NaN ranks above
// +-infinity, larger NaN payloads above smaller ones. The selection takes the k largest keys,
// and among equal keys the lowest indices, so its choice equals that of a full sort by
// (key descending, index ascending) in every case, ties included.
//
// Method (one memory pass in the common case). A strided sample of the keys gives a threshold
// that, with a margin of a few standard deviations, most likely has between k and `capacity`
// keys above it; one filtering pass copies those (index, bits) pairs, in index order, into
// scratch, keeping keys equal to the threshold apart (only the earliest ones, as many as fit);
// an exact radix select over the candidates finds the k-th key, or, when too few keys lie
// strictly above the threshold, the k-th key is the threshold and the earliest ties complete
// the set. When the guess misses (too few candidates or overflow: adversarial or tiny inputs)
// an exact radix select runs over the whole input instead: 10/11/10-bit digit histograms,
// collecting candidates as soon as the keys sharing the decided digits fit in scratch. Either
// way the result is exact; only the time differs.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/status.h"

namespace edgesgd::internal {

// Bins of the radix histogram (the widest digit is 11 bits).
inline constexpr std::size_t kTopKeysHistogramBins = 2048;
// Slots past the capacity that the branch-free filtering loop may write (one block of keys).
inline constexpr std::size_t kTopKeysPadding = 16;

// Candidate capacity that makes the one-pass path likely for `size` keys and `k` kept: room for
// about twice k plus a margin for the sample's uncertainty at small k/size; never above `size`.
constexpr std::size_t TopKeysCandidateCapacity(std::size_t size, std::size_t k) {
  const std::size_t capacity = 2 * k + 1024 + size / 512;
  return capacity < size ? capacity : size;
}

// Scratch bytes that hold `capacity` candidates (index + bits), the histogram, the filtering
// padding and up to 3 bytes lost to aligning the span to 4 bytes.
constexpr std::size_t TopKeysScratchBytesForCapacity(std::size_t capacity) {
  return (kTopKeysHistogramBins + 2 * (capacity + kTopKeysPadding)) * sizeof(std::uint32_t) +
         (sizeof(std::uint32_t) - 1);
}

// Recommended scratch for selecting k of `size` keys.
constexpr std::size_t TopKeysScratchBytes(std::size_t size, std::size_t k) {
  return TopKeysScratchBytesForCapacity(TopKeysCandidateCapacity(size, k));
}

// The least scratch SelectTopKeys accepts: the histogram alone. With no room for candidates
// the selection is still exact but always takes three histogram passes over the input plus a
// partial fourth.
inline constexpr std::size_t kTopKeysMinScratchBytes = TopKeysScratchBytesForCapacity(0);

// Selects the k largest keys of `values` (order above) and writes their positions plus
// `index_base`, strictly ascending, to out_indices[0, k), and the selected floats unchanged
// (sign and NaN payload included) to out_values[0, k) unless out_values is empty. Reads
// `values`; uses `scratch` (any alignment, more is faster up to
// TopKeysScratchBytes(values.size(), k)) as temporary storage. Does not allocate.
// Returns kOk (k == 0 writes nothing); kInvalidArgument if k > values.size() or
// index_base + values.size() - 1 does not fit in 32 bits; kResourceExhausted if out_indices
// (or a non-empty out_values) holds fewer than k elements or scratch is below
// kTopKeysMinScratchBytes.
Status SelectTopKeys(std::span<const float> values, std::size_t k,
                     std::span<std::uint32_t> out_indices, std::span<float> out_values,
                     std::span<std::byte> scratch, std::uint32_t index_base = 0);

// As above, indices only.
inline Status SelectTopKeys(std::span<const float> values, std::size_t k,
                            std::span<std::uint32_t> out_indices, std::span<std::byte> scratch,
                            std::uint32_t index_base = 0) {
  return SelectTopKeys(values, k, out_indices, std::span<float>(), scratch, index_base);
}

}  // namespace edgesgd::internal
