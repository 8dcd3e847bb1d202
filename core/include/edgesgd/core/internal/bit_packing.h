#pragma once

// LSB-first packing of fixed-width unsigned fields into u32 words, the layout of every sub-word
// wire field (qsgd levels, sign bits): field i of width w occupies bits [i*w, (i+1)*w) of the
// stream, where bit j of the stream is bit j % 32 of word j / 32. A field may straddle two words.
//
// The bulk functions work on groups of kPackGroup fields in fixed stack arrays (no heap). Within a
// group, neighbouring fields are first merged pairwise (w -> 2w bits) while the merged width
// still fits in 32 bits; those steps are plain loops over arrays that compilers vectorise. Once
// the units are 8 bits wide they are the stream's bytes and one narrowing copy finishes (widths
// 1, 2, 4, 8 on little-endian targets); a merge to 32 bits writes the words directly (16). Only
// the "pieces" of the other widths, which end up wider than 16 bits, go through a sequential
// 64-bit accumulator, so the serial part costs at most one step per two fields. Unpacking runs
// the same steps backwards.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/check.h"

namespace edgesgd::internal {

inline constexpr std::uint32_t kMaxFieldWidth = 32;

// Fields per group of the bulk functions. A multiple of 32, so every full group ends on a word
// boundary (it fills exactly 4 * width words) and groups can be written independently.
inline constexpr std::size_t kPackGroup = 128;

// Words that `count` fields of `width` bits occupy (the last one possibly partly). Computed
// without forming count * width, which can overflow a 32-bit size_t.
constexpr std::size_t PackedWordCount(std::size_t count, std::uint32_t width) {
  return count / 32 * width + (count % 32 * width + 31) / 32;
}

// The low `width` bits set, for 1 <= width <= 32.
constexpr std::uint32_t FieldMask(std::uint32_t width) {
  return width >= 32 ? 0xFFFFFFFFu : (std::uint32_t{1} << width) - 1u;
}

// Field `index` of `width` bits (1..32). Reads the one or two words holding it, which the caller
// guarantees exist. Does not allocate.
constexpr std::uint32_t ReadField(std::span<const std::uint32_t> words, std::size_t index,
                                  std::uint32_t width) {
  const std::size_t bit = index * width;
  const std::size_t word = bit / 32;
  const auto shift = static_cast<std::uint32_t>(bit % 32);
  std::uint64_t window = words[word];
  if (shift + width > 32) window |= std::uint64_t{words[word + 1]} << 32;
  return static_cast<std::uint32_t>(window >> shift) & FieldMask(width);
}

// Overwrites field `index` of `width` bits (1..32) with the low `width` bits of `value`, leaving
// every other bit as it was. Reads and writes the one or two words holding it. Does not
// allocate. Meant for tests and sparse edits; PackFields is the fast path.
constexpr void WriteField(std::span<std::uint32_t> words, std::size_t index, std::uint32_t width,
                          std::uint32_t value) {
  const std::size_t bit = index * width;
  const std::size_t word = bit / 32;
  const auto shift = static_cast<std::uint32_t>(bit % 32);
  const std::uint64_t mask = std::uint64_t{FieldMask(width)} << shift;
  const std::uint64_t bits = std::uint64_t{value & FieldMask(width)} << shift;
  words[word] = static_cast<std::uint32_t>((words[word] & ~mask) | bits);
  if (shift + width > 32) {
    words[word + 1] = static_cast<std::uint32_t>(((words[word + 1] & ~(mask >> 32)) | bits >> 32));
  }
}

// Merge steps applied to fields of `width` bits before the serial stage: the largest m with
// width << m <= 32.
constexpr std::uint32_t MergeSteps(std::uint32_t width) {
  std::uint32_t steps = 0;
  while ((width << (steps + 1)) <= 32) ++steps;
  return steps;
}

// On little-endian targets (all of ours) units of exactly 8 bits are simply the bytes of the word
// stream, so a narrowing or widening copy — one instruction per vector — replaces the remaining
// merge or split steps. (Bytes may alias any object, so no type punning is involved.)
inline constexpr bool kPackBytesDirectly = std::endian::native == std::endian::little;

// The group functions are forced inline: a caller compiled for a wider instruction set (qsgd's
// AVX2 and AVX-512 kernels) then gets them vectorised for that set instead of calling one
// baseline copy.
#if defined(__GNUC__)
#define EDGESGD_BIT_PACKING_INLINE inline __attribute__((always_inline))
#else
#define EDGESGD_BIT_PACKING_INLINE inline
#endif

// Packs one full group: kPackGroup fields of `width` bits (1..32, each already below 2^width)
// into the first kPackGroup * width / 32 elements of `out`. `group` is working storage and is
// clobbered. The building block of PackFields, public for callers that produce fields a group
// at a time (qsgd) and so can skip PackFields' copy. Does not allocate. A too-small `out` or a
// bad width is a CHECK failure.
EDGESGD_BIT_PACKING_INLINE void PackFieldGroup(std::span<std::uint32_t, kPackGroup> group,
                                               std::uint32_t width, std::span<std::uint32_t> out) {
  EDGESGD_CHECK(width >= 1 && width <= kMaxFieldWidth && out.size() >= kPackGroup / 32 * width);
  std::uint32_t* const fields = group.data();
  std::uint32_t* const words = out.data();
  // Merge steps alternate between two buffers: a step never reads what it writes.
  std::uint32_t half[kPackGroup / 2];
  std::uint32_t* from = fields;
  std::uint32_t* to = half;
  std::size_t units = kPackGroup;
  std::uint32_t unit_width = width;
  while (unit_width * 2 <= 32) {
    if (kPackBytesDirectly && unit_width == 8) {
      auto* const bytes = reinterpret_cast<unsigned char*>(words);
      for (std::size_t j = 0; j < units; ++j) bytes[j] = static_cast<unsigned char>(from[j]);
      return;
    }
    units /= 2;
    // A merge that completes whole words writes them straight to the output.
    std::uint32_t* const dest = unit_width == 16 ? words : to;
    for (std::size_t j = 0; j < units; ++j) {
      dest[j] = from[2 * j] | (from[2 * j + 1] << unit_width);
    }
    unit_width *= 2;
    if (dest == words) return;
    std::uint32_t* const swap = from;
    from = to;
    to = swap;
  }
  if (unit_width == 32) {  // width 32: the fields are the words
    std::copy(from, from + units, words);
    return;
  }
  // Pieces wider than 16 bits: each completes at most one word, so one test per piece.
  std::uint64_t pending = 0;
  std::uint32_t pending_bits = 0;
  std::size_t next_word = 0;
  for (std::size_t j = 0; j < units; ++j) {
    pending |= std::uint64_t{from[j]} << pending_bits;
    pending_bits += unit_width;
    if (pending_bits >= 32) {
      words[next_word++] = static_cast<std::uint32_t>(pending);
      pending >>= 32;
      pending_bits -= 32;
    }
  }
  // kPackGroup * width is a multiple of 32, so nothing is left pending here.
}

// Inverse of PackFieldGroup: reads the first kPackGroup * width / 32 elements of `in` and writes
// all kPackGroup fields of `group`. Does not allocate. A too-small `in` or a bad width is a CHECK
// failure.
EDGESGD_BIT_PACKING_INLINE void UnpackFieldGroup(std::span<const std::uint32_t> in,
                                                 std::uint32_t width,
                                                 std::span<std::uint32_t, kPackGroup> group) {
  EDGESGD_CHECK(width >= 1 && width <= kMaxFieldWidth && in.size() >= kPackGroup / 32 * width);
  const std::uint32_t* const words = in.data();
  std::uint32_t* const fields = group.data();
  if (width == 32) {
    std::copy(words, words + kPackGroup, fields);
    return;
  }
  // Units of unit_width bits are split in halves until they are fields.
  const bool from_bytes = kPackBytesDirectly && 8 % width == 0;
  std::uint32_t unit_width = from_bytes ? 8 : width << MergeSteps(width);
  std::size_t units = kPackGroup * width / unit_width;
  std::uint32_t splits = 0;
  while ((width << splits) < unit_width) ++splits;
  // Ping-pong between `fields` and `half`, arranged so that the last split lands in `fields`.
  std::uint32_t half[kPackGroup / 2];
  std::uint32_t* const units_buffer = (splits % 2 == 0) ? fields : half;
  std::uint32_t* dst = (splits % 2 == 0) ? half : fields;
  const std::uint32_t* src = units_buffer;
  if (from_bytes) {
    const auto* const bytes = reinterpret_cast<const unsigned char*>(words);
    for (std::size_t j = 0; j < units; ++j) units_buffer[j] = bytes[j];
  } else if (unit_width == 32) {
    src = words;  // the first split reads the words in place
  } else {
    // Pieces wider than 16 bits: each needs at most one new word.
    const std::uint32_t mask = FieldMask(unit_width);
    std::uint64_t pending = 0;
    std::uint32_t pending_bits = 0;
    std::size_t next_word = 0;
    for (std::size_t j = 0; j < units; ++j) {
      if (pending_bits < unit_width) {
        pending |= std::uint64_t{words[next_word++]} << pending_bits;
        pending_bits += 32;
      }
      units_buffer[j] = static_cast<std::uint32_t>(pending) & mask;
      pending >>= unit_width;
      pending_bits -= unit_width;
    }
  }
  for (std::uint32_t split = 0; split < splits; ++split) {
    unit_width /= 2;
    const std::uint32_t mask = FieldMask(unit_width);
    for (std::size_t j = 0; j < units; ++j) {
      dst[2 * j] = src[j] & mask;
      dst[2 * j + 1] = src[j] >> unit_width;
    }
    units *= 2;
    src = dst;
    dst = (dst == fields) ? half : fields;
  }
}

// Packs fields[i] (its low `width` bits, 1 <= width <= 32) into `words` LSB-first. Writes exactly
// PackedWordCount(fields.size(), width) words, the unused high bits of the last one zero, and
// reads nothing else. Does not allocate (about 1.5 KiB of stack). A too-small `words` or a width
// outside 1..32 is a programmer error (CHECK).
inline void PackFields(std::span<const std::uint32_t> fields, std::uint32_t width,
                       std::span<std::uint32_t> words) {
  EDGESGD_CHECK(width >= 1 && width <= kMaxFieldWidth);
  EDGESGD_CHECK(words.size() >= PackedWordCount(fields.size(), width));
  const std::uint32_t mask = FieldMask(width);
  std::uint32_t group[kPackGroup];
  std::uint32_t tail_words[kMaxFieldWidth * kPackGroup / 32];
  for (std::size_t start = 0; start < fields.size(); start += kPackGroup) {
    const std::size_t count = std::min(kPackGroup, fields.size() - start);
    for (std::size_t i = 0; i < count; ++i) group[i] = fields[start + i] & mask;
    std::fill(group + count, group + kPackGroup, 0u);
    const std::span<std::uint32_t> out = words.subspan(start / 32 * width);
    if (count == kPackGroup) {
      PackFieldGroup(group, width, out);
    } else {
      PackFieldGroup(group, width, tail_words);
      std::copy(tail_words, tail_words + PackedWordCount(count, width), out.begin());
    }
  }
}

// Inverse of PackFields: fills every element of `fields` from the first
// PackedWordCount(fields.size(), width) words, which is all it reads. Bits of the last word past
// the final field are ignored (a decoder that must reject them checks them itself). Does not
// allocate (about 1.5 KiB of stack). A too-small `words` or a bad width is a CHECK failure.
inline void UnpackFields(std::span<const std::uint32_t> words, std::uint32_t width,
                         std::span<std::uint32_t> fields) {
  EDGESGD_CHECK(width >= 1 && width <= kMaxFieldWidth);
  const std::size_t total_words = PackedWordCount(fields.size(), width);
  EDGESGD_CHECK(words.size() >= total_words);
  std::uint32_t group[kPackGroup];
  std::uint32_t tail_words[kMaxFieldWidth * kPackGroup / 32];
  for (std::size_t start = 0; start < fields.size(); start += kPackGroup) {
    const std::size_t count = std::min(kPackGroup, fields.size() - start);
    std::span<const std::uint32_t> in = words.subspan(start / 32 * width);
    if (count < kPackGroup) {
      const std::size_t available = total_words - start / 32 * width;
      std::copy(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(available), tail_words);
      std::fill(tail_words + available, tail_words + width * kPackGroup / 32, 0u);
      in = tail_words;
    }
    UnpackFieldGroup(in, width, group);
    std::copy(group, group + count, fields.data() + start);
  }
}

}  // namespace edgesgd::internal
