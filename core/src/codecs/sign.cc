#include "edgesgd/core/codecs/sign.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "edgesgd/core/check.h"
#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/internal/reduce.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define EDGESGD_SIGN_SSE2 1
#elif defined(__aarch64__) && defined(__ARM_NEON)
// AArch64 only: ARMv7 NEON flushes subnormals to zero, which would change the scale's bits.
#include <arm_neon.h>
#define EDGESGD_SIGN_NEON 1
#endif

namespace edgesgd {
namespace {

constexpr std::size_t kWordBits = 32;
using Lanes = std::array<float, internal::kReduceLanes>;
// CombineLanes and the SIMD paths (two 4-wide accumulators) are written for LaneSum's 8 lanes;
// 32 coordinates per word then hold whole lane groups, so coordinate i stays in lane i % 8.
static_assert(internal::kReduceLanes == 8 && kWordBits % internal::kReduceLanes == 0);

// NaN payloads propagate differently across FPUs (and across operand orders the compiler picks),
// so a NaN sum is replaced by one fixed bit pattern.
constexpr std::uint32_t kCanonicalNanBits = 0x7FC00000u;

// 1 when v < 0. A comparison, not the float's sign bit, so that -0.0 and NaN (for which v < 0 is
// false) get the codec's bit 1 like +0.0.
inline std::uint32_t NegativeBit(float v) { return v < 0.0f ? 1u : 0u; }

// |v| exactly as internal::SumAbs computes it (the sign bit cleared), so the lane sums are
// bit-identical to it; no data-dependent branch, which would mispredict on half of all
// gradient coordinates.
inline float AbsAsSumAbs(float v) {
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0x7FFFFFFFu);
}

// Packs `x` (at most 32 coordinates, the first at a multiple of 32 within its tensor so that
// coordinate j sits in lane j % kLanes) into one word and adds |x| into `lanes`.
inline std::uint32_t PackWordPortable(std::span<const float> x, Lanes& lanes) {
  std::uint32_t word = 0;
  for (std::size_t j = 0; j < x.size(); ++j) {
    const float v = x[j];
    const std::uint32_t negative = NegativeBit(v);
    word |= (negative ^ 1u) << j;
    lanes[j % internal::kReduceLanes] += AbsAsSumAbs(v);
  }
  return word;
}

// Packs the words from `first_word` on with the portable code, continuing `lanes`. Full words
// go through a loop with constant bounds so the compiler keeps the eight lanes in registers
// (a lane array updated through a reference would bounce through memory on every add).
float FinishPortable(std::span<const float> x, std::span<std::uint32_t> words,
                     std::size_t first_word, const Lanes& lanes_in) {
  Lanes lanes = lanes_in;
  const std::size_t full_words = x.size() / kWordBits;
  for (std::size_t w = first_word; w < full_words; ++w) {
    const std::span<const float> chunk = x.subspan(w * kWordBits, kWordBits);
    std::uint32_t word = 0;
    for (std::size_t group = 0; group < kWordBits; group += internal::kReduceLanes) {
      for (std::size_t lane = 0; lane < internal::kReduceLanes; ++lane) {
        const float v = chunk[group + lane];
        const std::uint32_t negative = NegativeBit(v);
        word |= (negative ^ 1u) << (group + lane);
        lanes[lane] += AbsAsSumAbs(v);
      }
    }
    words[w] = word;
  }
  const std::size_t begin = std::max(first_word, full_words) * kWordBits;
  if (begin < x.size()) {
    words[begin / kWordBits] = PackWordPortable(x.subspan(begin), lanes);
  }
  return internal::CombineLanes(lanes);
}

#if defined(EDGESGD_SIGN_SSE2)
// One pass: compare against zero once per vector, use the mask both for the sign bits and for
// |x| (flip the sign bit where x < 0, exactly like SumAbs). Lanes 0-3 live in `low`, 4-7 in
// `high`, each receiving its coordinates in order, so the sum is SumAbs's to the bit.
float SignPackSse2(std::span<const float> x, std::span<std::uint32_t> words) {
  const std::size_t full_words = x.size() / kWordBits;
  const __m128 zero = _mm_setzero_ps();
  const __m128 sign_bit = _mm_set1_ps(-0.0f);
  __m128 low = _mm_setzero_ps();
  __m128 high = _mm_setzero_ps();
  const float* data = x.data();
  for (std::size_t w = 0; w < full_words; ++w) {
    const float* p = data + w * kWordBits;
    __m128i negative[8];  // std::array would drop __m128i's vector attributes
    for (std::size_t g = 0; g < 8; g += 2) {
      const __m128 v0 = _mm_loadu_ps(p + 4 * g);
      const __m128 v1 = _mm_loadu_ps(p + 4 * g + 4);
      const __m128 n0 = _mm_cmplt_ps(v0, zero);
      const __m128 n1 = _mm_cmplt_ps(v1, zero);
      low = _mm_add_ps(low, _mm_andnot_ps(sign_bit, v0));
      high = _mm_add_ps(high, _mm_andnot_ps(sign_bit, v1));
      negative[g] = _mm_castps_si128(n0);
      negative[g + 1] = _mm_castps_si128(n1);
    }
    // All-ones/zero 32-bit masks narrow losslessly to bytes in coordinate order; one byte
    // movemask per 16 coordinates.
    const __m128i bytes_low = _mm_packs_epi16(_mm_packs_epi32(negative[0], negative[1]),
                                              _mm_packs_epi32(negative[2], negative[3]));
    const __m128i bytes_high = _mm_packs_epi16(_mm_packs_epi32(negative[4], negative[5]),
                                               _mm_packs_epi32(negative[6], negative[7]));
    const auto negative_bits = static_cast<std::uint32_t>(_mm_movemask_epi8(bytes_low)) |
                               (static_cast<std::uint32_t>(_mm_movemask_epi8(bytes_high)) << 16);
    words[w] = ~negative_bits;
  }
  Lanes lanes;
  _mm_storeu_ps(lanes.data(), low);
  _mm_storeu_ps(lanes.data() + 4, high);
  return FinishPortable(x, words, full_words, lanes);
}
#endif

#if defined(EDGESGD_SIGN_NEON)
// The NEON twin of SignPackSse2. Each vector's negative mask is ANDed with its coordinates' bit
// positions; the positions of the eight vectors are disjoint, so ORing the eight and one
// horizontal add assemble the word.
float SignPackNeon(std::span<const float> x, std::span<std::uint32_t> words) {
  const std::size_t full_words = x.size() / kWordBits;
  const float32x4_t zero = vdupq_n_f32(0.0f);
  std::array<uint32x4_t, 8> positions;
  for (std::size_t g = 0; g < 8; ++g) {
    const std::array<std::uint32_t, 4> bits = {1u << (4 * g), 2u << (4 * g), 4u << (4 * g),
                                               8u << (4 * g)};
    positions[g] = vld1q_u32(bits.data());
  }
  float32x4_t low = vdupq_n_f32(0.0f);
  float32x4_t high = vdupq_n_f32(0.0f);
  const float* data = x.data();
  for (std::size_t w = 0; w < full_words; ++w) {
    const float* p = data + w * kWordBits;
    uint32x4_t negative_bits = vdupq_n_u32(0);
    for (std::size_t g = 0; g < 8; g += 2) {
      const float32x4_t v0 = vld1q_f32(p + 4 * g);
      const float32x4_t v1 = vld1q_f32(p + 4 * g + 4);
      const uint32x4_t n0 = vcltq_f32(v0, zero);
      const uint32x4_t n1 = vcltq_f32(v1, zero);
      low = vaddq_f32(low, vabsq_f32(v0));
      high = vaddq_f32(high, vabsq_f32(v1));
      negative_bits = vorrq_u32(negative_bits, vandq_u32(n0, positions[g]));
      negative_bits = vorrq_u32(negative_bits, vandq_u32(n1, positions[g + 1]));
    }
    words[w] = ~vaddvq_u32(negative_bits);
  }
  Lanes lanes;
  vst1q_f32(lanes.data(), low);
  vst1q_f32(lanes.data() + 4, high);
  return FinishPortable(x, words, full_words, lanes);
}
#endif

}  // namespace

namespace internal {

float SignPackPortable(std::span<const float> x, std::span<std::uint32_t> words) {
  EDGESGD_CHECK(words.size() >= SignCodec::WordsFor(x.size()));
  Lanes lanes{};
  return FinishPortable(x, words, 0, lanes);
}

float MeanAbsScale(float sum_abs, std::size_t size) {
  const float scale = sum_abs / static_cast<float>(size);
  return std::isnan(scale) ? std::bit_cast<float>(kCanonicalNanBits) : scale;
}

float SignPack(std::span<const float> x, std::span<std::uint32_t> words) {
  EDGESGD_CHECK(words.size() >= SignCodec::WordsFor(x.size()));
#if defined(EDGESGD_SIGN_SSE2)
  return SignPackSse2(x, words);
#elif defined(EDGESGD_SIGN_NEON)
  return SignPackNeon(x, words);
#else
  return SignPackPortable(x, words);
#endif
}

}  // namespace internal

Status SignCodec::Encode(const SignParams& params, const TensorLayout& layout,
                         const CodecContext&, std::span<const float> input,
                         const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<SignCodec>(params, layout, input, out, scratch));
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(input, t);
    const std::size_t word_count = WordsFor(x.size());
    const std::span<std::uint32_t> words = out.words.subspan(word, word_count);
    const float sum_abs = internal::SignPack(x, words);
    out.scales[t] =
        params.scale == SignScale::kMeanAbs ? internal::MeanAbsScale(sum_abs, x.size()) : 1.0f;
    word += word_count;
  }
  return Status::Ok();
}

Status SignCodec::DecodeAdd(const SignParams& params, const TensorLayout& layout,
                            const CodecContext&, const PayloadView& payload, float weight,
                            std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY(
      internal::CheckedDecodeShape<SignCodec>(params, layout, payload, accumulator, scratch));
  return internal::AddSignWords(layout, payload, weight, accumulator);
}

namespace internal {

Status AddSignWords(const TensorLayout& layout, const PayloadView& payload, float weight,
                    std::span<float> accumulator) {
  // Verify everything before the first write, so a rejected payload changes nothing.
  if (!internal::AllFinite(payload.scales)) {
    return Status::DataLoss("a sign scale is a NaN or an infinity");
  }
  for (const float scale : payload.scales) {
    if (!(scale >= 0.0f)) return Status::DataLoss("a sign scale is negative");
  }
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    word += SignCodec::WordsFor(size);
    const std::size_t used_bits = size % kWordBits;
    if (used_bits != 0 && (payload.words[word - 1] >> used_bits) != 0) {
      return Status::DataLoss("a sign payload has padding bits set");
    }
  }

  word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<float> acc = layout.Slice(accumulator, t);
    // weight * -scale == -(weight * scale) exactly (IEEE rounding is symmetric under
    // negation), so a clear bit only flips the sign bit of `plus`: branch-free, and a fixed
    // 32-step inner loop the compiler vectorises.
    const auto plus_bits = std::bit_cast<std::uint32_t>(weight * payload.scales[t]);
    for (std::size_t begin = 0; begin < acc.size(); begin += kWordBits, ++word) {
      const std::uint32_t negative = ~payload.words[word];
      float* out = acc.data() + begin;
      if (acc.size() - begin >= kWordBits) {
        for (std::size_t j = 0; j < kWordBits; ++j) {
          out[j] += std::bit_cast<float>(plus_bits ^ (((negative >> j) & 1u) << 31));
        }
      } else {
        for (std::size_t j = 0; j < acc.size() - begin; ++j) {
          out[j] += std::bit_cast<float>(plus_bits ^ (((negative >> j) & 1u) << 31));
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace internal

}  // namespace edgesgd
