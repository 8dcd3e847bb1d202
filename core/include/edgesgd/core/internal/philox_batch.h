#pragma once

// Many consecutive Philox4x32-10 blocks of one stream at once. rand_k's index draws and qsgd's
// dither both read long runs of counters (round, tensor, stream, n) for n = first, first + 1, ...
// and are bound by Philox's multiplies, so both use this one generator: the work that does not
// depend on n is done once per stream (PhiloxPlan), and on x86-64 the blocks are computed
// side by side with SSE2 (baseline), AVX2 or AVX-512 (chosen at run time). Every path gives the
// same words as Philox4x32_10 in random.h; tests/core/philox_batch_test.cc holds them to it.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/random.h"

namespace edgesgd::internal {

inline constexpr std::uint32_t kPhiloxMul0 = 0xD2511F53u;
inline constexpr std::uint32_t kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxWeyl0 = 0x9E3779B9u;
inline constexpr std::uint32_t kPhiloxWeyl1 = 0xBB67AE85u;

// Philox4x32-10 over the counters (round, tensor, stream, n) of one stream, with what does not
// depend on the block index n computed once. Only the last counter word varies, so round 0
// reduces to one xor, rounds 1 and 2 to one multiply each (the other product is a constant), and
// from round 3 on the rounds are the generic ones: 16 multiplies per block instead of 20.
// Constants are named after the round they enter (see PhiloxPlanBlock).
struct PhiloxPlan {
  std::uint32_t c0;  // round 0: x2 = n ^ c0
  std::uint32_t c1;  // round 1: x0 = hi(M1 * x2) ^ c1
  std::uint32_t c2;  // round 2: x0 = x1 ^ c2
  std::uint32_t c3;  // round 2: x2 = hi(M0 * x0) ^ c3
  std::uint32_t c4;  // round 3: x0 = hi(M1 * x2) ^ c4
  std::uint32_t key0[10];
  std::uint32_t key1[10];
};

constexpr std::uint32_t PhiloxHi(std::uint64_t product) {
  return static_cast<std::uint32_t>(product >> 32);
}
constexpr std::uint32_t PhiloxLo(std::uint64_t product) {
  return static_cast<std::uint32_t>(product);
}

// The plan of the stream CounterRng(seed, round, tensor, stream) reads.
constexpr PhiloxPlan MakePhiloxPlan(std::uint64_t seed, std::uint32_t round, std::uint32_t tensor,
                                    std::uint32_t stream) {
  const PhiloxKey key = KeyFromSeed(seed);
  PhiloxPlan plan{};
  for (std::uint32_t r = 0; r < 10; ++r) {
    plan.key0[r] = key[0] + r * kPhiloxWeyl0;
    plan.key1[r] = key[1] + r * kPhiloxWeyl1;
  }
  // Round 0 on (round, tensor, stream, n).
  const std::uint64_t p0 = std::uint64_t{kPhiloxMul0} * round;
  const std::uint64_t p1 = std::uint64_t{kPhiloxMul1} * stream;
  const std::uint32_t a0 = PhiloxHi(p1) ^ tensor ^ plan.key0[0];  // x0 after round 0
  const std::uint32_t a1 = PhiloxLo(p1);                          // x1
  plan.c0 = PhiloxHi(p0) ^ plan.key1[0];                          // x2 = n ^ c0
  const std::uint32_t a3 = PhiloxLo(p0);                          // x3
  // Round 1: x0 = a0 and x1, x3 are constants, x2 varies.
  plan.c1 = a1 ^ plan.key0[1];
  const std::uint64_t q0 = std::uint64_t{kPhiloxMul0} * a0;
  const std::uint32_t b2 = PhiloxHi(q0) ^ a3 ^ plan.key1[1];  // x2 after round 1
  const std::uint32_t b3 = PhiloxLo(q0);                      // x3
  // Round 2: x2 = b2 and x3 = b3 are constants, x0 and x1 vary.
  const std::uint64_t q1 = std::uint64_t{kPhiloxMul1} * b2;
  plan.c2 = PhiloxHi(q1) ^ plan.key0[2];
  const std::uint32_t x1_after2 = PhiloxLo(q1);  // x1 after round 2, a constant
  plan.c3 = b3 ^ plan.key1[2];
  // Round 3 uses the constant x1.
  plan.c4 = x1_after2 ^ plan.key0[3];
  return plan;
}

// Block n of the plan's stream, scalar: the portable path, and the definition the SIMD paths
// follow lane by lane.
constexpr PhiloxBlock PhiloxPlanBlock(const PhiloxPlan& plan, std::uint32_t n) {
  // Round 0.
  const std::uint32_t x2 = n ^ plan.c0;
  // Round 1.
  const std::uint64_t p1 = std::uint64_t{kPhiloxMul1} * x2;
  const std::uint32_t y0 = PhiloxHi(p1) ^ plan.c1;
  const std::uint32_t y1 = PhiloxLo(p1);
  // Round 2.
  const std::uint64_t p0 = std::uint64_t{kPhiloxMul0} * y0;
  PhiloxBlock x = {y1 ^ plan.c2, 0, PhiloxHi(p0) ^ plan.c3, PhiloxLo(p0)};
  // Round 3 (x1 is the constant folded into c4).
  {
    const std::uint64_t m0 = std::uint64_t{kPhiloxMul0} * x[0];
    const std::uint64_t m1 = std::uint64_t{kPhiloxMul1} * x[2];
    x = {PhiloxHi(m1) ^ plan.c4, PhiloxLo(m1), PhiloxHi(m0) ^ x[3] ^ plan.key1[3], PhiloxLo(m0)};
  }
  for (int r = 4; r < 10; ++r) {
    const std::uint64_t m0 = std::uint64_t{kPhiloxMul0} * x[0];
    const std::uint64_t m1 = std::uint64_t{kPhiloxMul1} * x[2];
    x = {PhiloxHi(m1) ^ x[1] ^ plan.key0[r], PhiloxLo(m1), PhiloxHi(m0) ^ x[3] ^ plan.key1[r],
         PhiloxLo(m0)};
  }
  return x;
}

// The instruction sets a batch can be computed with. kPortable exists everywhere; the others on
// x86-64 only, and kAvx2 / kAvx512 only where the CPU has them.
enum class PhiloxIsa : std::uint8_t { kPortable, kSse2, kAvx2, kAvx512 };

// The fastest instruction set this CPU supports (kPortable off x86-64). Does not allocate.
PhiloxIsa BestPhiloxIsa();

// Whether `isa` can run here. Does not allocate.
bool PhiloxIsaSupported(PhiloxIsa isa);

// Writes blocks first_block, first_block + 1, ... (block counters wrap modulo 2^32) of the plan's
// stream to out, block after block, word after word: word i % 4 of block first_block + i / 4 goes
// to out[i]. out.size() must be a multiple of 4. Any count works; a multiple of
// kPhiloxBatchBlocks blocks keeps every path on its SIMD loop. Does not allocate.
using PhiloxFillFunction = void (*)(const PhiloxPlan& plan, std::uint32_t first_block,
                                    std::span<std::uint32_t> out);

void PhiloxFillPortable(const PhiloxPlan& plan, std::uint32_t first_block,
                        std::span<std::uint32_t> out);
#if defined(__x86_64__) && defined(__GNUC__)
void PhiloxFillSse2(const PhiloxPlan& plan, std::uint32_t first_block,
                    std::span<std::uint32_t> out);
void PhiloxFillAvx2(const PhiloxPlan& plan, std::uint32_t first_block,
                    std::span<std::uint32_t> out);
void PhiloxFillAvx512(const PhiloxPlan& plan, std::uint32_t first_block,
                      std::span<std::uint32_t> out);
#endif

// The fill of `isa`, or nullptr when it cannot run here. Does not allocate.
PhiloxFillFunction PhiloxFillFor(PhiloxIsa isa);

// Blocks per pass of the widest path (eight AVX-512 chains of eight blocks).
inline constexpr std::size_t kPhiloxBatchBlocks = 64;

}  // namespace edgesgd::internal
