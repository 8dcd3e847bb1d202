// The primitives under secure aggregation: X25519 against RFC 7748, agreement, HKDF separation,
// sealing (tampering, misaddressing and replay fail), masks, Shamir sharing and the fixed-point
// encoding.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "edgesgd/core/codecs/qsgd.h"
#include "edgesgd/secagg/crypto.h"
#include "edgesgd/secagg/fixed_point.h"
#include "edgesgd/secagg/lanes.h"
#include "edgesgd/secagg/qsgd_levels.h"
#include "edgesgd/secagg/shamir.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::secagg {
namespace {

using testing::KeyFromHex;
using testing::SharableKey;
using testing::TestKey;

TEST(X25519Test, MatchesRfc7748FirstVector) {
  // RFC 7748 section 5.2, first test vector.
  const Key scalar = KeyFromHex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4");
  const Key u = KeyFromHex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c");
  Key out;
  ASSERT_TRUE(AgreeSecret(scalar, u, out).ok());
  EXPECT_EQ(out, KeyFromHex("c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"));
}

TEST(X25519Test, BothSidesAgreeAndOthersDoNot) {
  SecretRandom random(TestKey(1, 0));
  KeyPair alice, bob, carol;
  ASSERT_TRUE(GenerateKeyPair(random, alice).ok());
  ASSERT_TRUE(GenerateKeyPair(random, bob).ok());
  ASSERT_TRUE(GenerateKeyPair(random, carol).ok());
  Key ab, ba, ac;
  ASSERT_TRUE(AgreeSecret(alice.private_key, bob.public_key, ab).ok());
  ASSERT_TRUE(AgreeSecret(bob.private_key, alice.public_key, ba).ok());
  ASSERT_TRUE(AgreeSecret(alice.private_key, carol.public_key, ac).ok());
  EXPECT_EQ(ab, ba);
  EXPECT_NE(ab, ac);
  Key again;
  ASSERT_TRUE(PublicKeyOf(alice.private_key, again).ok());
  EXPECT_EQ(again, alice.public_key);
}

TEST(X25519Test, RefusesLowOrderPeerKeys) {
  SecretRandom random(TestKey(2, 0));
  KeyPair own;
  ASSERT_TRUE(GenerateKeyPair(random, own).ok());
  Key zero{};  // u = 0: order 1
  Key one{};   // u = 1: order 4
  one[0] = std::byte{1};
  Key shared;
  EXPECT_FALSE(AgreeSecret(own.private_key, zero, shared).ok());
  EXPECT_FALSE(AgreeSecret(own.private_key, one, shared).ok());
}

TEST(DeriveKeyTest, LabelAndContextSeparateKeys) {
  const Key shared = TestKey(3, 0);
  const std::array<std::byte, 2> context_a{std::byte{1}, std::byte{2}};
  const std::array<std::byte, 2> context_b{std::byte{1}, std::byte{3}};
  const auto label = [](const char* text) {
    return std::as_bytes(std::span(text, std::char_traits<char>::length(text)));
  };
  Key a1, a2, b, c;
  ASSERT_TRUE(DeriveKey(shared, label("shares"), context_a, a1).ok());
  ASSERT_TRUE(DeriveKey(shared, label("shares"), context_a, a2).ok());
  ASSERT_TRUE(DeriveKey(shared, label("shares"), context_b, b).ok());
  ASSERT_TRUE(DeriveKey(shared, label("pair mask"), context_a, c).ok());
  EXPECT_EQ(a1, a2);
  EXPECT_NE(a1, b);
  EXPECT_NE(a1, c);
}

TEST(SealTest, OpensOnlyWithTheSameKeyAndAssociatedData) {
  const Key key = TestKey(4, 0);
  const std::array<std::byte, 3> aad{std::byte{7}, std::byte{8}, std::byte{9}};
  std::array<std::byte, 40> plaintext;
  for (std::size_t i = 0; i < plaintext.size(); ++i) plaintext[i] = static_cast<std::byte>(i * 3);
  std::array<std::byte, 40 + kAeadTagBytes> sealed;
  ASSERT_TRUE(Seal(key, aad, plaintext, sealed).ok());
  std::array<std::byte, 40> opened;
  ASSERT_TRUE(Open(key, aad, sealed, opened).ok());
  EXPECT_EQ(opened, plaintext);

  for (std::size_t flip : {std::size_t{0}, std::size_t{39}, std::size_t{40}, sealed.size() - 1}) {
    auto tampered = sealed;
    tampered[flip] ^= std::byte{0x01};
    EXPECT_EQ(Open(key, aad, tampered, opened).code(), StatusCode::kUnauthenticated) << flip;
  }
  auto other_aad = aad;
  other_aad[0] = std::byte{6};
  EXPECT_EQ(Open(key, other_aad, sealed, opened).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Open(TestKey(4, 1), aad, sealed, opened).code(), StatusCode::kUnauthenticated);
}

TEST(MaskTest, SubtractingTheMaskRestoresTheWordsAndMasksDiffer) {
  std::vector<std::uint32_t> words(1000);
  for (std::size_t i = 0; i < words.size(); ++i)
    words[i] = static_cast<std::uint32_t>(i * 2654435761u);
  const std::vector<std::uint32_t> original = words;
  ApplyMask(TestKey(5, 0), MaskSign::kAdd, words);
  std::size_t unchanged = 0;
  for (std::size_t i = 0; i < words.size(); ++i) unchanged += words[i] == original[i] ? 1u : 0u;
  EXPECT_LE(unchanged, 1u);
  std::vector<std::uint32_t> other = original;
  ApplyMask(TestKey(5, 1), MaskSign::kAdd, other);
  EXPECT_NE(other, words);
  ApplyMask(TestKey(5, 0), MaskSign::kSubtract, words);
  EXPECT_EQ(words, original);
}

TEST(MaskTest, AMaskIsAPrefixOfALongerMask) {
  // The mask of a vector does not depend on how it is cut into ChaCha20 blocks.
  std::vector<std::uint32_t> short_words(37, 0), long_words(300, 0);
  ApplyMask(TestKey(6, 0), MaskSign::kAdd, short_words);
  ApplyMask(TestKey(6, 0), MaskSign::kAdd, long_words);
  EXPECT_TRUE(std::equal(short_words.begin(), short_words.end(), long_words.begin()));
}

TEST(SecretRandomTest, SameKeySameStreamWhateverTheReadSizes) {
  SecretRandom a(TestKey(7, 0)), b(TestKey(7, 0));
  std::array<std::byte, 100> whole;
  a.Fill(whole);
  std::array<std::byte, 100> pieces;
  b.Fill(std::span(pieces).first(3));
  b.Fill(std::span(pieces).subspan(3, 64));
  b.Fill(std::span(pieces).subspan(67));
  EXPECT_EQ(whole, pieces);
}

TEST(ShamirTest, AnyThresholdSharesReconstructAndFewerDoNot) {
  const Key secret = SharableKey(8, 0);
  const std::vector<std::uint32_t> points{1, 2, 3, 4, 5, 6, 7};
  std::vector<Share> shares(points.size());
  SecretRandom random(TestKey(8, 1));
  ASSERT_TRUE(SplitSecret(secret, 4, points, random, shares).ok());
  // Every 4-subset, in a different order each time.
  for (unsigned mask = 0; mask < 128; ++mask) {
    if (__builtin_popcount(mask) != 4) continue;
    std::vector<Share> subset;
    for (std::size_t i = 7; i-- > 0;) {
      if (mask & (1u << i)) subset.push_back(shares[i]);
    }
    Result<Key> combined = CombineShares(subset, 4);
    ASSERT_TRUE(combined.ok()) << mask;
    EXPECT_EQ(combined.value(), secret) << mask;
  }
  EXPECT_FALSE(CombineShares(std::span(shares).first(3), 4).ok());
}

TEST(ShamirTest, SharesOfThresholdMinusOneRevealNothingAboutTheSecret) {
  // With t - 1 shares fixed by the coefficient stream, two different secrets give share values
  // that differ: the secret enters every share, so no t - 1 of them are a function of the others.
  // The information-theoretic claim itself is checked on a small case: over many splits of two
  // secrets, the first share's low word is spread the same way for both.
  const std::vector<std::uint32_t> points{1, 2, 3};
  std::array<int, 16> histogram_a{}, histogram_b{};
  for (std::uint64_t trial = 0; trial < 4000; ++trial) {
    std::vector<Share> shares(3);
    SecretRandom random_a(TestKey(9, trial));
    ASSERT_TRUE(SplitSecret(SharableKey(9, 1000000), 2, points, random_a, shares).ok());
    ++histogram_a[shares[0].y[0] % 16];
    SecretRandom random_b(TestKey(9, trial + 500000));
    ASSERT_TRUE(SplitSecret(Key{}, 2, points, random_b, shares).ok());
    ++histogram_b[shares[0].y[0] % 16];
  }
  for (std::size_t bin = 0; bin < 16; ++bin) {
    EXPECT_NEAR(histogram_a[bin], 250, 80) << bin;
    EXPECT_NEAR(histogram_b[bin], 250, 80) << bin;
  }
}

TEST(ShamirTest, LargeCohortsAndLargePointsReconstruct) {
  // 40 of 60 holders at points near 2^32: every product and inverse of the field is exercised
  // at full width, and the secret's top bits (251, 250) are set.
  Key secret = SharableKey(11, 0);
  secret[kKeyBytes - 1] |= std::byte{0x0C};
  std::vector<std::uint32_t> points(60);
  for (std::size_t i = 0; i < points.size(); ++i)
    points[i] = 0xFFFFFFFFu - 977u * static_cast<std::uint32_t>(i);
  std::vector<Share> shares(points.size());
  SecretRandom random(TestKey(11, 1));
  ASSERT_TRUE(SplitSecret(secret, 40, points, random, shares).ok());
  const Result<Key> first = CombineShares(std::span(shares).first(40), 40);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value(), secret);
  const Result<Key> last = CombineShares(std::span(shares).last(40), 40);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last.value(), secret);
}

TEST(ShamirTest, RefusesSecretsOfMoreThan252Bits) {
  std::vector<Share> shares(3);
  SecretRandom random(TestKey(12, 1));
  const std::vector<std::uint32_t> points{1, 2, 3};
  Key secret = SharableKey(12, 0);
  secret[kKeyBytes - 1] |= std::byte{0x10};
  EXPECT_EQ(SplitSecret(secret, 2, points, random, shares).code(), StatusCode::kInvalidArgument);
}

TEST(ShamirTest, APrivateKeyTravelsAsA251BitSecret) {
  SecretRandom random(TestKey(13, 0));
  KeyPair pair;
  ASSERT_TRUE(GenerateKeyPair(random, pair).ok());
  const Key secret = PrivateKeyToSecret(pair.private_key);
  EXPECT_EQ(std::to_integer<unsigned>(secret[kKeyBytes - 1]) >> 3, 0u);
  const Key rebuilt = PrivateKeyFromSecret(secret);
  Key public_key;
  ASSERT_TRUE(PublicKeyOf(rebuilt, public_key).ok());
  EXPECT_EQ(public_key, pair.public_key);
  EXPECT_EQ(PrivateKeyToSecret(rebuilt), secret);
  // Through shares as well.
  const std::vector<std::uint32_t> points{1, 2, 3};
  std::vector<Share> shares(3);
  ASSERT_TRUE(SplitSecret(secret, 2, points, random, shares).ok());
  EXPECT_EQ(CombineShares(std::span(shares).last(2), 2).value(), secret);
}

TEST(ShamirTest, RefusesBadPointsAndDetectsMismatchedShares) {
  const Key secret = SharableKey(10, 0);
  std::vector<Share> shares(3);
  SecretRandom random(TestKey(10, 1));
  const std::vector<std::uint32_t> repeated{1, 2, 2};
  EXPECT_EQ(SplitSecret(secret, 2, repeated, random, shares).code(), StatusCode::kInvalidArgument);
  const std::vector<std::uint32_t> zero{0, 1, 2};
  EXPECT_EQ(SplitSecret(secret, 2, zero, random, shares).code(), StatusCode::kInvalidArgument);
  const std::vector<std::uint32_t> good{1, 2, 3};
  EXPECT_EQ(SplitSecret(secret, 4, good, random, shares).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(SplitSecret(secret, 2, good, random, shares).ok());
  shares[1].y[3] ^= 1u << 20;
  const Result<Key> combined = CombineShares(shares, 2);
  EXPECT_TRUE(!combined.ok() || combined.value() != secret);
  shares[1].x = shares[0].x;
  EXPECT_EQ(CombineShares(shares, 2).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShamirTest, ShareEncodingRoundTrips) {
  Share share;
  share.x = 77;
  for (std::size_t i = 0; i < kShareWords; ++i)
    share.y[i] = 0xFFFFFFF0u - 0x01020304u * static_cast<std::uint32_t>(i);
  std::array<std::byte, kShareBytes> bytes;
  WriteShare(share, bytes);
  const Share back = ReadShare(bytes, 77);
  EXPECT_EQ(back.x, share.x);
  EXPECT_EQ(back.y, share.y);
}

TEST(FixedPointTest, ChoosesTheFinestScaleThatCannotOverflow) {
  const Result<FixedPoint> format = ChooseFixedPoint(1.0f, 100);
  ASSERT_TRUE(format.ok());
  // 100 * 2^f <= 2^31 - 1: f = 24 (100 * 2^24 = 1.68e9).
  EXPECT_EQ(format->fraction_bits, 24u);
  const Result<FixedPoint> wide = ChooseFixedPoint(10.0f, 1000);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->fraction_bits, 17u);  // 1e4 * 2^17 = 1.31e9; 2^18 would overflow
  EXPECT_EQ(ChooseFixedPoint(1e6f, 1000).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ChooseFixedPoint(0.0f, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseFixedPoint(std::nanf(""), 10).status().code(), StatusCode::kInvalidArgument);
}

TEST(FixedPointTest, SumOfEncodingsDecodesToTheRoundedSumEvenAtTheBound) {
  const std::uint32_t devices = 50;
  const FixedPoint format = ChooseFixedPoint(2.0f, devices).value();
  std::vector<std::uint32_t> sum(4, 0);
  std::array<double, 4> exact{};
  for (std::uint32_t d = 0; d < devices; ++d) {
    const std::array<float, 4> values{-2.0f, 2.0f, 0.3f * static_cast<float>(d % 7) - 1.0f, 9.0f};
    std::array<std::uint32_t, 4> words;
    EncodeFixedPoint(format, values, words);
    for (std::size_t i = 0; i < 4; ++i) {
      sum[i] += words[i];
      exact[i] += std::min(2.0, static_cast<double>(values[i]));
    }
  }
  std::array<float, 4> decoded;
  DecodeFixedPointSum(format, sum, decoded);
  const double step = std::ldexp(1.0, -static_cast<int>(format.fraction_bits));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(decoded[i], exact[i], devices * step) << i;
  EXPECT_EQ(decoded[0], -100.0f);
  EXPECT_EQ(decoded[1], 100.0f);
  EXPECT_EQ(decoded[3], 100.0f);  // clipped to the bound
}

TEST(LanesTest, LanesHoldTheLargestSum) {
  EXPECT_EQ(LaneBits(1).value(), 1u);
  EXPECT_EQ(LaneBits(3).value(), 2u);
  EXPECT_EQ(LaneBits(7).value(), 3u);
  EXPECT_EQ(LaneBits(8).value(), 4u);
  EXPECT_EQ(LaneBits(255).value(), 8u);
  EXPECT_EQ(LaneBits(256).value(), 9u);
  EXPECT_EQ(LaneBits(0xFFFFFFFFu).value(), 32u);
  EXPECT_EQ(LaneBits(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LaneBits(std::uint64_t{1} << 32).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(LaneWords(100, 4), 13u);  // 8 lanes a word
  EXPECT_EQ(LaneWords(100, 9), 34u);  // 3 lanes a word, 5 bits unused
}

TEST(VotesTest, SumsOfPackedVotesUnpackToCountsEvenWhenLanesAreFull) {
  // 7 voters in 3-bit lanes (10 to a word): every coordinate reaches 7 = 0b111 somewhere, the
  // count that would carry into the next lane if the lane were too narrow.
  constexpr std::uint32_t kVoters = 7;
  constexpr std::size_t kCoordinates = 95;
  const std::uint32_t lane_bits = LaneBits(kVoters).value();
  std::vector<std::uint32_t> sum(LaneWords(kCoordinates, lane_bits), 0u);
  std::vector<std::uint32_t> expected(kCoordinates, 0u);
  for (std::uint32_t voter = 0; voter < kVoters; ++voter) {
    std::vector<std::uint32_t> signs(3, 0u);
    for (std::size_t i = 0; i < kCoordinates; ++i) {
      const bool plus = i % 3 == 0 || (i + voter) % 2 == 0;
      if (plus) signs[i / 32] |= 1u << (i % 32);
      expected[i] += plus ? 1u : 0u;
    }
    std::vector<std::uint32_t> packed(sum.size());
    PackVotes(signs, kCoordinates, lane_bits, packed);
    for (std::size_t w = 0; w < sum.size(); ++w) sum[w] += packed[w];
  }
  std::vector<std::uint32_t> counts(kCoordinates);
  UnpackLaneSums(sum, kCoordinates, lane_bits, counts);
  EXPECT_EQ(counts, expected);
  EXPECT_EQ(counts[0], kVoters);
}

// The levels of `values` as one device encodes them, read back from its lanes.
std::vector<std::int64_t> EncodedLevels(const SharedScaleLevels& format,
                                        std::span<const float> values, std::uint32_t device) {
  std::vector<std::uint32_t> words(SharedScaleLevelWords(format, values.size()));
  CounterRng dither(7, 1, 0, device);
  EncodeSharedScaleLevels(format, values, dither, words);
  std::vector<std::uint32_t> lanes(values.size());
  UnpackLaneSums(words, values.size(), format.lane_bits, lanes);
  std::vector<std::int64_t> levels(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    levels[i] = std::int64_t{lanes[i]} - format.levels;
  }
  return levels;
}

TEST(SharedScaleLevelsTest, LanesAreSizedForTheWholeCohort) {
  const SharedScaleLevels format = ChooseSharedScaleLevels(0.5f, 7, 8).value();
  EXPECT_EQ(format.lane_bits, 7u);                     // 2 * 7 * 8 = 112 < 128
  EXPECT_EQ(SharedScaleLevelWords(format, 100), 25u);  // 4 lanes a word
  EXPECT_EQ(ChooseSharedScaleLevels(1.0f, 127, 100).value().lane_bits, 15u);  // 25,400
  EXPECT_EQ(ChooseSharedScaleLevels(1.0f, kMaxQsgdLevels, 65537).value().lane_bits, 32u);
  EXPECT_EQ(ChooseSharedScaleLevels(1.0f, kMaxQsgdLevels, 65540).status().code(),
            StatusCode::kOutOfRange);
  for (const float bad : {0.0f, -1.0f, std::nanf(""), INFINITY}) {
    EXPECT_EQ(ChooseSharedScaleLevels(bad, 7, 8).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ChooseSharedScaleLevels(1.0f, 0, 8).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseSharedScaleLevels(1.0f, kMaxQsgdLevels + 1, 8).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseSharedScaleLevels(1.0f, 7, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(SharedScaleLevelsTest, ValuesClipToTheTopLevelAndNanEncodesAsZero) {
  const SharedScaleLevels format = ChooseSharedScaleLevels(2.0f, 3, 4).value();
  const std::array<float, 7> values{2.0f, -2.0f, 50.0f, -INFINITY, std::nanf(""), -0.0f, 1.0f};
  const std::vector<std::int64_t> levels = EncodedLevels(format, values, 0);
  EXPECT_EQ(levels, (std::vector<std::int64_t>{3, -3, 3, -3, 0, 0, levels[6]}));
  // 1.0 is 1.5 levels: rounds to 1 or 2.
  EXPECT_TRUE(levels[6] == 1 || levels[6] == 2) << levels[6];
}

TEST(SharedScaleLevelsTest, TheSumOfEncodingsDecodesToTheSumOfLevelsEvenWhenLanesAreFull) {
  // Every device at the top level fills a lane to 2 s n, the sum that would carry if the lane
  // were one bit narrower; the other coordinates mix levels of both signs.
  constexpr std::uint32_t kDevices = 9;
  constexpr std::size_t kCoordinates = 37;
  const SharedScaleLevels format = ChooseSharedScaleLevels(0.25f, 15, kDevices).value();
  std::vector<std::uint32_t> sum(SharedScaleLevelWords(format, kCoordinates), 0u);
  std::vector<std::int64_t> level_sums(kCoordinates, 0);
  for (std::uint32_t d = 0; d < kDevices; ++d) {
    std::vector<float> values(kCoordinates);
    values[0] = 1.0f;
    values[1] = -0.25f;
    for (std::size_t i = 2; i < kCoordinates; ++i) {
      values[i] = 0.3f * std::sin(static_cast<float>(i * 13 + d * 5));
    }
    const std::vector<std::int64_t> levels = EncodedLevels(format, values, d);
    std::vector<std::uint32_t> words(sum.size());
    CounterRng dither(7, 1, 0, d);
    EncodeSharedScaleLevels(format, values, dither, words);
    for (std::size_t w = 0; w < sum.size(); ++w) sum[w] += words[w];
    for (std::size_t i = 0; i < kCoordinates; ++i) level_sums[i] += levels[i];
  }
  std::vector<float> decoded(kCoordinates);
  DecodeSharedScaleLevelSum(format, sum, kDevices, decoded);
  const double step = 0.25 / 15;
  for (std::size_t i = 0; i < kCoordinates; ++i) {
    EXPECT_EQ(decoded[i], static_cast<float>(static_cast<double>(level_sums[i]) * step)) << i;
  }
  EXPECT_EQ(decoded[0], 0.25f * kDevices);
  EXPECT_EQ(decoded[1], -0.25f * kDevices);
}

TEST(SharedScaleLevelsTest, AQsgdPayloadOfTheSharedScaleSumsToItsDecodedValues) {
  // Two tensors, neither a multiple of a word's fields: each starts on a fresh payload word.
  constexpr std::uint32_t kDevices = 3;
  const std::uint64_t sizes[] = {37, 10};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  const QsgdParams params{.levels = 7, .bucket = 16, .shared_scale = 0.5f};
  const SharedScaleLevels format = ChooseSharedScaleLevels(0.5f, 7, kDevices).value();
  const PayloadShape shape = QsgdCodec::Shape(params, layout).value();
  std::vector<std::uint32_t> sum(SharedScaleLevelWords(format, layout.dimension()), 0u);
  std::vector<float> decoded_sum(layout.dimension(), 0.0f);
  for (std::uint32_t d = 0; d < kDevices; ++d) {
    std::vector<float> values(layout.dimension());
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] = 0.6f * std::sin(static_cast<float>(i * 7 + d * 3));  // some beyond 0.5
    }
    std::vector<std::uint32_t> payload_words(shape.words);
    std::vector<float> norms(shape.scales);
    ASSERT_TRUE(QsgdCodec::Encode(params, layout, CodecContext{5, 1, d}, values,
                                  PayloadSpans{{}, {}, payload_words, norms}, {})
                    .ok());
    ASSERT_TRUE(QsgdCodec::DecodeAdd(params, layout, CodecContext{},
                                     PayloadView({}, {}, payload_words, norms), 1.0f, decoded_sum,
                                     {})
                    .ok());
    std::vector<std::uint32_t> words(sum.size());
    ASSERT_TRUE(EncodeQsgdPayloadLevels(format, layout, payload_words, words).ok());
    for (std::size_t w = 0; w < sum.size(); ++w) sum[w] += words[w];
  }
  std::vector<float> decoded(layout.dimension());
  DecodeSharedScaleLevelSum(format, sum, kDevices, decoded);
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    EXPECT_NEAR(decoded[i], decoded_sum[i], 1e-6f) << i;
  }
  // Words of another layout, and a level field above s, are refused.
  std::vector<std::uint32_t> words(sum.size());
  std::vector<std::uint32_t> short_payload(shape.words - 1, 0u);
  EXPECT_EQ(EncodeQsgdPayloadLevels(format, layout, short_payload, words).code(),
            StatusCode::kInvalidArgument);
  std::vector<std::uint32_t> high(shape.words, 0u);
  high[0] = 0x6u;  // the first field's level: 6 of 7 is fine
  EXPECT_TRUE(EncodeQsgdPayloadLevels(format, layout, high, words).ok());
  const SharedScaleLevels five = ChooseSharedScaleLevels(0.5f, 5, kDevices).value();
  std::vector<std::uint32_t> five_words(SharedScaleLevelWords(five, layout.dimension()));
  EXPECT_EQ(EncodeQsgdPayloadLevels(five, layout, high, five_words).code(),
            StatusCode::kInvalidArgument);  // 6 of 5 levels
}

TEST(SharedScaleLevelsTest, RoundingIsUnbiasedInsideTheScale) {
  // 4,000 devices quantize the same values to 4 levels of 1.0; each decoded value differs from
  // its input by at most one level (0.25), so the mean's error has a standard deviation of at
  // most 0.125 / sqrt(4000) = 0.002; 5 of them is 0.01.
  constexpr std::uint32_t kDevices = 4000;
  const std::array<float, 5> values{0.3f, -0.61f, 0.999f, 0.05f, -0.125f};
  const SharedScaleLevels format = ChooseSharedScaleLevels(1.0f, 4, kDevices).value();
  std::array<double, 5> mean{};
  for (std::uint32_t d = 0; d < kDevices; ++d) {
    const std::vector<std::int64_t> levels = EncodedLevels(format, values, d);
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_LE(std::abs(static_cast<double>(levels[i]) * 0.25 - static_cast<double>(values[i])),
                0.25);
      mean[i] += static_cast<double>(levels[i]) * 0.25 / kDevices;
    }
  }
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_NEAR(mean[i], static_cast<double>(values[i]), 0.01) << i;
}

}  // namespace
}  // namespace edgesgd::secagg
