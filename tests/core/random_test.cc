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

// Known-answer vectors of the Random123 distribution (kat_vectors, philox4x64_10).
TEST(PhiloxTest, WideMatchesRandom123KnownAnswers) {
  static_assert(Philox4x64_10({0, 0, 0, 0}, {0, 0}) ==
                Philox64Block{0x16554d9eca36314cull, 0xdb20fe9d672d0fdcull, 0xd7e772cee186176bull,
                              0x7e68b68aec7ba23bull});
  constexpr std::uint64_t kOnes = ~std::uint64_t{0};
  EXPECT_EQ(Philox4x64_10({kOnes, kOnes, kOnes, kOnes}, {kOnes, kOnes}),
            (Philox64Block{0x87b092c3013fe90bull, 0x438c3c67be8d0224ull, 0x9cc7d7c69cd777b6ull,
                           0xa09caebf594f0ba0ull}));
}

TEST(MultiplyWideTest, GivesBothHalvesOfTheProduct) {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  MultiplyWide(~std::uint64_t{0}, ~std::uint64_t{0}, high, low);  // (2^64 - 1)^2
  EXPECT_EQ(high, 0xfffffffffffffffeull);
  EXPECT_EQ(low, 1u);
  MultiplyWide(0x123456789abcdef0ull, 0x10ull, high, low);
  EXPECT_EQ(high, 0x1u);
  EXPECT_EQ(low, 0x23456789abcdef00ull);
}

// Each half of a 128-bit secret changes the stream; the words are the block's, low half first.
TEST(SecretRngTest, ReadsPhilox4x64UnderBothHalvesOfTheKey) {
  SecretRng rng({7, 9}, 3, 1, 2);
  const Philox64Block first = Philox4x64_10({3, 1, 2, 0}, {7, 9});
  EXPECT_EQ(rng.NextU32(), static_cast<std::uint32_t>(first[0]));
  EXPECT_EQ(rng.NextU32(), static_cast<std::uint32_t>(first[0] >> 32));
  for (int i = 2; i < 8; ++i) rng.NextU32();
  const Philox64Block second = Philox4x64_10({3, 1, 2, 1}, {7, 9});
  EXPECT_EQ(rng.NextU32(), static_cast<std::uint32_t>(second[0]));
  const auto words = [](SecretKey key) {
    SecretRng stream(key, 3, 1, 2);
    return std::array<std::uint32_t, 4>{stream.NextU32(), stream.NextU32(), stream.NextU32(),
                                        stream.NextU32()};
  };
  EXPECT_NE(words({7, 9}), words({7, 10}));
  EXPECT_NE(words({7, 9}), words({8, 9}));
  EXPECT_TRUE(SecretKey{}.empty());
  EXPECT_FALSE((SecretKey{0, 1}.empty()));
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
