#include "edgesgd/core/codecs/natural.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/internal/philox_batch.h"
#include "edgesgd/core/internal/simd_target.h"
#include "edgesgd/core/random.h"

// The encoder's inner loop is compiled once per x86-64 instruction set and chosen at run time
// (as the Philox generator is): every path computes the same bytes.
#if EDGESGD_X86_SIMD
#include <immintrin.h>
#endif
// Decoding is plain integer and float arithmetic: compiled for AVX2 as well and picked at load
// time on x86-64 Linux (the same bits either way).
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define EDGESGD_NATURAL_CLONES [[gnu::target_clones("avx2", "default")]]
#else
#define EDGESGD_NATURAL_CLONES
#endif
#if defined(__GNUC__)
#define EDGESGD_NATURAL_INLINE inline __attribute__((always_inline))
#else
#define EDGESGD_NATURAL_INLINE inline
#endif

namespace edgesgd {
namespace {

constexpr std::uint32_t kExponentMask = 0xFFu;
constexpr std::uint32_t kMantissaMask = 0x7FFFFFu;
constexpr std::uint32_t kTopExponent = 254;  // the largest finite one
// Random words per batch: 64 Philox blocks, the widest path's pass. Each word draws for two
// coordinates (16 bits each), so a chunk covers twice as many coordinates.
constexpr std::size_t kChunkWords = 4 * internal::kPhiloxBatchBlocks;
constexpr std::size_t kChunk = 2 * kChunkWords;
// The blocks the tie-breaking bits come from, far past any chunk's blocks (a tensor has fewer
// than 2^32 coordinates, so chunks use blocks below 2^29).
constexpr std::uint32_t kTieBlocks = 0x80000000u;

// Rounds `count` (<= kChunkWords) coordinates with the 16-bit draws (random[i] >> shift) &
// 0xFFFF against the top 16 of their 23 mantissa bits, writing one exponent byte each. A draw
// equal to those 16 bits is a tie, settled by 7 more bits (ResolveTies); `ties` is set when
// there is one. Returns whether every coordinate is finite. The comparisons are of values
// below 2^16, so signed ones (one instruction on every SIMD set).
EDGESGD_NATURAL_INLINE bool RoundWithDraws(const float* x, std::size_t count,
                                           const std::uint32_t* random, unsigned shift,
                                           std::uint8_t* exponents, bool& ties) {
  std::uint32_t non_finite = 0;
  std::uint32_t tie = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x[i]);
    const std::uint32_t exponent = (bits >> 23) & kExponentMask;
    non_finite |= static_cast<std::uint32_t>(exponent == kExponentMask);
    const auto draw = static_cast<std::int32_t>((random[i] >> shift) & 0xFFFFu);
    const auto high = static_cast<std::int32_t>((bits & kMantissaMask) >> 7);
    const std::uint32_t below_top = static_cast<std::uint32_t>(
        static_cast<std::int32_t>(exponent) < static_cast<std::int32_t>(kTopExponent));
    tie |= static_cast<std::uint32_t>(draw == high) & below_top;
    exponents[i] = static_cast<std::uint8_t>(exponent +
                                             (static_cast<std::uint32_t>(draw < high) & below_top));
  }
  ties = ties || tie != 0;
  return non_finite == 0;
}

// The chunk's tied coordinates (first is the chunk's first coordinate within its tensor): up
// when 7 more uniform bits (the top of word c % 4 of block kTieBlocks + c / 4, for coordinate
// c) are below the mantissa's low 7 bits. With the 16-bit draw that makes the probability of
// rounding up exactly mantissa / 2^23. Rare (2^-16 per coordinate): scalar.
void ResolveTies(const internal::PhiloxPlan& plan, std::size_t first, const float* x,
                 std::size_t count, const std::uint32_t* random, std::uint8_t* exponents) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x[i]);
    const std::uint32_t exponent = (bits >> 23) & kExponentMask;
    const std::uint32_t draw = (random[i % kChunkWords] >> (16 * (i / kChunkWords))) & 0xFFFFu;
    if (exponent >= kTopExponent || draw != ((bits & kMantissaMask) >> 7)) continue;
    const std::size_t c = first + i;
    const PhiloxBlock block =
        internal::PhiloxPlanBlock(plan, kTieBlocks + static_cast<std::uint32_t>(c / 4));
    if ((block[c % 4] >> 25) < (bits & 0x7Fu)) {
      exponents[i] = static_cast<std::uint8_t>(exponent + 1);
    }
  }
}

// The sign plane of `count` (<= kChunk) coordinates: bit j of word w set when coordinate
// 32w + j is non-negative (its sign bit clear).
EDGESGD_NATURAL_INLINE void SignBits(const float* x, std::size_t count, std::uint32_t* words) {
  for (std::size_t w = 0; w < (count + 31) / 32; ++w) {
    const std::size_t bits_here = std::min<std::size_t>(32, count - 32 * w);
    std::uint32_t word = 0;
    for (std::size_t j = 0; j < bits_here; ++j) {
      word |= (~std::bit_cast<std::uint32_t>(x[32 * w + j]) >> 31) << j;
    }
    words[w] = word;
  }
}

using SignBitsFunction = void (*)(const float*, std::size_t, std::uint32_t*);

#if EDGESGD_X86_SIMD
// SignBits with one movemask per 8 coordinates (the same bits).
// A call per chunk: GCC does not inline a target function into the generic EncodePlanes.
__attribute__((target("avx2"))) void SignBitsAvx2(const float* x, std::size_t count,
                                                  std::uint32_t* words) {
  std::size_t w = 0;
  for (; 32 * w + 32 <= count; ++w) {
    const float* const group = x + 32 * w;
    std::uint32_t negative = 0;
    for (int part = 0; part < 4; ++part) {
      const auto bits =
          static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_loadu_ps(group + 8 * part)));
      negative |= bits << (8 * part);
    }
    words[w] = ~negative;
  }
  if (32 * w < count) SignBits(x + 32 * w, count - 32 * w, words + w);
}
#endif

// One tensor's exponent plane and sign plane (`exponents` as bytes, `signs` as words), the
// rounding drawn from the stream of `plan` with kFill. False for a NaN or infinite input.
template <internal::PhiloxFillFunction kFill, SignBitsFunction kSignBits = SignBits>
EDGESGD_NATURAL_INLINE bool EncodePlanes(const internal::PhiloxPlan& plan, std::span<const float> x,
                                         std::uint8_t* exponents, std::uint32_t* signs) {
  std::array<std::uint32_t, kChunkWords> random;
  // Rounded into a local array and copied out: stores through a byte pointer into the payload
  // could alias anything, which would keep the loop from being vectorised.
  std::array<std::uint8_t, kChunk> rounded;
  for (std::size_t start = 0; start < x.size(); start += kChunk) {
    const std::size_t count = std::min(kChunk, x.size() - start);
    // The next chunk's input is fetched while the random words are computed (no loads of their
    // own), which keeps the memory busy.
    for (std::size_t ahead = start + kChunk; ahead < std::min(start + 2 * kChunk, x.size());
         ahead += 16) {
      __builtin_prefetch(x.data() + ahead);
    }
    // Coordinate start + i draws from word i % kChunkWords: its low half for the chunk's first
    // kChunkWords coordinates, its high half for the rest.
    kFill(plan, static_cast<std::uint32_t>(start / 8), random);
    const float* const chunk = x.data() + start;
    const std::size_t low = std::min(count, kChunkWords);
    bool ties = false;
    if (!RoundWithDraws(chunk, low, random.data(), 0, rounded.data(), ties) ||
        !RoundWithDraws(chunk + low, count - low, random.data(), 16, rounded.data() + low, ties)) {
      return false;
    }
    if (ties) ResolveTies(plan, start, chunk, count, random.data(), rounded.data());
    std::memcpy(exponents + start, rounded.data(), count);
    kSignBits(chunk, count, signs + start / 32);
  }
  return true;
}

using EncodePlanesFunction = bool (*)(const internal::PhiloxPlan&, std::span<const float>,
                                      std::uint8_t*, std::uint32_t*);

#if EDGESGD_X86_SIMD
__attribute__((target("avx2"))) bool EncodePlanesAvx2(const internal::PhiloxPlan& plan,
                                                      std::span<const float> x,
                                                      std::uint8_t* exponents,
                                                      std::uint32_t* signs) {
  return EncodePlanes<internal::PhiloxFillAvx2, SignBitsAvx2>(plan, x, exponents, signs);
}
__attribute__((target(EDGESGD_AVX512_TARGET))) bool EncodePlanesAvx512(
    const internal::PhiloxPlan& plan, std::span<const float> x, std::uint8_t* exponents,
    std::uint32_t* signs) {
  return EncodePlanes<internal::PhiloxFillAvx512, SignBitsAvx2>(plan, x, exponents, signs);
}
#endif

// The fastest encoder this CPU runs.
EncodePlanesFunction BestEncodePlanes() {
  switch (internal::BestPhiloxIsa()) {
#if EDGESGD_X86_SIMD
    case internal::PhiloxIsa::kAvx512:
      return &EncodePlanesAvx512;
    case internal::PhiloxIsa::kAvx2:
      return &EncodePlanesAvx2;
    case internal::PhiloxIsa::kSse2:
      return &EncodePlanes<internal::PhiloxFillSse2>;
#endif
    default:
      return &EncodePlanes<internal::PhiloxFillPortable>;
  }
}

// The exponent plane of a tensor's words, as bytes.
std::uint8_t* BytesOf(std::span<std::uint32_t> words) {
  return reinterpret_cast<std::uint8_t*>(words.data());
}
const std::uint8_t* BytesOf(std::span<const std::uint32_t> words) {
  return reinterpret_cast<const std::uint8_t*>(words.data());
}

// acc[i] += weight * (+-2^(exponent i - 127), 0 for exponent 0) over one tensor's planes, 32
// coordinates (one sign word) at a time. The exponents are copied out of the payload first so
// the accumulator's stores cannot alias them (which would keep the loop scalar).
EDGESGD_NATURAL_CLONES void AddPlanes(const std::uint8_t* exponents, const std::uint32_t* signs,
                                      float weight, float* acc, std::size_t size) {
  std::array<std::uint8_t, 32> block;
  for (std::size_t start = 0; start < size; start += 32) {
    const std::size_t count = std::min<std::size_t>(32, size - start);
    std::memcpy(block.data(), exponents + start, count);
    const std::uint32_t negative = ~signs[start / 32];
    float* const out = acc + start;
    const auto add = [&](std::size_t j) {
      const std::uint32_t bits = (((negative >> j) & 1u) << 31) | (std::uint32_t{block[j]} << 23);
      out[j] += weight * std::bit_cast<float>(bits);
    };
    if (count == 32) {
      for (std::size_t j = 0; j < 32; ++j) add(j);  // a constant trip count vectorises
    } else {
      for (std::size_t j = 0; j < count; ++j) add(j);
    }
  }
}

}  // namespace

Status NaturalCodec::Encode(const NaturalParams& params, const TensorLayout& layout,
                            const CodecContext& context, std::span<const float> input,
                            const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<NaturalCodec>(params, layout, input, out, scratch));
  const EncodePlanesFunction encode_planes = BestEncodePlanes();
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(input, t);
    const std::span<std::uint32_t> exponent_words =
        out.words.subspan(word, ExponentWordsFor(x.size()));
    const std::span<std::uint32_t> sign_words =
        out.words.subspan(word + exponent_words.size(), SignWordsFor(x.size()));
    word += exponent_words.size() + sign_words.size();
    exponent_words.back() = 0;  // its unused bytes
    const internal::PhiloxPlan plan =
        internal::MakePhiloxPlan(context.seed, context.round, static_cast<std::uint32_t>(t),
                                 StreamId(RandomPurpose::kQuantizationDither, context.worker));
    if (!encode_planes(plan, x, BytesOf(exponent_words), sign_words.data())) {
      return Status::InvalidArgument("natural compression got a NaN or infinite value");
    }
  }
  return Status::Ok();
}

Status NaturalCodec::DecodeAdd(const NaturalParams& params, const TensorLayout& layout,
                               const CodecContext&, const PayloadView& payload, float weight,
                               std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY(
      internal::CheckedDecodeShape<NaturalCodec>(params, layout, payload, accumulator, scratch));
  // Verify everything before the first write, so a rejected payload changes nothing.
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::span<const std::uint32_t> exponent_words =
        payload.words.subspan(word, ExponentWordsFor(size));
    const std::uint32_t sign_tail = payload.words[word + WordsFor(size) - 1];
    word += WordsFor(size);
    const std::uint8_t* const exponents = BytesOf(exponent_words);
    std::uint32_t bad = 0;
    for (std::size_t i = 0; i < size; ++i) bad |= exponents[i] == kExponentMask ? 1u : 0u;
    if (bad != 0) return Status::DataLoss("a natural coordinate has exponent 255");
    const std::size_t exponent_tail = size % 4;
    const std::size_t sign_bits = size % 32;
    if ((exponent_tail != 0 && (exponent_words.back() >> (8 * exponent_tail)) != 0) ||
        (sign_bits != 0 && (sign_tail >> sign_bits) != 0)) {
      return Status::DataLoss("a natural payload has padding set");
    }
  }
  word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<float> acc = layout.Slice(accumulator, t);
    const std::uint8_t* const exponents =
        BytesOf(payload.words.subspan(word, ExponentWordsFor(acc.size())));
    const std::span<const std::uint32_t> signs =
        payload.words.subspan(word + ExponentWordsFor(acc.size()), SignWordsFor(acc.size()));
    word += WordsFor(acc.size());
    AddPlanes(exponents, signs.data(), weight, acc.data(), acc.size());
  }
  return Status::Ok();
}

}  // namespace edgesgd
