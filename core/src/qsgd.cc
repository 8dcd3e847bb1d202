#include "edgesgd/core/codecs/qsgd.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "edgesgd/core/internal/bit_packing.h"
#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/internal/reduce.h"
#include "edgesgd/core/random.h"

// On x86-64 the Philox dither dominates the encoder, so it has hand-vectorised SSE2 (baseline),
// AVX2 and AVX-512 versions chosen at run time; the quantisation and packing loops are portable
// code that each path compiles with its own instruction set. Everywhere else (ARM boards,
// Cortex-M) only the portable path exists, and compilers vectorise it for NEON where they can.
#if defined(__x86_64__) && defined(__GNUC__)
#define EDGESGD_QSGD_X86 1
#include <immintrin.h>
#else
#define EDGESGD_QSGD_X86 0
#endif

// Forces the shared kernel bodies into each instruction-set wrapper, so that every path gets
// them compiled (and vectorised) for its own target rather than calling one baseline copy.
#if defined(__GNUC__)
#define EDGESGD_QSGD_INLINE inline __attribute__((always_inline))
#else
#define EDGESGD_QSGD_INLINE inline
#endif

namespace edgesgd {
namespace {

using internal::QsgdKernel;

// Coordinates per encoder chunk: 64 Philox blocks, two bit-packing groups. A chunk starts on a
// multiple of 256, so on a Philox block and on a word boundary for every width. (64 blocks keep
// eight independent AVX-512 Philox chains in flight, which hides the multiplier latency; the
// decoder, which has no dither, works a packing group at a time.)
constexpr std::size_t kChunk = 2 * internal::kPackGroup;
static_assert(kChunk == internal::kQsgdDitherWords && kChunk % internal::kPackGroup == 0);
constexpr std::uint32_t kBlocksPerChunk = kChunk / 4;
constexpr std::size_t kGroup = internal::kPackGroup;

constexpr std::uint32_t kMul0 = 0xD2511F53u;
constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;

constexpr std::uint32_t Hi(std::uint64_t product) {
  return static_cast<std::uint32_t>(product >> 32);
}
constexpr std::uint32_t Lo(std::uint64_t product) { return static_cast<std::uint32_t>(product); }

// Philox4x32-10 over the counters (round, tensor, stream, n) of one tensor's dither stream, with
// the work that does not depend on the block index n done once. Only the last counter word
// varies, so round 0 reduces to one xor, rounds 1 and 2 to one multiply each (the other product
// is a constant), and from round 3 on the rounds are the generic ones — 16 multiplies per block
// instead of 20. Constants are named after the round they enter (see DitherBlock).
struct DitherPlan {
  std::uint32_t c0;  // round 0: x2 = n ^ c0
  std::uint32_t c1;  // round 1: x0 = hi(M1 * x2) ^ c1
  std::uint32_t c2;  // round 2: x0 = x1 ^ c2
  std::uint32_t c3;  // round 2: x2 = hi(M0 * x0) ^ c3
  std::uint32_t c4;  // round 3: x0 = hi(M1 * x2) ^ c4
  std::uint32_t key0[10];
  std::uint32_t key1[10];
};

constexpr DitherPlan MakeDitherPlan(const CodecContext& context, std::uint32_t tensor) {
  const PhiloxKey key = KeyFromSeed(context.seed);
  DitherPlan plan{};
  for (std::uint32_t r = 0; r < 10; ++r) {
    plan.key0[r] = key[0] + r * kWeyl0;
    plan.key1[r] = key[1] + r * kWeyl1;
  }
  const std::uint32_t stream = StreamId(RandomPurpose::kQuantizationDither, context.worker);
  // Round 0 on (round, tensor, stream, n).
  const std::uint64_t p0 = std::uint64_t{kMul0} * context.round;
  const std::uint64_t p1 = std::uint64_t{kMul1} * stream;
  const std::uint32_t a0 = Hi(p1) ^ tensor ^ plan.key0[0];  // x0 after round 0
  const std::uint32_t a1 = Lo(p1);                          // x1
  plan.c0 = Hi(p0) ^ plan.key1[0];                          // x2 = n ^ c0
  const std::uint32_t a3 = Lo(p0);                          // x3
  // Round 1: x0 = a0 and x1, x3 are constants, x2 varies.
  plan.c1 = a1 ^ plan.key0[1];
  const std::uint64_t q0 = std::uint64_t{kMul0} * a0;
  const std::uint32_t b2 = Hi(q0) ^ a3 ^ plan.key1[1];  // x2 after round 1
  const std::uint32_t b3 = Lo(q0);                      // x3
  // Round 2: x2 = b2 and x3 = b3 are constants, x0 and x1 vary.
  const std::uint64_t q1 = std::uint64_t{kMul1} * b2;
  plan.c2 = Hi(q1) ^ plan.key0[2];
  const std::uint32_t c1_after2 = Lo(q1);  // x1 after round 2, a constant
  plan.c3 = b3 ^ plan.key1[2];
  // Round 3 uses the constant x1.
  plan.c4 = c1_after2 ^ plan.key0[3];
  return plan;
}

// One block, scalar: the portable path, and the definition the SIMD paths follow lane by lane.
constexpr PhiloxBlock DitherBlock(const DitherPlan& plan, std::uint32_t n) {
  // Round 0.
  const std::uint32_t x2 = n ^ plan.c0;
  // Round 1.
  const std::uint64_t p1 = std::uint64_t{kMul1} * x2;
  const std::uint32_t y0 = Hi(p1) ^ plan.c1;
  const std::uint32_t y1 = Lo(p1);
  // Round 2.
  const std::uint64_t p0 = std::uint64_t{kMul0} * y0;
  std::uint32_t x[4] = {y1 ^ plan.c2, 0, Hi(p0) ^ plan.c3, Lo(p0)};
  // Round 3 (x1 is the constant folded into c4).
  {
    const std::uint64_t m0 = std::uint64_t{kMul0} * x[0];
    const std::uint64_t m1 = std::uint64_t{kMul1} * x[2];
    const std::uint32_t next[4] = {Hi(m1) ^ plan.c4, Lo(m1), Hi(m0) ^ x[3] ^ plan.key1[3], Lo(m0)};
    std::copy(next, next + 4, x);
  }
  for (int r = 4; r < 10; ++r) {
    const std::uint64_t m0 = std::uint64_t{kMul0} * x[0];
    const std::uint64_t m1 = std::uint64_t{kMul1} * x[2];
    const std::uint32_t next[4] = {Hi(m1) ^ x[1] ^ plan.key0[r], Lo(m1),
                                   Hi(m0) ^ x[3] ^ plan.key1[r], Lo(m0)};
    std::copy(next, next + 4, x);
  }
  return {x[0], x[1], x[2], x[3]};
}

// Dither words of the kBlocksPerChunk blocks from first_block on into out[0..kChunk), in
// coordinate order.
using DitherFill = void (*)(const DitherPlan& plan, std::uint32_t first_block, std::uint32_t* out);

void FillPortable(const DitherPlan& plan, std::uint32_t first_block, std::uint32_t* out) {
  for (std::uint32_t b = 0; b < kBlocksPerChunk; ++b) {
    const PhiloxBlock block = DitherBlock(plan, first_block + b);
    std::copy(block.begin(), block.end(), out + 4 * b);
  }
}

#if EDGESGD_QSGD_X86
// The SIMD versions keep each counter word in the low half of a 64-bit lane: pmuludq multiplies
// exactly those halves into a full 64-bit product, whose high half is the Philox "hi" (after a
// shift) and whose low half is "lo" as it stands. The high halves of the lanes hold garbage that
// nothing reads (pmuludq ignores them and only low halves are stored), which saves the shuffles a
// packed 32-bit layout would need.

void FillSse2(const DitherPlan& plan, std::uint32_t first_block, std::uint32_t* out) {
  constexpr int kVecs = 4;  // 8 blocks per pass, enough independent chains to hide latency
  const __m128i m0 = _mm_set1_epi64x(kMul0);
  const __m128i m1 = _mm_set1_epi64x(kMul1);
  for (std::uint32_t pass = 0; pass < kBlocksPerChunk; pass += 2 * kVecs) {
    __m128i x0[kVecs], x1[kVecs], x2[kVecs], x3[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      const std::uint32_t n = first_block + pass + 2 * static_cast<std::uint32_t>(v);
      const __m128i x2_0 = _mm_xor_si128(_mm_set_epi64x(n + 1, n), _mm_set1_epi64x(plan.c0));
      const __m128i p1 = _mm_mul_epu32(x2_0, m1);
      const __m128i y0 = _mm_xor_si128(_mm_srli_epi64(p1, 32), _mm_set1_epi64x(plan.c1));
      const __m128i p0 = _mm_mul_epu32(y0, m0);
      x0[v] = _mm_xor_si128(p1, _mm_set1_epi64x(plan.c2));
      x2[v] = _mm_xor_si128(_mm_srli_epi64(p0, 32), _mm_set1_epi64x(plan.c3));
      x3[v] = p0;
      // Round 3 with the constant x1.
      const __m128i q0 = _mm_mul_epu32(x0[v], m0);
      const __m128i q1 = _mm_mul_epu32(x2[v], m1);
      x0[v] = _mm_xor_si128(_mm_srli_epi64(q1, 32), _mm_set1_epi64x(plan.c4));
      x1[v] = q1;
      x2[v] = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi64(q0, 32), x3[v]),
                            _mm_set1_epi64x(plan.key1[3]));
      x3[v] = q0;
    }
    for (int r = 4; r < 10; ++r) {
      const __m128i k0 = _mm_set1_epi64x(plan.key0[r]);
      const __m128i k1 = _mm_set1_epi64x(plan.key1[r]);
      for (int v = 0; v < kVecs; ++v) {
        const __m128i q0 = _mm_mul_epu32(x0[v], m0);
        const __m128i q1 = _mm_mul_epu32(x2[v], m1);
        x0[v] = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi64(q1, 32), x1[v]), k0);
        x1[v] = q1;
        x2[v] = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi64(q0, 32), x3[v]), k1);
        x3[v] = q0;
      }
    }
    for (int v = 0; v < kVecs; ++v) {
      // 32-bit elements 0 and 2 of each vector are the low halves, i.e. blocks n and n + 1.
      const __m128i w01_a = _mm_unpacklo_epi32(x0[v], x1[v]);  // n: w0 w1 . .
      const __m128i w01_b = _mm_unpackhi_epi32(x0[v], x1[v]);  // n + 1: w0 w1 . .
      const __m128i w23_a = _mm_unpacklo_epi32(x2[v], x3[v]);
      const __m128i w23_b = _mm_unpackhi_epi32(x2[v], x3[v]);
      std::uint32_t* const dst = out + 4 * (pass + 2 * static_cast<std::uint32_t>(v));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi64(w01_a, w23_a));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4), _mm_unpacklo_epi64(w01_b, w23_b));
    }
  }
}

__attribute__((target("avx2"))) void FillAvx2(const DitherPlan& plan, std::uint32_t first_block,
                                              std::uint32_t* out) {
  constexpr int kVecs = 4;  // 16 blocks per pass: 16 state registers, constants reloaded
  const __m256i m0 = _mm256_set1_epi64x(kMul0);
  const __m256i m1 = _mm256_set1_epi64x(kMul1);
  const __m256i lane = _mm256_set_epi64x(3, 2, 1, 0);
  for (std::uint32_t pass = 0; pass < kBlocksPerChunk; pass += 4 * kVecs) {
    __m256i x0[kVecs], x1[kVecs], x2[kVecs], x3[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      const std::uint32_t n = first_block + pass + 4 * static_cast<std::uint32_t>(v);
      const __m256i counter = _mm256_add_epi64(_mm256_set1_epi64x(n), lane);
      const __m256i p1 =
          _mm256_mul_epu32(_mm256_xor_si256(counter, _mm256_set1_epi64x(plan.c0)), m1);
      const __m256i y0 = _mm256_xor_si256(_mm256_srli_epi64(p1, 32), _mm256_set1_epi64x(plan.c1));
      const __m256i p0 = _mm256_mul_epu32(y0, m0);
      const __m256i w0 = _mm256_xor_si256(p1, _mm256_set1_epi64x(plan.c2));
      const __m256i w2 = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), _mm256_set1_epi64x(plan.c3));
      const __m256i q0 = _mm256_mul_epu32(w0, m0);
      const __m256i q1 = _mm256_mul_epu32(w2, m1);
      x0[v] = _mm256_xor_si256(_mm256_srli_epi64(q1, 32), _mm256_set1_epi64x(plan.c4));
      x1[v] = q1;
      x2[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q0, 32), p0),
                               _mm256_set1_epi64x(plan.key1[3]));
      x3[v] = q0;
    }
    for (int r = 4; r < 10; ++r) {
      const __m256i k0 = _mm256_set1_epi64x(plan.key0[r]);
      const __m256i k1 = _mm256_set1_epi64x(plan.key1[r]);
      for (int v = 0; v < kVecs; ++v) {
        const __m256i q0 = _mm256_mul_epu32(x0[v], m0);
        const __m256i q1 = _mm256_mul_epu32(x2[v], m1);
        x0[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q1, 32), x1[v]), k0);
        x1[v] = q1;
        x2[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q0, 32), x3[v]), k1);
        x3[v] = q0;
      }
    }
    for (int v = 0; v < kVecs; ++v) {
      // Per 64-bit lane (one block): a = (w0, w1), b = (w2, w3).
      const __m256i a = _mm256_blend_epi32(x0[v], _mm256_slli_epi64(x1[v], 32), 0xAA);
      const __m256i b = _mm256_blend_epi32(x2[v], _mm256_slli_epi64(x3[v], 32), 0xAA);
      const __m256i even = _mm256_unpacklo_epi64(a, b);  // blocks 0 | 2
      const __m256i odd = _mm256_unpackhi_epi64(a, b);   // blocks 1 | 3
      std::uint32_t* const dst = out + 4 * (pass + 4 * static_cast<std::uint32_t>(v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                          _mm256_permute2x128_si256(even, odd, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8),
                          _mm256_permute2x128_si256(even, odd, 0x31));
    }
  }
}

#define EDGESGD_QSGD_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512"

// GCC 12's AVX-512 intrinsics seed their "undefined" pass-through operand with itself, which
// -Wuninitialized reports once inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

__attribute__((target(EDGESGD_QSGD_AVX512_TARGET))) void FillAvx512(const DitherPlan& plan,
                                                                    std::uint32_t first_block,
                                                                    std::uint32_t* out) {
  constexpr int kVecs = 8;  // all 64 blocks of the chunk in one pass
  static_assert(8 * kVecs == kBlocksPerChunk);
  constexpr int kXor3 = 0x96;  // ternary-logic truth table of a ^ b ^ c
  const __m512i m0 = _mm512_set1_epi64(kMul0);
  const __m512i m1 = _mm512_set1_epi64(kMul1);
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  __m512i x0[kVecs], x1[kVecs], x2[kVecs], x3[kVecs];
  for (int v = 0; v < kVecs; ++v) {
    const std::uint32_t n = first_block + 8 * static_cast<std::uint32_t>(v);
    const __m512i counter = _mm512_add_epi64(_mm512_set1_epi64(n), lane);
    const __m512i p1 = _mm512_mul_epu32(_mm512_xor_si512(counter, _mm512_set1_epi64(plan.c0)), m1);
    const __m512i y0 = _mm512_xor_si512(_mm512_srli_epi64(p1, 32), _mm512_set1_epi64(plan.c1));
    const __m512i p0 = _mm512_mul_epu32(y0, m0);
    const __m512i w0 = _mm512_xor_si512(p1, _mm512_set1_epi64(plan.c2));
    const __m512i w2 = _mm512_xor_si512(_mm512_srli_epi64(p0, 32), _mm512_set1_epi64(plan.c3));
    const __m512i q0 = _mm512_mul_epu32(w0, m0);
    const __m512i q1 = _mm512_mul_epu32(w2, m1);
    x0[v] = _mm512_xor_si512(_mm512_srli_epi64(q1, 32), _mm512_set1_epi64(plan.c4));
    x1[v] = q1;
    x2[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(q0, 32), p0,
                                      _mm512_set1_epi64(plan.key1[3]), kXor3);
    x3[v] = q0;
  }
  for (int r = 4; r < 10; ++r) {
    const __m512i k0 = _mm512_set1_epi64(plan.key0[r]);
    const __m512i k1 = _mm512_set1_epi64(plan.key1[r]);
    for (int v = 0; v < kVecs; ++v) {
      const __m512i q0 = _mm512_mul_epu32(x0[v], m0);
      const __m512i q1 = _mm512_mul_epu32(x2[v], m1);
      x0[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(q1, 32), x1[v], k0, kXor3);
      x1[v] = q1;
      x2[v] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(q0, 32), x3[v], k1, kXor3);
      x3[v] = q0;
    }
  }
  // Pair the low halves of (x0, x1) and of (x2, x3) block by block, then interleave the pairs:
  // block b's words w0 w1 w2 w3 land at out[4b..4b+3].
  const __m512i pair_low_halves =
      _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
  const __m512i blocks_0_to_3 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i blocks_4_to_7 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (int v = 0; v < kVecs; ++v) {
    const __m512i w01 = _mm512_permutex2var_epi32(x0[v], pair_low_halves, x1[v]);
    const __m512i w23 = _mm512_permutex2var_epi32(x2[v], pair_low_halves, x3[v]);
    std::uint32_t* const dst = out + 32 * v;
    _mm512_storeu_si512(dst, _mm512_permutex2var_epi64(w01, blocks_0_to_3, w23));
    _mm512_storeu_si512(dst + 16, _mm512_permutex2var_epi64(w01, blocks_4_to_7, w23));
  }
}
#pragma GCC diagnostic pop
#endif  // EDGESGD_QSGD_X86

// Bucket norms. internal::SumSquares keeps eight lane sums, each a serial chain of adds, so one
// bucket at a time is bound by add latency. Four buckets at once run four independent chains in
// the same lane order, which gives the same bits four times as fast. The test
// QsgdEncodeTest.NormsMatchSumSquaresForEveryBucketSize holds this copy of the order to
// internal::SumSquares.
constexpr std::size_t kNormBatch = 4;
constexpr std::size_t kNormLanes = internal::kReduceLanes;
static_assert(kNormLanes == 8, "the combining tree below is written for 8 lanes");
// Batch only buckets that still sit in L2 when their turn to be quantised comes.
constexpr std::size_t kMaxBatchedBucket = 4096;

// Sums of squares of the kNormBatch consecutive buckets of `bucket` floats at x into sums[].
EDGESGD_QSGD_INLINE void SumSquaresBatchBody(const float* x, std::size_t bucket, float* sums) {
  float lanes[kNormBatch][kNormLanes] = {};
  const std::size_t full = bucket - bucket % kNormLanes;
#if defined(__GNUC__)
  // One 8-float vector per bucket spells out the intended code: the loop vectoriser would rather
  // vectorise across i and reshuffle. Element-wise IEEE operations, so still the same bits.
  using Lanes = float __attribute__((vector_size(4 * kNormLanes)));
  Lanes acc[kNormBatch] = {};
  for (std::size_t i = 0; i < full; i += kNormLanes) {
    for (std::size_t b = 0; b < kNormBatch; ++b) {
      Lanes v;
      std::memcpy(&v, x + b * bucket + i, sizeof(v));
      acc[b] += v * v;
    }
  }
  std::memcpy(lanes, acc, sizeof(lanes));
#else
  for (std::size_t i = 0; i < full; i += kNormLanes) {
    for (std::size_t b = 0; b < kNormBatch; ++b) {
      for (std::size_t lane = 0; lane < kNormLanes; ++lane) {
        const float v = x[b * bucket + i + lane];
        lanes[b][lane] += v * v;
      }
    }
  }
#endif
  for (std::size_t b = 0; b < kNormBatch; ++b) {
    for (std::size_t i = full; i < bucket; ++i) {
      const float v = x[b * bucket + i];
      lanes[b][i - full] += v * v;
    }
    const float* l = lanes[b];
    sums[b] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  }
}

using SumSquaresBatchFunction = void (*)(const float* x, std::size_t bucket, float* sums);
using SumSquaresFunction = float (*)(std::span<const float> x);

void SumSquaresBatchBaseline(const float* x, std::size_t bucket, float* sums) {
  SumSquaresBatchBody(x, bucket, sums);
}
float SumSquaresBaseline(std::span<const float> x) { return internal::SumSquares(x); }

#if EDGESGD_QSGD_X86
// Eight lanes are one AVX2 register. Compiled for AVX-512 instead, GCC 12 spreads them over
// 16-wide vectors and scalar shuffles at several times the cost, so the AVX-512 path uses this.
__attribute__((target("avx2"), noinline)) void SumSquaresBatchAvx2(const float* x,
                                                                   std::size_t bucket,
                                                                   float* sums) {
  SumSquaresBatchBody(x, bucket, sums);
}
__attribute__((target("avx2"), noinline)) float SumSquaresAvx2(std::span<const float> x) {
  return internal::SumSquares(x);
}
#endif

// What every kernel needs to know about the configuration, derived once per call.
struct QsgdShape {
  std::uint32_t levels;
  std::uint32_t bucket;
  std::uint32_t width;       // bits per coordinate
  std::uint32_t sign_shift;  // width - 1: the sign bit's position in a field
  float levels_f;
};

QsgdShape MakeShape(const CodecParams& params) {
  const std::uint32_t width = QsgdBitsPerCoordinate(params.qsgd_levels);
  return {params.qsgd_levels, params.qsgd_bucket, width, width - 1,
          static_cast<float>(params.qsgd_levels)};
}

// Quantises coordinates x[0..count) that share one bucket factor. On entry fields[j] holds the
// coordinate's dither word, on exit its field. Written as one branch-free loop over plain arrays
// so that it vectorises; see the arithmetic in qsgd.h.
EDGESGD_QSGD_INLINE void QuantizeRun(const float* x, std::size_t count, float factor,
                                     float levels_f, std::uint32_t sign_shift,
                                     std::uint32_t* fields) {
  // The sign bit moved straight to its place in the field, then masked: with AVX-512 the mask
  // and the merge with the level become one ternary-logic instruction.
  const std::uint32_t sign_bit = std::uint32_t{1} << sign_shift;
  const std::uint32_t sign_move = 31 - sign_shift;
  for (std::size_t j = 0; j < count; ++j) {
    const auto bits = std::bit_cast<std::uint32_t>(x[j]);
    const float magnitude = std::bit_cast<float>(bits & 0x7FFFFFFFu);
    const float ratio = std::min(magnitude * factor, levels_f);
    const auto floor_level = static_cast<std::int32_t>(ratio);
    const float fraction = ratio - static_cast<float>(floor_level);
    const auto level = static_cast<std::uint32_t>(
        UniformFloat(fields[j]) < fraction ? floor_level + 1 : floor_level);
    fields[j] = level | ((bits >> sign_move) & sign_bit);
  }
}

// How far ahead of the chunk being quantised the encoder asks for input, in floats. The input is
// read once, straight from DRAM; fetching it 32 KiB early (a few microseconds of work, well
// inside L2) overlaps that latency with the dither arithmetic instead of stalling on it.
constexpr std::size_t kPrefetchDistance = 8192;

// Hints the cache lines of x[at, at + kChunk) into cache; a no-op past the end.
EDGESGD_QSGD_INLINE void Prefetch(std::span<const float> x, std::size_t at) {
#if defined(__GNUC__)
  constexpr std::size_t kLineFloats = 16;  // 64-byte lines
  for (std::size_t i = at; i < at + kChunk && i < x.size(); i += kLineFloats) {
    __builtin_prefetch(x.data() + i);
  }
#else
  (void)x;
  (void)at;
#endif
}

// Computes the norms of the buckets from `first` on (as many as one batch covers) into
// norms[first..]; returns how many, or 0 when one is not finite.
template <SumSquaresBatchFunction kBatch, SumSquaresFunction kSingle>
EDGESGD_QSGD_INLINE std::size_t ComputeNorms(const QsgdShape& shape, std::span<const float> x,
                                             std::size_t first, std::span<float> norms) {
  const std::size_t begin = first * shape.bucket;
  float sums[kNormBatch];
  std::size_t count = 1;
  if (shape.bucket <= kMaxBatchedBucket && x.size() - begin >= kNormBatch * shape.bucket) {
    kBatch(x.data() + begin, shape.bucket, sums);
    count = kNormBatch;
  } else {
    sums[0] = kSingle(x.subspan(begin, std::min<std::size_t>(shape.bucket, x.size() - begin)));
  }
  bool finite = true;
  for (std::size_t b = 0; b < count; ++b) {
    const float norm = std::sqrt(sums[b]);
    finite &= (norm - norm) == 0.0f;  // false for NaN and infinities
    norms[first + b] = norm;
  }
  return finite ? count : 0;
}

// Encodes one tensor: x (size floats) into its words and bucket norms. Returns false when a
// bucket's norm is not finite.
template <DitherFill kFill, SumSquaresBatchFunction kBatch, SumSquaresFunction kSingle>
EDGESGD_QSGD_INLINE bool EncodeTensor(const QsgdShape& shape, const DitherPlan& plan,
                                      std::span<const float> x, std::span<std::uint32_t> words,
                                      std::span<float> norms) {
  alignas(64) std::uint32_t fields[kChunk];
  float factor = 0.0f;  // of the current bucket, which ends at bucket_end
  std::size_t bucket_end = 0;
  std::size_t norms_ready = 0;  // norms[0..norms_ready) are computed
  for (std::size_t start = 0; start < x.size(); start += kChunk) {
    const std::size_t count = std::min(kChunk, x.size() - start);
    Prefetch(x, start + kPrefetchDistance);
    kFill(plan, static_cast<std::uint32_t>(start / 4), fields);
    const std::size_t end = start + count;
    for (std::size_t i = start; i < end;) {
      if (i == bucket_end) {
        const std::size_t bucket_index = i / shape.bucket;
        if (bucket_index == norms_ready) {
          const std::size_t computed = ComputeNorms<kBatch, kSingle>(shape, x, bucket_index, norms);
          if (computed == 0) return false;
          norms_ready += computed;
        }
        const float norm = norms[bucket_index];
        factor = norm > 0.0f ? shape.levels_f / norm : 0.0f;
        bucket_end = i + std::min<std::size_t>(shape.bucket, x.size() - i);
      }
      const std::size_t run_end = std::min(end, bucket_end);
      QuantizeRun(x.data() + i, run_end - i, factor, shape.levels_f, shape.sign_shift,
                  fields + (i - start));
      i = run_end;
    }
    for (std::size_t group = 0; group < count; group += kGroup) {
      const std::span<std::uint32_t, kGroup> group_fields(fields + group, kGroup);
      const std::span<std::uint32_t> out = words.subspan((start + group) / 32 * shape.width);
      const std::size_t group_count = std::min(kGroup, count - group);
      if (group_count == kGroup) {
        internal::PackFieldGroup(group_fields, shape.width, out);
      } else {
        // The tensor's last group: zero fields pad it, and only the words that hold real fields
        // are written, so the last word's unused bits come out zero.
        std::fill(group_fields.begin() + static_cast<std::ptrdiff_t>(group_count),
                  group_fields.end(), 0u);
        std::uint32_t group_words[internal::kMaxFieldWidth * kGroup / 32];
        internal::PackFieldGroup(group_fields, shape.width, group_words);
        std::copy(group_words, group_words + internal::PackedWordCount(group_count, shape.width),
                  out.begin());
      }
    }
  }
  return true;
}

template <DitherFill kFill, SumSquaresBatchFunction kBatch, SumSquaresFunction kSingle>
EDGESGD_QSGD_INLINE bool EncodeAll(const QsgdShape& shape, const TensorLayout& layout,
                                   const CodecContext& context, std::span<const float> input,
                                   const PayloadSpans& out) {
  std::size_t word_offset = 0;
  std::size_t norm_offset = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::size_t words = QsgdCodec::WordsFor(size, shape.levels);
    const std::size_t buckets = QsgdCodec::BucketsFor(size, shape.bucket);
    const DitherPlan plan = MakeDitherPlan(context, static_cast<std::uint32_t>(t));
    if (!EncodeTensor<kFill, kBatch, kSingle>(shape, plan, input.subspan(layout.offset(t), size),
                                              out.words.subspan(word_offset, words),
                                              out.scales.subspan(norm_offset, buckets))) {
      return false;
    }
    word_offset += words;
    norm_offset += buckets;
  }
  return true;
}

// Loads the fields of group `start` (count of them) of a tensor's words into `fields`.
EDGESGD_QSGD_INLINE void LoadChunk(std::span<const std::uint32_t> words, std::size_t start,
                                   std::size_t count, std::uint32_t width, std::uint32_t* fields) {
  const std::span<const std::uint32_t> in = words.subspan(start / 32 * width);
  if (count == kGroup) {
    internal::UnpackFieldGroup(in, width, std::span<std::uint32_t, kGroup>(fields, kGroup));
  } else {
    std::uint32_t group_words[internal::kMaxFieldWidth * kGroup / 32] = {};
    std::copy(in.begin(), in.end(), group_words);
    internal::UnpackFieldGroup(group_words, width,
                               std::span<std::uint32_t, kGroup>(fields, kGroup));
  }
}

// True when every level of the tensor's fields is <= s. Only called when s + 1 is not a power of
// two; otherwise every level field value is a valid level.
EDGESGD_QSGD_INLINE bool LevelsInRange(const QsgdShape& shape, std::size_t size,
                                       std::span<const std::uint32_t> words) {
  alignas(64) std::uint32_t fields[kGroup];
  const std::uint32_t level_mask = internal::FieldMask(shape.sign_shift);
  for (std::size_t start = 0; start < size; start += kGroup) {
    const std::size_t count = std::min(kGroup, size - start);
    LoadChunk(words, start, count, shape.width, fields);
    std::uint32_t too_big = 0;
    for (std::size_t j = 0; j < count; ++j) {
      too_big |= (fields[j] & level_mask) > shape.levels ? 1u : 0u;
    }
    if (too_big != 0) return false;
  }
  return true;
}

// acc[j] += +-(scale * level) for fields[0..count) sharing one bucket. Branch-free for the
// vectoriser: the sign is applied by flipping the product's sign bit, which is exact.
EDGESGD_QSGD_INLINE void DecodeRun(const std::uint32_t* fields, std::size_t count, float scale,
                                   std::uint32_t sign_shift, float* acc) {
  const std::uint32_t level_mask = internal::FieldMask(sign_shift);
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint32_t field = fields[j];
    const float magnitude =
        scale * static_cast<float>(static_cast<std::int32_t>(field & level_mask));
    const std::uint32_t sign = (field >> sign_shift) << 31;
    acc[j] += std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) ^ sign);
  }
}

EDGESGD_QSGD_INLINE void DecodeTensor(const QsgdShape& shape, std::span<const std::uint32_t> words,
                                      std::span<const float> norms, float weight,
                                      std::span<float> acc) {
  alignas(64) std::uint32_t fields[kGroup];
  float scale = 0.0f;
  std::size_t bucket_end = 0;
  for (std::size_t start = 0; start < acc.size(); start += kGroup) {
    const std::size_t count = std::min(kGroup, acc.size() - start);
    LoadChunk(words, start, count, shape.width, fields);
    const std::size_t end = start + count;
    for (std::size_t i = start; i < end;) {
      if (i == bucket_end) {
        scale = weight * (norms[i / shape.bucket] / shape.levels_f);
        bucket_end = i + std::min<std::size_t>(shape.bucket, acc.size() - i);
      }
      const std::size_t run_end = std::min(end, bucket_end);
      DecodeRun(fields + (i - start), run_end - i, scale, shape.sign_shift, acc.data() + i);
      i = run_end;
    }
  }
}

// Verifies the whole payload (sizes already checked), then decodes it; false means kDataLoss and
// the accumulator untouched.
EDGESGD_QSGD_INLINE bool DecodeAll(const QsgdShape& shape, const TensorLayout& layout,
                                   const PayloadView& payload, float weight,
                                   std::span<float> accumulator) {
  if (!internal::AllFinite(payload.scales)) return false;
  bool non_negative = true;
  for (const float norm : payload.scales) non_negative &= norm >= 0.0f;
  if (!non_negative) return false;
  // With s = 2^(width-1) - 1 every level field is a valid level; otherwise scan them.
  const bool check_levels = internal::FieldMask(shape.sign_shift) != shape.levels;
  std::size_t word_offset = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::size_t words = QsgdCodec::WordsFor(size, shape.levels);
    const std::span<const std::uint32_t> tensor_words = payload.words.subspan(word_offset, words);
    const auto used_bits = static_cast<std::uint32_t>(size % 32 * shape.width % 32);
    if (used_bits != 0 && (tensor_words.back() >> used_bits) != 0) return false;
    if (check_levels && !LevelsInRange(shape, size, tensor_words)) return false;
    word_offset += words;
  }
  word_offset = 0;
  std::size_t norm_offset = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::size_t words = QsgdCodec::WordsFor(size, shape.levels);
    const std::size_t buckets = QsgdCodec::BucketsFor(size, shape.bucket);
    DecodeTensor(shape, payload.words.subspan(word_offset, words),
                 payload.scales.subspan(norm_offset, buckets), weight,
                 accumulator.subspan(layout.offset(t), size));
    word_offset += words;
    norm_offset += buckets;
  }
  return true;
}

// One entry point per instruction set, each compiling the shared bodies for its target.
bool EncodePortable(const QsgdShape& shape, const TensorLayout& layout, const CodecContext& context,
                    std::span<const float> input, const PayloadSpans& out) {
  return EncodeAll<FillPortable, SumSquaresBatchBaseline, SumSquaresBaseline>(shape, layout,
                                                                              context, input, out);
}
bool DecodePortable(const QsgdShape& shape, const TensorLayout& layout, const PayloadView& payload,
                    float weight, std::span<float> accumulator) {
  return DecodeAll(shape, layout, payload, weight, accumulator);
}

#if EDGESGD_QSGD_X86
bool EncodeSse2(const QsgdShape& shape, const TensorLayout& layout, const CodecContext& context,
                std::span<const float> input, const PayloadSpans& out) {
  return EncodeAll<FillSse2, SumSquaresBatchBaseline, SumSquaresBaseline>(shape, layout, context,
                                                                          input, out);
}
__attribute__((target("avx2"))) bool EncodeAvx2(const QsgdShape& shape, const TensorLayout& layout,
                                                const CodecContext& context,
                                                std::span<const float> input,
                                                const PayloadSpans& out) {
  return EncodeAll<FillAvx2, SumSquaresBatchAvx2, SumSquaresAvx2>(shape, layout, context, input,
                                                                  out);
}
__attribute__((target("avx2"))) bool DecodeAvx2(const QsgdShape& shape, const TensorLayout& layout,
                                                const PayloadView& payload, float weight,
                                                std::span<float> accumulator) {
  return DecodeAll(shape, layout, payload, weight, accumulator);
}
__attribute__((target(EDGESGD_QSGD_AVX512_TARGET))) bool EncodeAvx512(const QsgdShape& shape,
                                                                      const TensorLayout& layout,
                                                                      const CodecContext& context,
                                                                      std::span<const float> input,
                                                                      const PayloadSpans& out) {
  return EncodeAll<FillAvx512, SumSquaresBatchAvx2, SumSquaresAvx2>(shape, layout, context, input,
                                                                    out);
}
__attribute__((target(EDGESGD_QSGD_AVX512_TARGET))) bool DecodeAvx512(
    const QsgdShape& shape, const TensorLayout& layout, const PayloadView& payload, float weight,
    std::span<float> accumulator) {
  return DecodeAll(shape, layout, payload, weight, accumulator);
}
#endif  // EDGESGD_QSGD_X86

QsgdKernel BestKernel() {
#if EDGESGD_QSGD_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    return QsgdKernel::kAvx512;
  }
  if (__builtin_cpu_supports("avx2")) return QsgdKernel::kAvx2;
  return QsgdKernel::kSse2;
#else
  return QsgdKernel::kPortable;
#endif
}

// kAuto resolved to a concrete kernel, or kAuto when `kernel` cannot run here.
QsgdKernel Resolve(QsgdKernel kernel) {
  if (kernel == QsgdKernel::kAuto) return BestKernel();
  if (kernel == QsgdKernel::kPortable) return kernel;
#if EDGESGD_QSGD_X86
  if (kernel == QsgdKernel::kSse2) return kernel;
  const QsgdKernel best = BestKernel();
  if (kernel == QsgdKernel::kAvx2 && best != QsgdKernel::kSse2) return kernel;
  if (kernel == QsgdKernel::kAvx512 && best == QsgdKernel::kAvx512) return kernel;
#endif
  return QsgdKernel::kAuto;
}

}  // namespace

namespace internal {

bool QsgdKernelSupported(QsgdKernel kernel) {
  return kernel == QsgdKernel::kAuto || Resolve(kernel) != QsgdKernel::kAuto;
}

bool QsgdDitherWords(QsgdKernel kernel, const CodecContext& context, std::uint32_t tensor,
                     std::uint32_t first_block, std::span<std::uint32_t, kQsgdDitherWords> out) {
  const DitherPlan plan = MakeDitherPlan(context, tensor);
  switch (Resolve(kernel)) {
    case QsgdKernel::kPortable:
      FillPortable(plan, first_block, out.data());
      return true;
#if EDGESGD_QSGD_X86
    case QsgdKernel::kSse2:
      FillSse2(plan, first_block, out.data());
      return true;
    case QsgdKernel::kAvx2:
      FillAvx2(plan, first_block, out.data());
      return true;
    case QsgdKernel::kAvx512:
      FillAvx512(plan, first_block, out.data());
      return true;
#endif
    default:
      return false;
  }
}

Status QsgdEncodeWith(QsgdKernel kernel, const CodecParams& params, const TensorLayout& layout,
                      const CodecContext& context, std::span<const float> input,
                      const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape payload_shape, QsgdCodec::Shape(params, layout));
  EDGESGD_TRY(internal::CheckEncodeArgs(layout, input, out, payload_shape, scratch, 0));
  const QsgdShape shape = MakeShape(params);
  bool ok = false;
  switch (Resolve(kernel)) {
    case QsgdKernel::kPortable:
      ok = EncodePortable(shape, layout, context, input, out);
      break;
#if EDGESGD_QSGD_X86
    case QsgdKernel::kSse2:
      ok = EncodeSse2(shape, layout, context, input, out);
      break;
    case QsgdKernel::kAvx2:
      ok = EncodeAvx2(shape, layout, context, input, out);
      break;
    case QsgdKernel::kAvx512:
      ok = EncodeAvx512(shape, layout, context, input, out);
      break;
#endif
    default:
      return Status::FailedPrecondition();
  }
  return ok ? Status::Ok() : Status::InvalidArgument();
}

Status QsgdDecodeAddWith(QsgdKernel kernel, const CodecParams& params, const TensorLayout& layout,
                         const CodecContext&, const PayloadView& payload, float weight,
                         std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape payload_shape, QsgdCodec::Shape(params, layout));
  EDGESGD_TRY(internal::CheckDecodeArgs(layout, payload, payload_shape, accumulator, scratch, 0));
  const QsgdShape shape = MakeShape(params);
  bool ok = false;
  switch (Resolve(kernel)) {
    case QsgdKernel::kPortable:
      ok = DecodePortable(shape, layout, payload, weight, accumulator);
      break;
#if EDGESGD_QSGD_X86
    case QsgdKernel::kSse2:
      // Decoding has no dither; the baseline build of the portable body is the SSE2 path.
      ok = DecodePortable(shape, layout, payload, weight, accumulator);
      break;
    case QsgdKernel::kAvx2:
      ok = DecodeAvx2(shape, layout, payload, weight, accumulator);
      break;
    case QsgdKernel::kAvx512:
      ok = DecodeAvx512(shape, layout, payload, weight, accumulator);
      break;
#endif
    default:
      return Status::FailedPrecondition();
  }
  return ok ? Status::Ok() : Status::DataLoss();
}

}  // namespace internal

Status QsgdCodec::Encode(const CodecParams& params, const TensorLayout& layout,
                         const CodecContext& context, std::span<const float> input,
                         const PayloadSpans& out, std::span<std::byte> scratch) {
  return internal::QsgdEncodeWith(QsgdKernel::kAuto, params, layout, context, input, out, scratch);
}

Status QsgdCodec::DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                            const CodecContext& context, const PayloadView& payload, float weight,
                            std::span<float> accumulator, std::span<std::byte> scratch) {
  return internal::QsgdDecodeAddWith(QsgdKernel::kAuto, params, layout, context, payload, weight,
                                     accumulator, scratch);
}

}  // namespace edgesgd
