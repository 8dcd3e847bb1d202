#include "edgesgd/core/internal/philox_batch.h"

#include <algorithm>

#include "edgesgd/core/internal/simd_target.h"

// On x86-64 Philox has hand-vectorised SSE2 (baseline), AVX2 and AVX-512 versions chosen at run
// time. Everywhere else (ARM boards, Cortex-M) only the portable loop exists.
#if EDGESGD_X86_SIMD
#include <immintrin.h>
#endif

namespace edgesgd::internal {

void PhiloxFillPortable(const PhiloxPlan& plan, std::uint32_t first_block,
                        std::span<std::uint32_t> out) {
  const std::size_t blocks = out.size() / 4;
  for (std::size_t b = 0; b < blocks; ++b) {
    const PhiloxBlock block = PhiloxPlanBlock(plan, first_block + static_cast<std::uint32_t>(b));
    std::copy(block.begin(), block.end(), out.begin() + static_cast<std::ptrdiff_t>(4 * b));
  }
}

#if EDGESGD_X86_SIMD
namespace {

// The blocks a SIMD pass left over (fewer than one pass), one at a time.
void FillTail(const PhiloxPlan& plan, std::uint32_t first_block, std::size_t done,
              std::span<std::uint32_t> out) {
  PhiloxFillPortable(plan, first_block + static_cast<std::uint32_t>(done), out.subspan(4 * done));
}

}  // namespace

// The SIMD versions keep each counter word in the low half of a 64-bit lane: pmuludq multiplies
// exactly those halves into a full 64-bit product, whose high half is the Philox "hi" (after a
// shift) and whose low half is "lo" as it stands. The high halves of the lanes hold garbage that
// nothing reads (pmuludq ignores them and only low halves are stored), which saves the shuffles a
// packed 32-bit layout would need.

void PhiloxFillSse2(const PhiloxPlan& plan, std::uint32_t first_block,
                    std::span<std::uint32_t> out) {
  constexpr int kVecs = 4;  // 8 blocks per pass, enough independent chains to hide latency
  constexpr std::size_t kPassBlocks = 2 * kVecs;
  const std::size_t blocks = out.size() / 4;
  const std::size_t full = blocks - blocks % kPassBlocks;
  const __m128i m0 = _mm_set1_epi64x(kPhiloxMul0);
  const __m128i m1 = _mm_set1_epi64x(kPhiloxMul1);
  for (std::size_t pass = 0; pass < full; pass += kPassBlocks) {
    __m128i x0[kVecs], x1[kVecs], x2[kVecs], x3[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      const std::uint32_t n =
          first_block + static_cast<std::uint32_t>(pass) + 2 * static_cast<std::uint32_t>(v);
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
      std::uint32_t* const dst = out.data() + 4 * (pass + 2 * static_cast<std::size_t>(v));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi64(w01_a, w23_a));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4), _mm_unpacklo_epi64(w01_b, w23_b));
    }
  }
  FillTail(plan, first_block, full, out);
}

__attribute__((target("avx2"))) void PhiloxFillAvx2(const PhiloxPlan& plan,
                                                    std::uint32_t first_block,
                                                    std::span<std::uint32_t> out) {
  constexpr int kVecs = 4;  // 16 blocks per pass: 16 state registers, constants reloaded
  constexpr std::size_t kPassBlocks = 4 * kVecs;
  const std::size_t blocks = out.size() / 4;
  const std::size_t full = blocks - blocks % kPassBlocks;
  const __m256i m0 = _mm256_set1_epi64x(kPhiloxMul0);
  const __m256i m1 = _mm256_set1_epi64x(kPhiloxMul1);
  const __m256i lane = _mm256_set_epi64x(3, 2, 1, 0);
  for (std::size_t pass = 0; pass < full; pass += kPassBlocks) {
    __m256i x0[kVecs], x1[kVecs], x2[kVecs], x3[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      const std::uint32_t n =
          first_block + static_cast<std::uint32_t>(pass) + 4 * static_cast<std::uint32_t>(v);
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
      std::uint32_t* const dst = out.data() + 4 * (pass + 4 * static_cast<std::size_t>(v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                          _mm256_permute2x128_si256(even, odd, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8),
                          _mm256_permute2x128_si256(even, odd, 0x31));
    }
  }
  FillTail(plan, first_block, full, out);
}

// GCC 12's AVX-512 intrinsics seed their "undefined" pass-through operand with itself, which
// -Wuninitialized reports once inlined (GCC bug 105593, fixed in GCC 13). Clang's do not.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

__attribute__((target(EDGESGD_AVX512_TARGET))) void PhiloxFillAvx512(const PhiloxPlan& plan,
                                                                     std::uint32_t first_block,
                                                                     std::span<std::uint32_t> out) {
  constexpr int kVecs = 8;  // eight independent chains hide the multiplier latency
  constexpr std::size_t kPassBlocks = 8 * kVecs;
  static_assert(kPassBlocks == kPhiloxBatchBlocks);
  constexpr int kXor3 = 0x96;  // ternary-logic truth table of a ^ b ^ c
  const std::size_t blocks = out.size() / 4;
  const std::size_t full = blocks - blocks % kPassBlocks;
  const __m512i m0 = _mm512_set1_epi64(kPhiloxMul0);
  const __m512i m1 = _mm512_set1_epi64(kPhiloxMul1);
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  // Pair the low halves of (x0, x1) and of (x2, x3) block by block, then interleave the pairs:
  // block b's words w0 w1 w2 w3 land at out[4b..4b+3].
  const __m512i pair_low_halves =
      _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
  const __m512i blocks_0_to_3 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i blocks_4_to_7 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (std::size_t pass = 0; pass < full; pass += kPassBlocks) {
    __m512i x0[kVecs], x1[kVecs], x2[kVecs], x3[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      const std::uint32_t n =
          first_block + static_cast<std::uint32_t>(pass) + 8 * static_cast<std::uint32_t>(v);
      const __m512i counter = _mm512_add_epi64(_mm512_set1_epi64(n), lane);
      const __m512i p1 =
          _mm512_mul_epu32(_mm512_xor_si512(counter, _mm512_set1_epi64(plan.c0)), m1);
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
    for (int v = 0; v < kVecs; ++v) {
      const __m512i w01 = _mm512_permutex2var_epi32(x0[v], pair_low_halves, x1[v]);
      const __m512i w23 = _mm512_permutex2var_epi32(x2[v], pair_low_halves, x3[v]);
      std::uint32_t* const dst = out.data() + 4 * (pass + 8 * static_cast<std::size_t>(v));
      _mm512_storeu_si512(dst, _mm512_permutex2var_epi64(w01, blocks_0_to_3, w23));
      _mm512_storeu_si512(dst + 16, _mm512_permutex2var_epi64(w01, blocks_4_to_7, w23));
    }
  }
  FillTail(plan, first_block, full, out);
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // EDGESGD_X86_SIMD

PhiloxIsa BestPhiloxIsa() {
#if EDGESGD_X86_SIMD
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    return PhiloxIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2")) return PhiloxIsa::kAvx2;
  return PhiloxIsa::kSse2;
#else
  return PhiloxIsa::kPortable;
#endif
}

bool PhiloxIsaSupported(PhiloxIsa isa) {
  if (isa == PhiloxIsa::kPortable) return true;
#if EDGESGD_X86_SIMD
  const PhiloxIsa best = BestPhiloxIsa();
  switch (isa) {
    case PhiloxIsa::kSse2:
      return true;
    case PhiloxIsa::kAvx2:
      return best != PhiloxIsa::kSse2;
    case PhiloxIsa::kAvx512:
      return best == PhiloxIsa::kAvx512;
    default:
      return false;
  }
#else
  return false;
#endif
}

PhiloxFillFunction PhiloxFillFor(PhiloxIsa isa) {
  if (!PhiloxIsaSupported(isa)) return nullptr;
  switch (isa) {
#if EDGESGD_X86_SIMD
    case PhiloxIsa::kSse2:
      return PhiloxFillSse2;
    case PhiloxIsa::kAvx2:
      return PhiloxFillAvx2;
    case PhiloxIsa::kAvx512:
      return PhiloxFillAvx512;
#endif
    default:
      return PhiloxFillPortable;
  }
}

}  // namespace edgesgd::internal
