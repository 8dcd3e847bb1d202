// Decoding Shamir shares with wrong ones among them (DecodeShares): every pattern of up to
// (m - t) / 2 wrong shares is corrected and named, beyond that the result is never silently
// taken for the secret by a caller that checks it, and bad arguments are refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "edgesgd/secagg/shamir.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::secagg {
namespace {

using testing::SharableKey;
using testing::TestKey;

struct Split {
  Key secret;
  std::vector<Share> shares;
};

Split MakeShares(std::uint32_t label, std::uint32_t count, std::uint32_t threshold,
                 std::uint32_t first_point = 1) {
  Split split{SharableKey(label, 0), std::vector<Share>(count)};
  std::vector<std::uint32_t> points(count);
  for (std::uint32_t i = 0; i < count; ++i) points[i] = first_point + 3 * i;
  SecretRandom random(TestKey(label, 1));
  EXPECT_TRUE(SplitSecret(split.secret, threshold, points, random, split.shares).ok());
  return split;
}

Result<Key> Decode(std::span<const Share> shares, std::uint32_t threshold,
                   std::vector<std::uint8_t>& wrong) {
  std::vector<FieldElement> scratch(DecodeScratchElements(shares.size()));
  wrong.assign(shares.size(), 0xAA);
  return DecodeShares(shares, threshold, scratch, wrong);
}

TEST(ShareDecodingTest, CorrectsEveryPatternOfWrongSharesWithinHalfTheSpare) {
  // 9 shares, t = 4: up to 2 wrong shares, in either half or both, at any positions.
  const Split split = MakeShares(20, 9, 4);
  std::vector<std::uint8_t> wrong;
  for (unsigned mask = 0; mask < (1u << 9); ++mask) {
    if (__builtin_popcount(mask) > 2) continue;
    std::vector<Share> shares = split.shares;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      if ((mask >> i) & 1u) shares[i].y[(mask + i) % kShareWords] ^= 0x00400001u;
    }
    const Result<Key> decoded = Decode(shares, 4, wrong);
    ASSERT_TRUE(decoded.ok()) << mask;
    EXPECT_EQ(decoded.value(), split.secret) << mask;
    for (std::size_t i = 0; i < shares.size(); ++i) EXPECT_EQ(wrong[i], (mask >> i) & 1u) << mask;
  }
}

TEST(ShareDecodingTest, LargeCohortsAtFullWidthPoints) {
  // 60 shares at points near 2^32, t = 40: 10 wrong ones, some with both halves replaced.
  Split split{SharableKey(21, 0), std::vector<Share>(60)};
  split.secret[kKeyBytes - 1] |= std::byte{0x0C};  // the secret's top bits set
  std::vector<std::uint32_t> points(60);
  for (std::size_t i = 0; i < points.size(); ++i) {
    points[i] = 0xFFFFFFFFu - 977u * static_cast<std::uint32_t>(i);
  }
  SecretRandom random(TestKey(21, 1));
  ASSERT_TRUE(SplitSecret(split.secret, 40, points, random, split.shares).ok());
  for (std::size_t i = 0; i < 60; i += 6) {
    for (std::size_t w = 0; w < kShareWords; w += 1 + i % 3)
      split.shares[i].y[w] = ~split.shares[i].y[w];
  }
  std::vector<std::uint8_t> wrong;
  const Result<Key> decoded = Decode(split.shares, 40, wrong);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded.value(), split.secret);
  for (std::size_t i = 0; i < 60; ++i) EXPECT_EQ(wrong[i], i % 6 == 0 ? 1 : 0) << i;
}

TEST(ShareDecodingTest, BeyondTheBoundItFailsOrFindsAnotherNearbyPolynomial) {
  // 9 shares, t = 4, 3 wrong: the true polynomial is out of reach. Decoding either fails, or
  // returns another key from a polynomial within 2 of the shares (it names at most 2 wrong), which
  // a caller checking against a commitment refuses.
  const Split split = MakeShares(22, 9, 4);
  std::vector<std::uint8_t> wrong;
  int failures = 0;
  for (unsigned mask = 0; mask < (1u << 9); ++mask) {
    if (__builtin_popcount(mask) != 3) continue;
    std::vector<Share> shares = split.shares;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      if ((mask >> i) & 1u) shares[i].y[0] += 1;
    }
    const Result<Key> decoded = Decode(shares, 4, wrong);
    if (!decoded.ok()) {
      EXPECT_EQ(decoded.status().code(), StatusCode::kDataLoss);
      ++failures;
      continue;
    }
    EXPECT_NE(decoded.value(), split.secret) << mask;
    EXPECT_LE(std::count(wrong.begin(), wrong.end(), 1), 2) << mask;
  }
  EXPECT_GT(failures, 0);
}

TEST(ShareDecodingTest, NoSpareSharesAndAllGoodSharesStillDecode) {
  std::vector<std::uint8_t> wrong;
  for (const std::uint32_t count : {1u, 2u, 5u}) {
    const Split split = MakeShares(23 + count, count, count);
    const Result<Key> decoded = Decode(split.shares, count, wrong);
    ASSERT_TRUE(decoded.ok()) << count;
    EXPECT_EQ(decoded.value(), split.secret);
    EXPECT_EQ(wrong, std::vector<std::uint8_t>(count, 0));
  }
}

TEST(ShareDecodingTest, RefusesBadArguments) {
  Split split = MakeShares(30, 5, 3);
  std::vector<std::uint8_t> wrong;
  EXPECT_EQ(Decode(std::span(split.shares).first(2), 3, wrong).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Decode(split.shares, 0, wrong).status().code(), StatusCode::kInvalidArgument);
  std::vector<FieldElement> short_scratch(DecodeScratchElements(5) - 1);
  std::vector<std::uint8_t> flags(5);
  EXPECT_EQ(DecodeShares(split.shares, 3, short_scratch, flags).status().code(),
            StatusCode::kInvalidArgument);
  split.shares[4].x = split.shares[1].x;
  EXPECT_EQ(Decode(split.shares, 3, wrong).status().code(), StatusCode::kInvalidArgument);
  split.shares[4].x = 0;
  EXPECT_EQ(Decode(split.shares, 3, wrong).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace edgesgd::secagg
