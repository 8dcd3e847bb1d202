#include "edgesgd/core/random.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace edgesgd {
namespace {

// Known-answer vectors of the Random123 distribution (kat_vectors, philox4x32_10).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  static_assert(Philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
                PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  EXPECT_EQ(Philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(SplitMix64Test, MatchesReferenceSequence) {
  // Reference values of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
  std::uint64_t state = 0;
  EXPECT_EQ(SplitMix64(state), 0xe220a8397b1dcdafull);
  EXPECT_EQ(SplitMix64(state), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(SplitMix64(state), 0x06c45d188009454full);
}

TEST(UniformFloatTest, IsExactAndInHalfOpenUnitInterval) {
  EXPECT_EQ(UniformFloat(0), 0.0f);
  EXPECT_EQ(UniformFloat(0xffffffffu), 1.0f - 0x1.0p-24f);
  EXPECT_EQ(UniformFloat(0x80000000u), 0.5f);
  EXPECT_LT(UniformFloat(0xffffffffu), 1.0f);
}

TEST(CounterRngTest, IsAPureFunctionOfItsCounter) {
  CounterRng a(42, 7, 1, StreamId(RandomPurpose::kBlockStart));
  CounterRng b(42, 7, 1, StreamId(RandomPurpose::kBlockStart));
  CounterRng other_round(42, 8, 1, StreamId(RandomPurpose::kBlockStart));
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    const std::uint32_t value = a.NextU32();
    EXPECT_EQ(value, b.NextU32());
    differs |= value != other_round.NextU32();
  }
  EXPECT_TRUE(differs);
  // The first block is Philox of (round, tensor, stream, 0) under the seed's key.
  const PhiloxBlock first =
      Philox4x32_10({7, 1, StreamId(RandomPurpose::kBlockStart), 0}, KeyFromSeed(42));
  CounterRng c(42, 7, 1, StreamId(RandomPurpose::kBlockStart));
  for (std::uint32_t word : first) EXPECT_EQ(c.NextU32(), word);
}

TEST(CounterRngTest, NextBelowIsInRangeAndRoughlyUniform) {
  CounterRng rng(1, 0, 0, 0);
  std::array<int, 7> counts{};
  constexpr int kDraws = 70000;
  for (int i = 0; i < kDraws; ++i) {
    const std::uint32_t v = rng.NextBelow(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (int count : counts) EXPECT_NEAR(count, kDraws / 7, 5 * 100);  // ~5 sigma
  EXPECT_EQ(rng.NextBelow(1), 0u);
}

TEST(StreamIdTest, SeparatesPurposesAndWorkers) {
  EXPECT_NE(StreamId(RandomPurpose::kQuantizationDither, 1),
            StreamId(RandomPurpose::kQuantizationDither, 2));
  EXPECT_NE(StreamId(RandomPurpose::kSparsifySelection, 0), StreamId(RandomPurpose::kBlockStart, 0));
}

}  // namespace
}  // namespace edgesgd
