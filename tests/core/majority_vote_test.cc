#include "edgesgd/core/majority_vote.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;

// Bit of coordinate `i` of `tensor` in SignCodec's packing.
bool Bit(std::span<const std::uint32_t> words, const TensorLayout& layout, std::size_t tensor,
         std::size_t i) {
  std::size_t first = 0;
  for (std::size_t t = 0; t < tensor; ++t) first += (layout.size(t) + 31) / 32;
  return ((words[first + i / 32] >> (i % 32)) & 1u) != 0;
}

// Random packed signs with 0 padding; `bias` is the probability of a 1 bit.
std::vector<std::uint32_t> RandomVote(const TensorLayout& layout, std::mt19937& rng,
                                      double bias = 0.5) {
  std::bernoulli_distribution coin(bias);
  std::vector<std::uint32_t> words(MajorityVote::WordsFor(layout), 0u);
  std::size_t first = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    for (std::size_t i = 0; i < layout.size(t); ++i) {
      if (coin(rng)) words[first + i / 32] |= std::uint32_t{1} << (i % 32);
    }
    first += (layout.size(t) + 31) / 32;
  }
  return words;
}

// The reference: count +1 votes per coordinate and apply the rule literally.
std::vector<std::uint32_t> NaiveVote(const std::vector<std::vector<std::uint32_t>>& votes,
                                     const TensorLayout& layout, TieRule tie_rule) {
  std::vector<std::uint32_t> out(MajorityVote::WordsFor(layout), 0u);
  const std::size_t n = votes.size();
  std::size_t first = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    for (std::size_t i = 0; i < layout.size(t); ++i) {
      std::size_t count = 0;
      for (const auto& vote : votes) count += Bit(vote, layout, t, i) ? 1u : 0u;
      const bool plus = 2 * count > n || (2 * count == n && tie_rule == TieRule::kPositive);
      if (plus) out[first + i / 32] |= std::uint32_t{1} << (i % 32);
    }
    first += (layout.size(t) + 31) / 32;
  }
  return out;
}

TEST(MajorityVoteTest, MatchesNaiveCountForOneToNineVoters) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<std::uint64_t> size_of(1, 200);
  for (std::size_t trial = 0; trial < 6; ++trial) {
    // Random tensor sizes, mostly not multiples of 32; one trial with a single tensor.
    std::vector<std::uint64_t> sizes(trial == 0 ? 1u : 1u + trial % 4u);
    for (auto& size : sizes) {
      size = size_of(rng);
      if (size % 32 == 0) ++size;
    }
    const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
    for (std::uint32_t n = 1; n <= 9; ++n) {
      for (const TieRule tie_rule : {TieRule::kPositive, TieRule::kNegative}) {
        // Capacity exactly n, and a larger one (more planes than needed).
        for (const std::uint32_t max_voters : {n, n + 7}) {
          SCOPED_TRACE(testing::Message() << "trial " << trial << " n " << n << " tie "
                                          << static_cast<int>(tie_rule) << " max " << max_voters);
          ArenaBox box(MajorityVote::StateBytes(layout, max_voters));
          MajorityVote vote;
          ASSERT_TRUE(vote.Init(box.arena, layout, max_voters, tie_rule).ok());
          std::vector<std::vector<std::uint32_t>> votes;
          for (std::uint32_t i = 0; i < n; ++i) {
            votes.push_back(RandomVote(layout, rng));
            ASSERT_TRUE(vote.AddVote(votes.back()).ok());
          }
          EXPECT_EQ(vote.voters(), n);
          std::vector<std::uint32_t> out(vote.words(), 0xDEADBEEFu);
          ASSERT_TRUE(vote.Finish(out).ok());
          ASSERT_EQ(out, NaiveVote(votes, layout, tie_rule));
        }
      }
    }
  }
}

TEST(MajorityVoteTest, TieRuleDecidesEvenSplits) {
  const TensorLayout layout = TensorLayout::Single(3).value();
  for (const TieRule tie_rule : {TieRule::kPositive, TieRule::kNegative}) {
    ArenaBox box(MajorityVote::StateBytes(layout, 4));
    MajorityVote vote;
    ASSERT_TRUE(vote.Init(box.arena, layout, 4, tie_rule).ok());
    // Coordinate 0: 2 of 4 positive (tie); 1: 3 of 4; 2: 1 of 4.
    for (const std::uint32_t word : {0b011u, 0b011u, 0b100u, 0b010u}) {
      ASSERT_TRUE(vote.AddVote(std::vector<std::uint32_t>{word}).ok());
    }
    std::vector<std::uint32_t> out(1);
    ASSERT_TRUE(vote.Finish(out).ok());
    EXPECT_EQ(out[0], tie_rule == TieRule::kPositive ? 0b011u : 0b010u);
  }
  MajorityVote defaulted;
  EXPECT_EQ(defaulted.tie_rule(), TieRule::kPositive);
}

TEST(MajorityVoteTest, ManyVotersAndStrictPadding) {
  const std::uint64_t sizes[] = {45, 96, 3};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  std::mt19937 rng(7);
  constexpr std::uint32_t kVoters = 1000;
  ArenaBox box(MajorityVote::StateBytes(layout, kVoters));
  MajorityVote vote;
  ASSERT_TRUE(vote.Init(box.arena, layout, kVoters).ok());
  std::vector<std::vector<std::uint32_t>> votes;
  for (std::uint32_t i = 0; i < kVoters; ++i) {
    // Biased coins so the counts spread over the whole range of the planes.
    votes.push_back(RandomVote(layout, rng, static_cast<double>(i % 11) / 10.0));
    // A vote with a padding bit set is malformed (45 = 32 + 13, 3 < 32) and not counted.
    std::vector<std::uint32_t> noisy = votes.back();
    noisy[1] |= std::uint32_t{1} << (13 + i % 19);
    ASSERT_EQ(vote.AddVote(noisy), Status::DataLoss());
    noisy = votes.back();
    noisy.back() |= 0x8u;
    ASSERT_EQ(vote.AddVote(noisy), Status::DataLoss());
    ASSERT_EQ(vote.voters(), i);
    ASSERT_TRUE(vote.AddVote(votes.back()).ok());
  }
  std::vector<std::uint32_t> out(vote.words());
  ASSERT_TRUE(vote.Finish(out).ok());
  EXPECT_EQ(out, NaiveVote(votes, layout, TieRule::kPositive));
  EXPECT_EQ(out[1] & 0xFFFFE000u, 0u);
  EXPECT_EQ(out.back() & 0xFFFFFFF8u, 0u);
}

// Counts of +1 votes per lane of the sign words (32 per word, padding lanes included).
std::vector<std::uint32_t> CountsOf(const std::vector<std::vector<std::uint32_t>>& votes,
                                    std::size_t words) {
  std::vector<std::uint32_t> counts(32 * words, 0);
  for (const auto& vote : votes) {
    for (std::size_t lane = 0; lane < counts.size(); ++lane) {
      counts[lane] += (vote[lane / 32] >> (lane % 32)) & 1u;
    }
  }
  return counts;
}

TEST(MajorityVoteTest, CountsAddAsTheVotesTheyCount) {
  const std::uint64_t sizes[] = {45, 96, 3};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  std::mt19937 rng(11);
  constexpr std::uint32_t kVoters = 37;
  std::vector<std::vector<std::uint32_t>> votes;
  for (std::uint32_t i = 0; i < kVoters; ++i) {
    votes.push_back(RandomVote(layout, rng, static_cast<double>(i % 7) / 6.0));
  }
  ArenaBox box(MajorityVote::StateBytes(layout, kVoters));
  MajorityVote vote;
  ASSERT_TRUE(vote.Init(box.arena, layout, kVoters).ok());
  // The first 20 as counts, the rest one by one: the same vote as all of them one by one.
  const std::vector<std::vector<std::uint32_t>> first(votes.begin(), votes.begin() + 20);
  std::vector<std::uint32_t> counts = CountsOf(first, vote.words());
  ASSERT_TRUE(vote.AddCounts(counts, 20).ok());
  for (std::size_t i = 20; i < votes.size(); ++i) ASSERT_TRUE(vote.AddVote(votes[i]).ok());
  EXPECT_EQ(vote.voters(), kVoters);
  std::vector<std::uint32_t> out(vote.words());
  ASSERT_TRUE(vote.Finish(out).ok());
  EXPECT_EQ(out, NaiveVote(votes, layout, TieRule::kPositive));
  // Refused, and nothing counted: a count above its voters, votes in a padding lane (45 = 32 +
  // 13), a wrong length, more voters than the counters hold.
  vote.Reset();
  std::vector<std::uint32_t> bad = counts;
  bad[5] = 21;
  EXPECT_EQ(vote.AddCounts(bad, 20), Status::DataLoss());
  bad = counts;
  bad[32 + 13] = 1;
  EXPECT_EQ(vote.AddCounts(bad, 20), Status::DataLoss());
  bad.pop_back();
  EXPECT_EQ(vote.AddCounts(bad, 20), Status::DataLoss());
  EXPECT_EQ(vote.AddCounts(counts, kVoters + 1), Status::ResourceExhausted());
  EXPECT_EQ(vote.voters(), 0u);
}

TEST(MajorityVoteTest, FinishIsRepeatableAndResetForgets) {
  const TensorLayout layout = TensorLayout::Single(40).value();
  ArenaBox box(MajorityVote::StateBytes(layout, 3));
  MajorityVote vote;
  ASSERT_TRUE(vote.Init(box.arena, layout, 3).ok());
  const std::vector<std::uint32_t> all = {0xFFFFFFFFu, 0xFFu};
  const std::vector<std::uint32_t> none = {0u, 0u};
  std::vector<std::uint32_t> out(2);
  ASSERT_TRUE(vote.AddVote(none).ok());
  ASSERT_TRUE(vote.Finish(out).ok());
  EXPECT_EQ(out, none);
  ASSERT_TRUE(vote.AddVote(all).ok());  // 1 of 2: a tie, +1 by default
  ASSERT_TRUE(vote.Finish(out).ok());
  EXPECT_EQ(out, all);
  ASSERT_TRUE(vote.AddVote(none).ok());
  ASSERT_TRUE(vote.Finish(out).ok());
  EXPECT_EQ(out, none);
  EXPECT_EQ(vote.AddVote(all), Status::ResourceExhausted());
  vote.Reset();
  EXPECT_EQ(vote.voters(), 0u);
  EXPECT_EQ(vote.Finish(out), Status::FailedPrecondition());
  ASSERT_TRUE(vote.AddVote(all).ok());
  ASSERT_TRUE(vote.Finish(out).ok());
  EXPECT_EQ(out, all);
}

// Workers' sign payloads from SignCodec go straight into the vote; V is the sign of the sum of
// the workers' signs, sign(0) = +1.
TEST(MajorityVoteTest, CountsSignCodecPayloads) {
  const std::uint64_t sizes[] = {50, 7};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  const std::size_t d = layout.dimension();
  const SignParams codec{.scale = SignScale::kUnit};
  const PayloadShape shape = EncodedShape(codec, layout).value();
  ASSERT_EQ(shape.words, MajorityVote::WordsFor(layout));
  constexpr std::uint32_t kWorkers = 5;
  ArenaBox box(MajorityVote::StateBytes(layout, kWorkers));
  MajorityVote vote;
  ASSERT_TRUE(vote.Init(box.arena, layout, kWorkers).ok());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<int> sign_sum(d, 0);
  for (std::uint32_t i = 0; i < kWorkers; ++i) {
    std::vector<float> momentum(d);
    for (float& m : momentum) m = normal(rng);
    momentum[i] = 0.0f;
    std::vector<std::uint32_t> words(shape.words);
    std::vector<float> scales(shape.scales);
    ASSERT_TRUE(SignCodec::Encode(codec, layout, {}, momentum, {{}, {}, words, scales}, {}).ok());
    ASSERT_TRUE(vote.AddVote(words).ok());
    for (std::size_t j = 0; j < d; ++j) sign_sum[j] += momentum[j] < 0.0f ? -1 : 1;
  }
  std::vector<std::uint32_t> out(shape.words);
  ASSERT_TRUE(vote.Finish(out).ok());
  for (std::size_t t = 0, j = 0; t < layout.tensor_count(); ++t) {
    for (std::size_t i = 0; i < layout.size(t); ++i, ++j) {
      EXPECT_EQ(Bit(out, layout, t, i), sign_sum[j] > 0) << j;
    }
  }
}

// Experiment D of docs/algorithms.md in miniature: workers whose signs are right with probability
// 0.6 per coordinate; the vote's per-coordinate error falls with the number of workers, and a
// minority of blind adversaries (negated signs) does not break it.
TEST(MajorityVoteTest, VoteErrorFallsWithWorkersAndToleratesAdversaries) {
  const TensorLayout layout = TensorLayout::Single(20000).value();
  std::mt19937 rng(11);
  const std::vector<std::uint32_t> truth = RandomVote(layout, rng);
  auto noisy_copy = [&](bool negate) {
    std::vector<std::uint32_t> words = RandomVote(layout, rng, 0.4);  // 1 = flip
    for (std::size_t w = 0; w < words.size(); ++w) {
      words[w] ^= truth[w];
      if (negate) words[w] = ~words[w];
    }
    words.back() &= (std::uint32_t{1} << (20000 % 32)) - 1u;
    return words;
  };
  std::vector<double> error_rates;
  for (const std::uint32_t workers : {1u, 3u, 5u, 9u}) {
    ArenaBox box(MajorityVote::StateBytes(layout, workers));
    MajorityVote vote;
    ASSERT_TRUE(vote.Init(box.arena, layout, workers).ok());
    for (std::uint32_t i = 0; i < workers; ++i) ASSERT_TRUE(vote.AddVote(noisy_copy(false)).ok());
    std::vector<std::uint32_t> out(vote.words());
    ASSERT_TRUE(vote.Finish(out).ok());
    const Result<std::size_t> errors = CountDisagreements(out, truth);
    ASSERT_TRUE(errors.ok());
    error_rates.push_back(static_cast<double>(errors.value()) / 20000.0);
  }
  EXPECT_NEAR(error_rates[0], 0.4, 0.02);
  for (std::size_t i = 1; i < error_rates.size(); ++i) {
    EXPECT_LT(error_rates[i], error_rates[i - 1]) << i;
  }
  // 9 workers, 3 of them adversarial: still better than a coin.
  ArenaBox box(MajorityVote::StateBytes(layout, 9));
  MajorityVote vote;
  ASSERT_TRUE(vote.Init(box.arena, layout, 9).ok());
  for (std::uint32_t i = 0; i < 9; ++i) ASSERT_TRUE(vote.AddVote(noisy_copy(i < 3)).ok());
  std::vector<std::uint32_t> out(vote.words());
  ASSERT_TRUE(vote.Finish(out).ok());
  EXPECT_LT(static_cast<double>(CountDisagreements(out, truth).value()) / 20000.0, 0.45);
}

TEST(MajorityVoteTest, CountDisagreementsMatchesNaive) {
  std::mt19937 rng(5);
  for (const std::size_t words : {std::size_t{0}, std::size_t{1}, std::size_t{17}}) {
    std::vector<std::uint32_t> a(words);
    std::vector<std::uint32_t> b(words);
    for (auto& w : a) w = static_cast<std::uint32_t>(rng());
    for (auto& w : b) w = static_cast<std::uint32_t>(rng());
    std::size_t naive = 0;
    for (std::size_t w = 0; w < words; ++w) {
      for (int bit = 0; bit < 32; ++bit) naive += ((a[w] ^ b[w]) >> bit) & 1u;
    }
    const Result<std::size_t> count = CountDisagreements(a, b);
    ASSERT_TRUE(count.ok());
    EXPECT_EQ(count.value(), naive);
    EXPECT_EQ(CountDisagreements(a, a).value(), 0u);
  }
  const std::vector<std::uint32_t> one = {1u};
  EXPECT_EQ(CountDisagreements(one, {}).status(), Status::InvalidArgument());
}

TEST(MajorityVoteTest, StateBytesMatchesArenaUsage) {
  const std::uint64_t sizes[] = {33, 1, 64};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  EXPECT_EQ(MajorityVote::WordsFor(layout), 2u + 1u + 2u);
  for (const std::uint32_t max_voters : {1u, 2u, 3u, 8u, 9u, 255u, 256u, kMaxVoters}) {
    const std::size_t bytes = MajorityVote::StateBytes(layout, max_voters);
    EXPECT_EQ(bytes, ArenaBytesFor<std::uint32_t>(
                         5u * static_cast<std::size_t>(std::bit_width(max_voters))));
    ArenaBox box(bytes);
    MajorityVote vote;
    ASSERT_TRUE(vote.Init(box.arena, layout, max_voters).ok());
    EXPECT_EQ(box.arena.used_bytes(), bytes);
  }
  // 9 voters over 1000 coordinates: 4 bits per coordinate.
  static_assert(MajorityVote::StateBytes(TensorLayout::Single(1024).value(), 9) == 1024 / 2);
}

TEST(MajorityVoteTest, RejectsBadArguments) {
  const TensorLayout layout = TensorLayout::Single(40).value();
  MajorityVote vote;
  std::vector<std::uint32_t> words(2, 0u);
  EXPECT_EQ(vote.AddVote(words), Status::FailedPrecondition());
  EXPECT_EQ(vote.Finish(words), Status::FailedPrecondition());
  {
    ArenaBox box(MajorityVote::StateBytes(layout, 5) - 1);
    EXPECT_EQ(vote.Init(box.arena, layout, 0), Status::InvalidArgument());
    EXPECT_EQ(vote.Init(box.arena, layout, kMaxVoters + 1), Status::InvalidArgument());
    EXPECT_EQ(vote.Init(box.arena, TensorLayout(), 5), Status::InvalidArgument());
    EXPECT_EQ(vote.Init(box.arena, layout, 5, static_cast<TieRule>(2)), Status::InvalidArgument());
    EXPECT_EQ(vote.Init(box.arena, layout, 5), Status::ResourceExhausted());
    EXPECT_EQ(box.arena.used_bytes(), 0u);
    box.arena.Seal();
    EXPECT_EQ(vote.Init(box.arena, layout, 5), Status::FailedPrecondition());
  }
  EXPECT_EQ(MajorityVote::StateBytes(layout, 0), 0u);
  ArenaBox box(MajorityVote::StateBytes(layout, 5));
  ASSERT_TRUE(vote.Init(box.arena, layout, 5).ok());
  EXPECT_EQ(vote.AddVote(std::span(words).first(1)), Status::DataLoss());
  EXPECT_EQ(vote.voters(), 0u);
  EXPECT_EQ(vote.Finish(words), Status::FailedPrecondition());
  ASSERT_TRUE(vote.AddVote(words).ok());
  std::vector<std::uint32_t> too_long(3);
  EXPECT_EQ(vote.Finish(too_long), Status::InvalidArgument());
}

}  // namespace
}  // namespace edgesgd
