#include "edgesgd/core/internal/philox_batch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "edgesgd/core/random.h"

namespace edgesgd::internal {
namespace {

constexpr PhiloxIsa kAllIsas[] = {PhiloxIsa::kPortable, PhiloxIsa::kSse2, PhiloxIsa::kAvx2,
                                  PhiloxIsa::kAvx512};

// Every instruction set this CPU runs, against Philox4x32_10 block by block: counters near the
// 2^32 wrap, all-ones keys and streams, and counts that end inside a SIMD pass (the scalar tail).
TEST(PhiloxBatchTest, EveryIsaMatchesScalarPhilox) {
  struct Stream {
    std::uint64_t seed;
    std::uint32_t round, tensor, stream;
  };
  const Stream streams[] = {
      {0, 0, 0, 0},
      {42, 7, 3, StreamId(RandomPurpose::kSparsifySelection)},
      {0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFu, 63, 0xFFFFFFFFu},
      {0x0123456789ABCDEFull, 1000, 1, StreamId(RandomPurpose::kQuantizationDither, 0x00ABCDEFu)}};
  const std::uint32_t first_blocks[] = {0, 32, 1u << 20, 0x3FFFFFE0u, 0xFFFFFFE0u};
  const std::size_t block_counts[] = {0, 1, 7, 8, 17, 64, 64 + 9, 192};
  int tested = 0;
  for (const PhiloxIsa isa : kAllIsas) {
    const PhiloxFillFunction fill = PhiloxFillFor(isa);
    ASSERT_EQ(fill != nullptr, PhiloxIsaSupported(isa));
    if (fill == nullptr) continue;
    ++tested;
    for (const Stream& s : streams) {
      const PhiloxPlan plan = MakePhiloxPlan(s.seed, s.round, s.tensor, s.stream);
      for (const std::uint32_t first : first_blocks) {
        for (const std::size_t blocks : block_counts) {
          std::vector<std::uint32_t> words(4 * blocks + 1, 0xDEADBEEFu);
          fill(plan, first, std::span<std::uint32_t>(words).first(4 * blocks));
          ASSERT_EQ(words.back(), 0xDEADBEEFu) << "wrote past the end";
          for (std::size_t b = 0; b < blocks; ++b) {
            const std::uint32_t n = first + static_cast<std::uint32_t>(b);
            const PhiloxBlock expected =
                Philox4x32_10({s.round, s.tensor, s.stream, n}, KeyFromSeed(s.seed));
            for (std::size_t w = 0; w < 4; ++w) {
              ASSERT_EQ(words[4 * b + w], expected[w])
                  << "isa " << static_cast<int>(isa) << " block " << n << " of " << blocks;
            }
          }
        }
      }
    }
  }
  EXPECT_TRUE(PhiloxIsaSupported(PhiloxIsa::kPortable));
  EXPECT_TRUE(PhiloxIsaSupported(BestPhiloxIsa()));
  EXPECT_GE(tested, 1);
}

// The plan's scalar block is Philox4x32_10 itself, also at compile time.
static_assert(PhiloxPlanBlock(MakePhiloxPlan(0x0123456789ABCDEFull, 5, 6, 7), 8) ==
              Philox4x32_10({5, 6, 7, 8}, KeyFromSeed(0x0123456789ABCDEFull)));

// UniformBelow is the only rejection sampler: CounterRng draws through it word for word.
TEST(PhiloxBatchTest, UniformBelowMatchesCounterRng) {
  CounterRng a(9, 1, 2, 3);
  CounterRng b(9, 1, 2, 3);
  for (std::uint32_t bound : {1u, 2u, 3u, 1000u, 0x80000001u, 0xFFFFFFFFu}) {
    for (int i = 0; i < 1000; ++i) {
      ASSERT_EQ(a.NextBelow(bound), UniformBelow(bound, [&] { return b.NextU32(); }));
    }
  }
}

}  // namespace
}  // namespace edgesgd::internal
