#pragma once

// Natural compression (Horváth et al., "Natural Compression for Distributed Deep Learning",
// 2019): every coordinate is rounded, without bias, to one of the two powers of two around it,
// and only its sign and exponent travel — 9 bits instead of 32, 3.6x smaller, with a variance
// of at most 1/8 of |x|^2.
//
// For x with |x| in [a, 2a), a = 2^floor(log2 |x|), the codec sends sign(x) * 2a with
// probability (|x| - a) / a and sign(x) * a otherwise, so E[C(x)] = x. In IEEE-754 bits that
// probability is the mantissa: with m the 23 mantissa bits of x (m_hi its top 16, m_lo its low
// 7) and uniform draws u16 (16 bits) and u7 (7 bits),
//   exponent' = exponent + 1 if u16 < m_hi, or u16 == m_hi and u7 < m_lo;  mantissa dropped,
// which is up with probability m / 2^23 exactly; u7 is drawn only on a tie (2^-16 of the time).
// Zero stays zero; a subnormal rounds the same way to 0 or the smallest normal; at the top of the
// float range (|x| >= 2^127) the exponent cannot grow and rounds down.
// The draws come from Philox4x32_10((round, tensor, StreamId(kQuantizationDither, worker), n),
// KeyFromSeed(seed)), private to each worker and the same bits on every architecture: for
// coordinate i of a tensor, with j = i mod 512, u16 is half j / 256 (low, then high) of word
// j mod 4 of block n = 64 * floor(i / 512) + (j mod 256) / 4, and u7 is the top 7 bits of word
// i mod 4 of block n = 2^31 + i / 4.
//
// Payload: `words` only, 9 bits per coordinate in two planes per tensor, each starting on a
// fresh word (byte and bit planes keep encoding and decoding at memory speed, where 9-bit fields
// straddling words would not): first the biased exponents, one byte per coordinate (byte i of the
// plane, LSB-first within words, is coordinate i), then the signs, one bit per coordinate (bit j
// of word w is coordinate 32w + j; 1 means x >= 0, as in the sign codec). Unused bytes and bits
// at the end of a plane are zero. Decoded value: +-2^(exponent - 127), and 0 for exponent 0.
// NaN and infinity are refused (the run diverged); an exponent of 255 is malformed.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd {

using NaturalParams = NoParams<struct NaturalCodec>;

struct NaturalCodec : WithoutParameters<NaturalParams> {
  using Params = NaturalParams;
  static constexpr std::string_view kName = "natural";
  static constexpr std::string_view kSummary =
      "natural compression: each coordinate rounded without bias to a power of two, 9 bits "
      "(sign + exponent)";
  static constexpr PayloadLayout kLayout = PayloadLayout::kPackedWords;
  static constexpr CodecTraits kTraits{.downlink_recompress = true, .consensus_step = 1.0f};

  // Words of the exponent and sign planes of one tensor of `size` coordinates.
  static constexpr std::size_t ExponentWordsFor(std::size_t size) { return (size + 3) / 4; }
  static constexpr std::size_t SignWordsFor(std::size_t size) { return (size + 31) / 32; }
  static constexpr std::size_t WordsFor(std::size_t size) {
    return ExponentWordsFor(size) + SignWordsFor(size);
  }
  static constexpr Result<PayloadShape> Shape(const Params&, const TensorLayout& layout) {
    return SumOverTensors(layout,
                          [](std::size_t size) { return PayloadShape{.words = WordsFor(size)}; });
  }
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }

  // Encode reads `input` (layout.dimension() floats) and writes Shape().words words. Errors:
  // kInvalidArgument (input size, a NaN or infinite input), kResourceExhausted (out.words too
  // small). Does not allocate; about 1 KiB of stack.
  // DecodeAdd verifies the whole payload first (word count, no exponent 255, zero padding), then
  // accumulator += weight * decode(payload). Errors: kInvalidArgument (accumulator size),
  // kDataLoss (malformed payload; the accumulator is left untouched). Does not allocate.
  EDGESGD_CODEC_OPERATIONS(Params);
};

}  // namespace edgesgd
