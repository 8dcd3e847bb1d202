// CHOCO-SGD in GossipPeerSession (docs/algorithms.md §6): the public copies agree bit for bit at
// every holder with every codec CHOCO takes; the identity codec with gamma = 1 is D-PSGD with the
// gradient step before the mix; deltas apply in round order (a late one still does, a gap is
// repaired from the neighbour's own copy); bad frames are counted; the codecs and consensus
// steps CHOCO cannot use are refused; a hostile network or a crashed neighbour neither crashes
// nor stalls a CHOCO or a BEER peer; CHOCO with top_k reaches what dense D-PSGD reaches, and
// without public copies its averaging stalls.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "protocol/gossip_network.h"

namespace edgesgd::protocol {
namespace {

using namespace gossip_test;  // NOLINT: the shared driver

// Every codec CHOCO takes, with parameters that keep something of TestLayout's tensors (6 and 4
// coordinates).
std::vector<std::pair<const char*, CodecParams>> ChocoCodecs() {
  return {
      {"identity", IdentityParams{}},
      {"top_k", TopKParams{.k_ratio = 0.3f}},
      {"rand_k", RandKParams{.k_ratio = 0.5f}},
      {"random_block", RandomBlockParams{.block_ratio = 2}},
      {"sign", SignParams{}},
      {"qsgd", QsgdParams{.levels = 127, .bucket = 4}},
      {"qsgd_dq", QsgdParams{.levels = 127,
                             .bucket = 4,
                             .schedule = QuantScheduleKind::kDq,
                             .bits_min = 4,
                             .bits_max = 8}},
      {"natural", NaturalParams{}},
      {"fp16", Fp16Params{}},
  };
}

GossipConfig& ConfigureChoco(GossipNetwork& network, const CodecParams& codec, float gamma) {
  return ConfigureCompressed(network, GossipAlgorithm::kChoco, codec, gamma);
}

// ---- The copies and the update rule ----

TEST(ChocoTest, PublicCopiesAgreeBitForBitAtEveryHolderWithEveryCodec) {
  constexpr std::uint32_t kRounds = 40;
  constexpr PeerId kPeers = 6;
  for (const auto& [name, codec] : ChocoCodecs()) {
    SCOPED_TRACE(name);
    CompressedRing network(GossipAlgorithm::kChoco, codec, kPeers, kRounds);
    ASSERT_TRUE(network.Run(kRounds * kDeadline));
    ExpectCopiesFollowed(network, kPeers, kRounds, 2, 0);
  }
}

// x_{k+1} = x^{k+1/2} + sum_j W_ij (x̂_j - x̂_i) with x̂ = x^{k+1/2} is W (x_k - lr g_k): D-PSGD
// with the step before the mix. kDpsgd mixes first (x_{k+1} = W x_k - lr g_k), so the
// equivalence is checked against a reference loop of the step-first order, not against kDpsgd —
// and kDpsgd is shown to differ from it. Not bit for bit: x̂_i + (x - x̂_i) need not be x in float.
TEST(ChocoTest, IdentityWithGammaOneIsDpsgdWithTheStepBeforeTheMix) {
  constexpr std::uint32_t kRounds = 40;
  constexpr float kLr = 0.1f;
  ForEachReferenceTopology([&](const Topology& topology) {
    const std::uint32_t n = topology.peers;
    IdentityRuns runs(topology, GossipAlgorithm::kChoco, GossipAlgorithm::kDpsgd, kRounds, kLr);
    GossipNetwork& choco = runs.compressed;
    GossipNetwork& dpsgd = runs.reference;

    std::vector<std::vector<double>> x;
    for (PeerId id = 1; id <= n; ++id) {
      x.emplace_back(choco.peer(id).initial.begin(), choco.peer(id).initial.end());
    }
    const std::size_t d = x.front().size();
    for (std::uint32_t t = 0; t < kRounds; ++t) {
      std::vector<std::vector<double>> half = x;
      for (PeerId i = 1; i <= n; ++i) {
        for (std::size_t k = 0; k < d; ++k) {
          half[i - 1][k] -= static_cast<double>(kLr) *
                            (x[i - 1][k] - static_cast<double>(choco.peer(i).target[k]));
        }
      }
      for (PeerId i = 1; i <= n; ++i) {
        for (std::size_t k = 0; k < d; ++k) {
          double mixed = 0.0;
          for (PeerId j = 1; j <= n; ++j) {
            mixed +=
                static_cast<double>(MixingWeight(topology, MixingRule::kMetropolisHastings, i, j)) *
                half[j - 1][k];
          }
          x[i - 1][k] = mixed;
        }
      }
    }
    ASSERT_TRUE(choco.Run(kRounds * kDeadline));
    ASSERT_TRUE(dpsgd.Run(kRounds * kDeadline));
    double dpsgd_gap = 0.0;
    for (PeerId id = 1; id <= n; ++id) {
      const std::span<const float> model = choco.session(id).model();
      const std::span<const float> mixed_first = dpsgd.session(id).model();
      for (std::size_t k = 0; k < d; ++k) {
        EXPECT_NEAR(model[k], x[id - 1][k], 1e-4) << "peer " << id << " coordinate " << k;
        dpsgd_gap =
            std::max(dpsgd_gap, std::abs(static_cast<double>(mixed_first[k]) - x[id - 1][k]));
      }
    }
    if (n > 2) {  // on two peers W(x - lr g) and Wx - lr g differ less
      EXPECT_GT(dpsgd_gap, 1e-3);
    }
  });
}

// Ring of 8, quadratic targets: the peers' mean follows SGD on the mean objective exactly (W is
// symmetric and every term W_ij (x^_j - x^_i) has its mirror), so CHOCO with top_k (one or two
// coordinates of each tensor per round) brings the mean to the optimum as dense D-PSGD does, and
// the peers to agreement; single models keep a bias from the heterogeneous targets, larger than
// D-PSGD's with the weaker mixing. (The bytes CHOCO saves show on real models:
// tests/cli/gossip_choco.cmake.)
TEST(ChocoTest, TopKReachesTheOptimumDenseDpsgdReaches) {
  const auto mean_distance = [](GossipNetwork& network) {
    const std::vector<float> optimum = network.MeanTarget();
    const std::vector<std::vector<float>> models = network.Models();
    double distance = 0.0;
    for (std::size_t i = 0; i < optimum.size(); ++i) {
      double mean = 0.0;
      for (const std::vector<float>& x : models) mean += static_cast<double>(x[i]);
      const double diff =
          mean / static_cast<double>(models.size()) - static_cast<double>(optimum[i]);
      distance += diff * diff;
    }
    return distance;
  };
  GossipNetwork dense({TopologyKind::kRing, 8}, 300, 0.05f);
  dense.InitAll();
  ASSERT_TRUE(dense.Run(300 * kDeadline));
  EXPECT_LT(mean_distance(dense), 1e-6);

  constexpr std::uint32_t kRounds = 1200;
  GossipNetwork choco({TopologyKind::kRing, 8}, kRounds, 0.05f);
  ConfigureChoco(choco, TopKParams{.k_ratio = 0.3f}, 0.3f);
  choco.InitAll();
  const double initial_consensus = ConsensusDistance(choco.Models());
  ASSERT_TRUE(choco.Run(kRounds * kDeadline));
  EXPECT_LT(mean_distance(choco), 1e-6);
  EXPECT_LT(ConsensusDistance(choco.Models()), initial_consensus / 100.0);
}

// ---- Frames fed by hand ----

class ChocoSessionTest : public CompressedSessionTest<GossipAlgorithm::kChoco> {
 protected:
  static FrameBytes Delta(PeerId sender, std::uint32_t round, std::array<std::uint32_t, 3> indices,
                          std::array<float, 3> values,
                          wire::GossipVector vector = wire::GossipVector::kModelDelta) {
    return TopKDelta(sender, round, indices, values, vector);
  }
};

TEST_F(ChocoSessionTest, SendsOneCompressedDeltaAndAppliesItToItsOwnCopy) {
  EXPECT_EQ(arena_->used_bytes(), GossipPeerSession::ArenaBytes(config_));
  EXPECT_EQ(GossipPeerSession::ModelVectors(config_), 3u + 2u + 1u);
  session_.Start(0);
  const std::vector<Sent> frames = PollAll();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].address, frames[1].address);  // the same bytes to both
  EXPECT_LE(frames[0].frame.size, GossipPeerSession::MaxFrameBytes(config_));
  const FrameBytes& copy = frames[0].frame;
  const Result<wire::FrameView> view = wire::DecodeFrame(copy.bytes());
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.value().message.gossip.vector, wire::GossipVector::kModelDelta);
  EXPECT_EQ(view.value().payload.codec, kCodecId<TopKCodec>);
  // x^{1/2} = 3 - 0.5 * (3 - 1) = 2 everywhere, so q = top_k(2 - 0): the lowest indices win the
  // ties, and the own copy holds exactly what was sent.
  const std::vector<float> expected{2, 2, 0, 0, 0, 0, 2, 0, 0, 0};
  EXPECT_EQ(Copy(1), expected);
  EXPECT_EQ(session_.public_copy_rounds(1), 1u);
  EXPECT_EQ(Copy(2), std::vector<float>(10, 0.0f));
  EXPECT_TRUE(session_.public_copy(3).empty());  // not a neighbour
}

TEST_F(ChocoSessionTest, AppliesDeltasInRoundOrderLateOnesTooAndCountsBadFrames) {
  StartAndDrain();
  const std::vector<float> own = Copy(1);

  Feed(2, Delta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(session_.heard_count(), 1u);
  const std::vector<float> copy_of_2{0, 1, 0, 0, 2, 0, 0, 3, 0, 0};
  EXPECT_EQ(Copy(2), copy_of_2);

  // Rejected, with neighbour 4's copy untouched: a duplicate, a gap, a round past the run, a
  // vector CHOCO does not send, another codec, and payloads top_k's checks refuse.
  Feed(2, Delta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kDuplicate), 1u);
  Feed(4, Delta(4, 2, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kOutOfOrder), 1u);
  Feed(4, Delta(4, kRounds, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kFuture), 1u);
  Feed(4, Delta(4, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}, wire::GossipVector::kModel));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongExchange), 1u);
  const std::vector<float> dense(TestLayout().dimension(), 1.0f);
  Feed(4, GossipFrame(4, 0, dense, {0, 0, wire::GossipVector::kModelDelta}));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongCodec), 1u);
  Feed(4, Delta(4, 0, {0, 1, 6}, {1.0f, std::nanf(""), 1.0f}));
  Feed(4, Delta(4, 0, {0, 1, 11}, {1.0f, 1.0f, 1.0f}));
  Feed(4, Delta(4, 0, {1, 0, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kBadPayload), 3u);
  EXPECT_EQ(Copy(4), std::vector<float>(10, 0.0f));
  EXPECT_EQ(session_.public_copy_rounds(4), 0u);
  EXPECT_EQ(session_.counters().total_rejected(), 8u);

  // Round 0 closes at the deadline without neighbour 4: its term is left out (its weight stays on
  // the diagonal). x = x^{1/2} + gamma * W_12 (x̂_2 - x̂_1).
  session_.OnTimer(kDeadline);
  ASSERT_EQ(session_.round(), 1u);
  const float w = config_.mixing.weights[0];
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_FLOAT_EQ(session_.model()[i], 2.0f + kGamma * (w * (copy_of_2[i] - own[i]))) << i;
  }
  EXPECT_EQ(session_.counters().neighbours_missed, 1u);
  PollAll();

  // Neighbour 4's round-0 delta arrives late: applied to its copy only, which is whole again.
  Feed(4, Delta(4, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}), kDeadline + 1);
  EXPECT_EQ(session_.counters().late_deltas, 1u);
  EXPECT_EQ(session_.public_copy_rounds(4), 1u);
  EXPECT_EQ(session_.heard_count(), 0u);
  // Its round-1 delta and neighbour 2's close round 1 with both heard.
  Feed(4, Delta(4, 1, {0, 2, 9}, {1.0f, 1.0f, 1.0f}), kDeadline + 2);
  EXPECT_EQ(session_.heard_count(), 1u);
  Feed(2, Delta(2, 1, {0, 2, 9}, {1.0f, 1.0f, 1.0f}), kDeadline + 3);
  ASSERT_EQ(session_.round(), 2u);
  EXPECT_EQ(session_.counters().neighbours_missed, 1u);
  const std::vector<float> copy_of_4{2, 1, 1, 0, 0, 0, 1, 0, 0, 1};
  EXPECT_EQ(Copy(4), copy_of_4);
  EXPECT_EQ(session_.counters().models_accepted, 4u);
  EXPECT_EQ(session_.counters().total_rejected(), 8u);
  for (std::size_t r = 0; r < kGossipRejectReasonCount; ++r) {
    EXPECT_STRNE(GossipRejectReasonName(static_cast<GossipRejectReason>(r)), "unknown");
  }
  EXPECT_STREQ(GossipRejectReasonName(GossipRejectReason::kOutOfOrder), "out_of_order");
}

TEST_F(ChocoSessionTest, ANeighbourAheadIsCountedInWhenTheRoundStarts) {
  StartAndDrain();
  Feed(2, Delta(2, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  Feed(2, Delta(2, 1, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));  // neighbour 2 already in round 1
  EXPECT_EQ(session_.counters().models_buffered, 1u);
  EXPECT_EQ(session_.public_copy_rounds(2), 2u);
  Feed(4, Delta(4, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  ASSERT_EQ(session_.round(), 1u);
  EXPECT_EQ(session_.heard_count(), 1u);  // neighbour 2, from its copy
  Feed(4, Delta(4, 1, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(session_.round(), 2u);
  EXPECT_EQ(session_.counters().neighbours_missed, 0u);
}

// Neighbours four rounds ahead complete this peer's rounds from their copies alone; a call still
// starts at most two rounds (the builders hold two rounds of frames), and the next is due at once.
TEST_F(ChocoSessionTest, NeighboursFarAheadAreCaughtUpTwoRoundsPerCall) {
  for (std::uint32_t round = 0; round < 4; ++round) {
    Feed(2, Delta(2, round, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
    Feed(4, Delta(4, round, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  }
  std::vector<std::uint32_t> sent_rounds;
  const auto poll_rounds = [&] {
    for (const Sent& out : PollAll()) {
      const FrameBytes& copy = out.frame;
      const Result<wire::FrameView> view = wire::DecodeFrame(copy.bytes());
      ASSERT_TRUE(view.ok());
      if (out.to == 2) sent_rounds.push_back(view.value().header.round);
    }
  };
  session_.Start(0);
  EXPECT_EQ(session_.round(), 1u);
  EXPECT_EQ(session_.NextWakeup(), TimeNs{0});
  poll_rounds();
  session_.OnTimer(0);
  EXPECT_EQ(session_.round(), 3u);
  poll_rounds();
  session_.OnTimer(0);
  EXPECT_EQ(session_.round(), 4u);  // neighbours have not sent round 4 yet
  EXPECT_EQ(session_.NextWakeup(), kDeadline);
  poll_rounds();
  EXPECT_EQ(sent_rounds, (std::vector<std::uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(session_.counters().neighbours_missed, 0u);
  EXPECT_EQ(session_.counters().deadline_closes, 0u);
}

// ---- Configurations ----

TEST_F(ChocoSessionTest, AGapIsRepairedWithTheNeighboursOwnCopy) {
  StartAndDrain();
  // Neighbour 4's round-0 delta was lost: its round-1 delta cannot apply, and peer 1 asks for
  // neighbour 4's copy — once per round, however many deltas arrive meanwhile.
  for (const std::uint32_t round : {1u, 2u})
    Feed(4, Delta(4, round, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  ASSERT_NO_FATAL_FAILURE(ExpectGapRequest(4, 2, 1, 0, 0));

  // Bad copies change nothing: another codec, the wrong size, a non-finite value, more rounds
  // than the run has.
  std::vector<float> held(TestLayout().dimension());
  for (std::size_t i = 0; i < held.size(); ++i) held[i] = 0.25f * static_cast<float>(i);
  const wire::GossipInfo copy_info{0, 0, wire::GossipVector::kModelCopy};
  Feed(4, GossipFrame(4, 2, held, copy_info, Fp16Params{}));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongCodec), 1u);
  Feed(4, GossipFrame(4, 2, std::span<const float>(held).first(9), copy_info));
  std::vector<float> not_finite = held;
  not_finite[3] = std::numeric_limits<float>::infinity();
  Feed(4, GossipFrame(4, 2, not_finite, copy_info));
  EXPECT_EQ(Rejected(GossipRejectReason::kBadPayload), 2u);
  Feed(4, GossipFrame(4, kRounds + 1, held, copy_info));
  EXPECT_EQ(Rejected(GossipRejectReason::kFuture), 1u);
  EXPECT_EQ(session_.public_copy_rounds(4), 0u);
  EXPECT_EQ(session_.heard_count(), 0u);

  // The copy holding rounds 0 and 1 replaces peer 1's and counts neighbour 4 into round 0.
  Feed(4, GossipFrame(4, 2, held, copy_info));
  EXPECT_EQ(Copy(4), held);
  EXPECT_EQ(session_.public_copy_rounds(4), 2u);
  EXPECT_EQ(session_.counters().copies_applied, 1u);
  EXPECT_EQ(session_.heard_count(), 1u);
  // Delta 2 follows it; an older copy is stale.
  Feed(4, Delta(4, 2, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(session_.public_copy_rounds(4), 3u);
  std::vector<float> after = held;
  after[0] += 1.0f;
  after[1] += 1.0f;
  after[6] += 1.0f;
  EXPECT_EQ(Copy(4), after);
  Feed(4, GossipFrame(4, 2, held, copy_info));
  EXPECT_EQ(Rejected(GossipRejectReason::kStale), 1u);
  EXPECT_EQ(Copy(4), after);
  EXPECT_TRUE(PollAll().empty());  // nothing more to ask for

  // Still missing in a later round: asked again.
  Feed(2, Delta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  ASSERT_EQ(session_.round(), 1u);
  PollAll();
  Feed(4, Delta(4, 5, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  ASSERT_NO_FATAL_FAILURE(ExpectGapRequest(4, 3, 2, 0, 1));
}

TEST_F(ChocoSessionTest, AnswersACopyRequestWithItsOwnCopyAheadOfItsNextDelta) {
  StartAndDrain();
  const std::vector<float> own = Copy(1);
  const std::vector<float> one{0.0f};
  const wire::GossipInfo request{0, 0, wire::GossipVector::kCopyRequest};
  Feed(2, GossipFrame(2, 0, std::vector<float>{0.0f, 0.0f}, request));
  EXPECT_EQ(Rejected(GossipRejectReason::kBadPayload), 1u);
  EXPECT_TRUE(PollAll().empty());

  // Asked, and in the same call sequence round 0 closes and round 1's delta is queued: the copy
  // (one delta, before round 1's) leaves first, so the delta that follows it applies.
  Feed(2, GossipFrame(2, 0, one, request));
  Feed(2, Delta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  Feed(4, Delta(4, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  std::vector<Sent> frames;
  ASSERT_NO_FATAL_FAILURE(PollCopyFirst(1, 2, 3, frames));
  const wire::FrameView copy = frames[0].view();
  EXPECT_EQ(copy.header.round, 1u);
  EXPECT_EQ(copy.payload.codec, CodecIdOf(IdentityParams{}));
  EXPECT_TRUE(std::equal(copy.payload.view.values.begin(), copy.payload.view.values.end(),
                         own.begin(), own.end()));
  EXPECT_EQ(frames[1].view().message.gossip.vector, wire::GossipVector::kModelDelta);
  EXPECT_EQ(frames[1].view().header.round, 1u);
  EXPECT_EQ(session_.counters().copies_sent, 1u);
}

TEST(ChocoConfigTest, RefusesWhatCannotTrackPublicCopies) {
  for (const CodecParams& codec :
       {CodecParams{RegTopKParams{}}, CodecParams{SignParams{SignScale::kUnit}},
        CodecParams{RandKParams{.k_ratio = 0.1f, .scaling = RandKScaling::kUnbiased}},
        CodecParams{QsgdParams{.levels = 7, .bucket = 64}},
        CodecParams{QsgdParams{
            .levels = 127, .bucket = 64, .schedule = QuantScheduleKind::kDq, .bits_min = 4}}}) {
    SCOPED_TRACE(std::string(CodecName(codec)));
    const Status check = CheckChocoCodec(codec);
    EXPECT_EQ(check, Status::InvalidArgument());
    EXPECT_NE(std::string(check.reason()).find(" use "), std::string::npos) << check.reason();
  }
  for (const auto& [name, codec] : ChocoCodecs()) {
    EXPECT_TRUE(CheckChocoCodec(codec).ok()) << name;
    // Every codec CHOCO accepts declares its step: none falls back to a silent default.
    const Result<float> gamma = DefaultConsensusStep(codec);
    ASSERT_TRUE(gamma.ok()) << name;
    EXPECT_GT(gamma.value(), 0.0f) << name;
    EXPECT_LE(gamma.value(), 1.0f) << name;
  }
  EXPECT_EQ(DefaultConsensusStep(IdentityParams{}).value(), 1.0f);
  EXPECT_EQ(DefaultConsensusStep(TopKParams{}).value(), 0.05f);
  EXPECT_EQ(DefaultConsensusStep(RegTopKParams{}).status().code(), StatusCode::kInvalidArgument);

  GossipConfig config;
  config.mixing =
      MakeMixingRow({TopologyKind::kRing, 4}, MixingRule::kMetropolisHastings, 1).value();
  config.layout = TestLayout();
  config.algorithm = GossipAlgorithm::kChoco;
  config.codec = TopKParams{};
  config.consensus_step = 0.05f;
  EXPECT_TRUE(ValidateGossipConfig(config).ok());
  const auto expect_invalid = [](const GossipConfig& bad) {
    const Status check = ValidateGossipConfig(bad);
    EXPECT_EQ(check, Status::InvalidArgument());
  };
  for (const float gamma : {0.0f, -0.1f, 1.5f, std::nanf("")}) {
    GossipConfig bad = config;
    bad.consensus_step = gamma;
    expect_invalid(bad);
  }
  GossipConfig bad = config;
  bad.codec = TopKParams{.k_ratio = 2.0f};
  expect_invalid(bad);
  bad = config;
  bad.codec = RegTopKParams{};
  expect_invalid(bad);
  bad = config;
  bad.gossip_steps = 2;
  expect_invalid(bad);
  // The dense algorithms send identity models and have no consensus step.
  bad = config;
  bad.algorithm = GossipAlgorithm::kDpsgd;
  expect_invalid(bad);
  bad.codec = IdentityParams{};
  expect_invalid(bad);
  bad.consensus_step = 1.0f;
  EXPECT_TRUE(ValidateGossipConfig(bad).ok());
  bad.public_copies = false;  // CHOCO's alone
  expect_invalid(bad);
  EXPECT_STREQ(GossipAlgorithmName(GossipAlgorithm::kChoco), "choco");

  // Init needs a registry that holds the codec, and takes exactly ArenaBytes.
  const std::vector<float> initial(TestLayout().dimension(), 0.0f);
  std::vector<float> target(TestLayout().dimension(), 0.0f);
  GossipOptions options;
  options.gradient = &QuadraticGradient;
  options.user = &target;
  options.initial_model = initial;
  config.phase_batches = 2;
  std::vector<std::byte> storage(GossipPeerSession::ArenaBytes(config) + kArenaAlignment);
  {
    GossipPeerSession session;
    Arena arena(storage);
    EXPECT_EQ(session.Init(arena, config, options), Status::InvalidArgument());
    static constexpr std::array<CodecOps, 1> kSignOnly = MakeCodecOps<SignCodec>();
    const CodecRegistry sign_only(kSignOnly);
    options.codecs = &sign_only;
    EXPECT_EQ(session.Init(arena, config, options), Status::InvalidArgument());
    EXPECT_EQ(arena.used_bytes(), 0u);
  }
  options.codecs = &AllCodecs();
  // BEER takes the same codecs, with twice the copies and builders.
  for (const GossipAlgorithm algorithm : {GossipAlgorithm::kChoco, GossipAlgorithm::kBeer}) {
    config.algorithm = algorithm;
    for (const auto& [name, codec] : ChocoCodecs()) {
      SCOPED_TRACE(::testing::Message() << GossipAlgorithmName(algorithm) << " " << name);
      config.codec = codec;
      storage.assign(GossipPeerSession::ArenaBytes(config) + kArenaAlignment, std::byte{0});
      GossipPeerSession session;
      Arena arena(storage);
      ASSERT_TRUE(session.Init(arena, config, options).ok());
      EXPECT_EQ(arena.used_bytes(), GossipPeerSession::ArenaBytes(config));
      // Its own frames, or the dense copy it answers a CopyRequest with.
      EXPECT_EQ(GossipPeerSession::MaxFrameBytes(config),
                std::max(wire::MaxFrameBytes(codec, TestLayout()),
                         wire::MaxFrameBytes(IdentityParams{}, TestLayout())));
    }
  }
}

// ---- Faults ----

// CHOCO and BEER alike.
class CompressedGossipFaultTest : public ::testing::TestWithParam<GossipAlgorithm> {};

TEST_P(CompressedGossipFaultTest, FuzzedNetworkNeverCrashesOrStalls) {
  constexpr std::uint32_t kRounds = 30;
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    GossipNetwork network({TopologyKind::kRing, 5}, kRounds, 0.05f, 5.0f, seed);
    ConfigureCompressed(network, GetParam(),
                        seed % 2 == 0 ? CodecParams{TopKParams{.k_ratio = 0.3f}}
                                      : CodecParams{QsgdParams{.levels = 127, .bucket = 4}},
                        0.3f);
    network.InitAll();
    ExpectFinishesUnderFuzzing(network, 5, kRounds, 10 * kRounds * kDeadline);
  }
}

TEST_P(CompressedGossipFaultTest, CrashedNeighbourIsNotWaitedForAndTheOtherCopiesStayIdentical) {
  constexpr std::uint32_t kRounds = 40;
  GossipNetwork network({TopologyKind::kRing, 6}, kRounds, 0.05f);
  ConfigureCompressed(network, GetParam(), TopKParams{.k_ratio = 0.3f}, 0.3f);
  network.InitAll();
  const bool& crashed = network.CrashWhenPeerOneReaches(10, 4);
  ASSERT_TRUE(network.Run(kRounds * kDeadline / 4));
  ASSERT_TRUE(crashed);
  const std::size_t vectors = TracksGradients(GetParam()) ? 2 : 1;
  for (const PeerId id : {3u, 5u}) {
    const GossipPeerSession& session = network.session(id);
    EXPECT_TRUE(session.Finished());
    EXPECT_TRUE(session.status().ok());
    EXPECT_EQ(session.counters().neighbours_lost, 1u);
    EXPECT_EQ(session.counters().deadline_closes, 0u);
    for (std::size_t vector = 0; vector < vectors; ++vector) {
      EXPECT_LT(session.public_copy_rounds(4, vector), 13u);  // frozen where peer 4 stopped
    }
  }
  for (const PeerId id : {1u, 2u, 6u}) ExpectCopiesAgree(network, id, kRounds);
}

INSTANTIATE_TEST_SUITE_P(ChocoAndBeer, CompressedGossipFaultTest,
                         ::testing::Values(GossipAlgorithm::kChoco, GossipAlgorithm::kBeer),
                         [](const ::testing::TestParamInfo<GossipAlgorithm>& param) {
                           return std::string(GossipAlgorithmName(param.param));
                         });

// Frames lost before a link is up and in mid-run, and a lost CopyRequest: every holder repairs its
// copy from the owner's and all copies agree bit for bit at the end.
TEST(ChocoTest, LostDeltasAreRepairedAndTheCopiesAgreeAgain) {
  constexpr std::uint32_t kRounds = 40;
  constexpr PeerId kPeers = 6;
  CompressedRing network(GossipAlgorithm::kChoco, TopKParams{.k_ratio = 0.3f}, kPeers, kRounds);
  int requests_dropped = 0;
  network.mutate = [&](PeerId from, PeerId to, FrameBytes& frame, std::mt19937&) {
    const wire::FrameView view = wire::DecodeFrame(frame.bytes()).value();
    const wire::GossipVector vector = view.message.gossip.vector;
    const std::uint32_t round = view.header.round;
    const bool delta = vector == wire::GossipVector::kModelDelta;
    if (delta && from == 1 && to == 2 && round <= 2) return 0;  // the link is not up yet
    if (delta && from == 3 && to == 4 && round >= 10 && round <= 12) return 0;
    if (vector == wire::GossipVector::kCopyRequest && from == 4 && requests_dropped == 0) {
      ++requests_dropped;
      return 0;
    }
    return 1;
  };
  ASSERT_TRUE(network.Run(4 * kRounds * kDeadline));
  EXPECT_EQ(requests_dropped, 1);
  for (PeerId id = 1; id <= kPeers; ++id) {
    EXPECT_TRUE(network.session(id).Finished());
    EXPECT_TRUE(network.session(id).status().ok());
    ExpectCopiesAgree(network, id, kRounds);
  }
  const GossipCounters& second = network.session(2).counters();
  EXPECT_GE(second.rejected_for(GossipRejectReason::kOutOfOrder), 1u);
  EXPECT_EQ(second.copies_applied, 1u);
  const GossipCounters& fourth = network.session(4).counters();
  EXPECT_EQ(fourth.copies_applied, 1u);
  EXPECT_GE(fourth.copy_requests_sent, 2u);  // the first was lost
  EXPECT_EQ(network.session(1).counters().copies_sent, 1u);
  EXPECT_EQ(network.session(3).counters().copies_sent, 1u);
}

// Without public copies (the naive compressed gossip CHOCO improves on) peers exchange top_k of
// their models themselves: the coordinates top_k leaves out are rarely mixed, so averaging
// (lr = 0: CHOCO-Gossip) stalls far from agreement, where CHOCO's copies reach the exact average.
TEST(ChocoTest, WithoutPublicCopiesTopKAveragingStallsWhereChocoAgrees) {
  constexpr std::uint32_t kRounds = 600;
  double initial = 0.0;
  double consensus[2] = {0.0, 0.0};
  for (const bool public_copies : {true, false}) {
    GossipNetwork network({TopologyKind::kRing, 8}, kRounds, 0.0f);
    ConfigureChoco(network, TopKParams{.k_ratio = 0.3f}, 0.3f).public_copies = public_copies;
    network.InitAll();
    initial = ConsensusDistance(network.Models());
    ASSERT_TRUE(network.Run(kRounds * kDeadline));
    consensus[public_copies ? 0 : 1] = ConsensusDistance(network.Models());
    for (PeerId id = 1; id <= 8; ++id) {
      EXPECT_EQ(network.session(id).counters().copy_requests_sent, 0u);
    }
  }
  EXPECT_LT(consensus[0], 1e-6 * initial) << consensus[0];
  EXPECT_GT(consensus[1], 1e-2 * initial) << consensus[1];
}

}  // namespace
}  // namespace edgesgd::protocol
