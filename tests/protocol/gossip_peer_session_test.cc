// GossipPeerSession: D-PSGD rounds, deadlines and re-weighting, frame rejection and fuzzing.
// A tiny in-test driver moves frames between n sessions with a fake clock (a fixed or random
// latency per frame, optional drop / mutation hooks: gossip_network.h); single-session tests
// build frames by hand.

#include "edgesgd/protocol/gossip_peer_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/core/arena.h"
#include "protocol/gossip_network.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"

namespace edgesgd::protocol {
namespace {

using namespace gossip_test;  // NOLINT: the shared driver

// ---- Convergence and exactness ----

TEST(GossipTest, DpsgdOnRingOfEightConvergesToTheMeanTarget) {
  constexpr std::uint32_t kRounds = 300;
  GossipNetwork network({TopologyKind::kRing, 8}, kRounds, 0.05f);
  network.InitAll();
  const double initial_consensus = ConsensusDistance(network.Models());
  ASSERT_TRUE(network.Run(kRounds * kDeadline));

  const std::vector<std::vector<float>> models = network.Models();
  const std::vector<float> optimum = network.MeanTarget();
  const double final_consensus = ConsensusDistance(models);
  // The mean model follows mean x <- mean x - lr (mean x - mean target) exactly (W is doubly
  // stochastic), so it reaches the optimum; single models keep D-PSGD's small bias.
  std::vector<double> mean(optimum.size(), 0.0);
  for (const auto& x : models) {
    for (std::size_t i = 0; i < x.size(); ++i) mean[i] += static_cast<double>(x[i]) / 8.0;
  }
  for (std::size_t i = 0; i < optimum.size(); ++i) {
    EXPECT_NEAR(mean[i], static_cast<double>(optimum[i]), 1e-4) << i;
  }
  for (const auto& x : models) {
    double distance = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double diff = static_cast<double>(x[i] - optimum[i]);
      distance += diff * diff;
    }
    EXPECT_LT(distance, 0.1);
  }
  EXPECT_GT(initial_consensus, 10.0);
  EXPECT_LT(final_consensus, initial_consensus / 100.0);

  for (PeerId id = 1; id <= 8; ++id) {
    const GossipPeerSession& session = network.session(id);
    EXPECT_TRUE(session.Finished());
    EXPECT_TRUE(session.status().ok());
    EXPECT_EQ(session.round(), kRounds);
    const GossipCounters& c = session.counters();
    EXPECT_EQ(c.rounds_completed, kRounds);
    EXPECT_EQ(c.neighbours_heard, 2u * kRounds);
    EXPECT_EQ(c.neighbours_missed, 0u);
    EXPECT_EQ(c.reweighted_steps, 0u);
    EXPECT_EQ(c.deadline_closes, 0u);
    EXPECT_EQ(c.total_rejected(), 0u);
    EXPECT_EQ(c.models_accepted, 2u * kRounds);
    EXPECT_EQ(c.frames_sent, 2u * kRounds + 2u);  // and a Leave to each neighbour
    EXPECT_EQ(c.leaves_received, 2u);
  }
  // Each round's gradient is reported once, on the round's first frame.
  std::uint64_t work = 0;
  for (const std::uint64_t w : network.work_samples_seen) work += w;
  EXPECT_EQ(work, 8u * kRounds * 8u);
}

TEST(GossipTest, LosslessRunMatchesReferenceDpsgd) {
  constexpr std::uint32_t kRounds = 40;
  constexpr float kLr = 0.1f;
  for (const Topology topology : kReferenceTopologies) {
    SCOPED_TRACE(TopologyKindName(topology.kind));
    GossipNetwork network(topology, kRounds, kLr);
    network.InitAll();
    const std::uint32_t n = topology.peers;
    std::vector<std::vector<float>> x;
    std::vector<std::vector<float>> targets;
    for (PeerId id = 1; id <= n; ++id) {
      x.push_back(network.peer(id).initial);
      targets.push_back(network.peer(id).target);
    }
    const std::size_t d = x.front().size();
    for (std::uint32_t t = 0; t < kRounds; ++t) {
      std::vector<std::vector<float>> next(n, std::vector<float>(d, 0.0f));
      for (PeerId i = 1; i <= n; ++i) {
        for (PeerId j = 1; j <= n; ++j) {
          const float w = MixingWeight(topology, MixingRule::kMetropolisHastings, i, j);
          for (std::size_t k = 0; k < d; ++k) next[i - 1][k] += w * x[j - 1][k];
        }
        for (std::size_t k = 0; k < d; ++k) {
          next[i - 1][k] -= kLr * (x[i - 1][k] - targets[i - 1][k]);
        }
      }
      x = next;
    }
    ASSERT_TRUE(network.Run(kRounds * kDeadline));
    for (PeerId id = 1; id <= n; ++id) {
      const std::span<const float> model = network.session(id).model();
      for (std::size_t k = 0; k < d; ++k) EXPECT_NEAR(model[k], x[id - 1][k], 1e-4f);
    }
  }
}

TEST(GossipTest, RoundEventsDescribeEveryRound) {
  constexpr std::uint32_t kRounds = 10;
  GossipNetwork network({TopologyKind::kRing, 4}, kRounds, 0.1f);
  network.InitAll();
  ASSERT_TRUE(network.Run(kRounds * kDeadline));
  GossipPeerSession& session = network.session(2);
  GossipRoundEvent event;
  std::uint32_t expected_round = 0;
  std::uint64_t last_sent = 0;
  while (session.PollRoundEvent(event)) {
    EXPECT_EQ(event.round, expected_round++);
    EXPECT_EQ(event.neighbours_heard, 2u);
    EXPECT_EQ(event.neighbours_missed, 0u);
    EXPECT_FALSE(event.deadline_passed);
    EXPECT_GE(event.bytes_sent, last_sent);
    last_sent = event.bytes_sent;
    EXPECT_GT(event.bytes_received, 0u);
  }
  EXPECT_EQ(expected_round, kRounds);
  EXPECT_EQ(session.counters().round_events_dropped, 0u);
}

TEST(GossipTest, LonePeerRunsPlainSgd) {
  GossipNetwork network({TopologyKind::kRing, 1}, 200, 0.1f);
  network.InitAll();
  ASSERT_TRUE(network.Run(kMs));
  const GossipPeerSession& session = network.session(1);
  EXPECT_TRUE(session.Finished());
  EXPECT_EQ(session.counters().frames_sent, 0u);
  for (std::size_t i = 0; i < session.model().size(); ++i) {
    EXPECT_NEAR(session.model()[i], network.peer(1).target[i], 1e-5f);
  }
}

// ---- The algorithms ----

// Every GossipAlgorithm value has a rule with its name and facts; no other value has one.
TEST(GossipTest, EveryAlgorithmIsRegisteredOnce) {
  struct Expected {
    GossipAlgorithm algorithm;
    const char* name;
    bool tracks;
    bool compresses;
  };
  constexpr Expected kExpected[] = {
      {GossipAlgorithm::kDpsgd, "dpsgd", false, false},
      {GossipAlgorithm::kGradientTracking, "gt", true, false},
      {GossipAlgorithm::kDetag, "detag", true, false},
      {GossipAlgorithm::kChoco, "choco", false, true},
      {GossipAlgorithm::kBeer, "beer", true, true},
  };
  std::set<std::string> names;
  for (const Expected& expected : kExpected) {
    SCOPED_TRACE(expected.name);
    EXPECT_STREQ(GossipAlgorithmName(expected.algorithm), expected.name);
    EXPECT_EQ(TracksGradients(expected.algorithm), expected.tracks);
    EXPECT_EQ(CompressesGossip(expected.algorithm), expected.compresses);
    names.insert(GossipAlgorithmName(expected.algorithm));
  }
  EXPECT_EQ(names.size(), std::size(kExpected));

  GossipConfig config;
  config.mixing =
      MakeMixingRow({TopologyKind::kRing, 4}, MixingRule::kMetropolisHastings, 1).value();
  config.layout = TestLayout();
  for (std::size_t value = std::size(kExpected); value <= 255; ++value) {
    config.algorithm = static_cast<GossipAlgorithm>(value);
    EXPECT_STREQ(GossipAlgorithmName(config.algorithm), "unknown");
    EXPECT_FALSE(TracksGradients(config.algorithm));
    EXPECT_FALSE(CompressesGossip(config.algorithm));
    EXPECT_FALSE(ValidateGossipConfig(config).ok());
    EXPECT_EQ(GossipPeerSession::ArenaBytes(config), 0u);
  }
}

// ---- Faults ----

TEST(GossipTest, SilentPeerIsReweightedAfterTheDeadlineEveryRound) {
  constexpr std::uint32_t kRounds = 30;
  GossipNetwork network({TopologyKind::kRing, 8}, kRounds, 0.05f);
  network.InitAll();
  network.peer(3).silent = true;
  ASSERT_TRUE(network.Run(4 * kRounds * kDeadline));

  for (const PeerId id : {2u, 4u}) {
    SCOPED_TRACE(id);
    GossipPeerSession& session = network.session(id);
    EXPECT_TRUE(session.Finished());
    const GossipCounters& c = session.counters();
    EXPECT_EQ(c.rounds_completed, kRounds);
    EXPECT_EQ(c.neighbours_missed, kRounds);
    EXPECT_EQ(c.reweighted_steps, kRounds);
    EXPECT_EQ(c.deadline_closes, kRounds);
    EXPECT_EQ(c.neighbours_heard, kRounds);
    GossipRoundEvent event;
    TimeNs previous = 0;
    while (session.PollRoundEvent(event)) {
      EXPECT_TRUE(event.deadline_passed);
      EXPECT_EQ(event.neighbours_missed, 1u);
      EXPECT_EQ(event.neighbours_heard, 1u);
      EXPECT_GE(event.time_closed, previous + kDeadline);
      previous = event.time_closed;
    }
  }
  // Everyone else finished too (peers far from 3 are paced by 2 and 4, never stalled), and the
  // models stayed finite.
  for (PeerId id = 1; id <= 8; ++id) {
    EXPECT_TRUE(network.session(id).Finished()) << id;
    EXPECT_TRUE(network.session(id).status().ok()) << id;
    for (const float v : network.session(id).model()) EXPECT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(network.session(1).counters().neighbours_missed, 0u);
}

TEST(GossipTest, LostPeerIsNotWaitedFor) {
  constexpr std::uint32_t kRounds = 40;
  GossipNetwork network({TopologyKind::kRing, 6}, kRounds, 0.05f);
  network.InitAll();
  const bool& crashed = network.CrashWhenPeerOneReaches(10, 4);
  // A deadline never passes in this run: without OnPeerLost, peers 3 and 5 would need 30
  // deadlines (1.5 s).
  ASSERT_TRUE(network.Run(kRounds * kDeadline / 4));
  ASSERT_TRUE(crashed);
  for (const PeerId id : {3u, 5u}) {
    const GossipCounters& c = network.session(id).counters();
    EXPECT_TRUE(network.session(id).Finished());
    EXPECT_EQ(c.neighbours_lost, 1u);
    EXPECT_EQ(c.deadline_closes, 0u);
    EXPECT_GE(c.neighbours_missed, kRounds - 12);
    EXPECT_FALSE(network.session(id).IsLive(4));
    EXPECT_EQ(c.leaves_received, 1u);  // from the other neighbour only
  }
}

// A mutating, reordering, duplicating network: every peer must still finish (deadlines absorb
// whatever was lost), never crash, and keep finite models.
TEST(GossipTest, FuzzedNetworkNeverCrashesOrStalls) {
  constexpr std::uint32_t kRounds = 40;
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    GossipNetwork network({TopologyKind::kRing, 5}, kRounds, 0.05f, 5.0f, seed);
    network.InitAll();
    ExpectFinishesUnderFuzzing(network, 5, kRounds, 10 * kRounds * kDeadline);
  }
}

// ---- A single session fed by hand ----

class GossipSessionTest : public SingleSessionTest {
 protected:
  void SetUp() override { InitPeer(1); }

  // A GossipExchange carrying `values` as `sender`'s model of `round`.
  static FrameBytes ModelFrame(PeerId sender, std::uint32_t round, std::span<const float> values,
                               wire::GossipInfo info = {0, 0, wire::GossipVector::kModel},
                               CodecParams codec = CodecParams{}) {
    return GossipFrame(sender, round, values, info, codec);
  }

  static FrameBytes Filled(PeerId sender, std::uint32_t round, float value,
                           std::size_t d = TestLayout().dimension()) {
    const std::vector<float> values(d, value);
    return ModelFrame(sender, round, values);
  }
};

TEST_F(GossipSessionTest, StartSendsTheModelToEachNeighbour) {
  EXPECT_EQ(session_.phase(), GossipPhase::kReady);
  session_.Start(100);
  EXPECT_EQ(session_.phase(), GossipPhase::kRunning);
  EXPECT_EQ(session_.NextWakeup(), 100 + kDeadline);
  const std::vector<Sent> frames = PollAll();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].to, 2u);
  EXPECT_EQ(frames[1].to, 4u);
  EXPECT_EQ(frames[0].work_samples, 16u);
  EXPECT_EQ(frames[1].work_samples, 0u);
  for (const Sent& out : frames) {
    const FrameBytes& copy = out.frame;
    const Result<wire::FrameView> view = wire::DecodeFrame(copy.bytes());
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view.value().kind, wire::MessageKind::kGossipExchange);
    EXPECT_EQ(view.value().header.sender, 1u);
    EXPECT_EQ(view.value().header.round, 0u);
    EXPECT_EQ(view.value().message.gossip.vector, wire::GossipVector::kModel);
    EXPECT_EQ(view.value().payload.codec, kCodecId<IdentityCodec>);
    const std::span<const float> values = view.value().payload.view.values;
    ASSERT_EQ(values.size(), initial_.size());
    for (const float v : values) EXPECT_EQ(v, 3.0f);
  }
  EXPECT_EQ(session_.counters().frames_sent, 2u);
  EXPECT_EQ(session_.counters().bytes_sent, frames[0].frame.size * 2);
}

TEST_F(GossipSessionTest, MixesNeighboursAndBuffersTheNextRound) {
  session_.Start(0);
  PollAll();
  Feed(2, Filled(2, 0, 6.0f));
  EXPECT_EQ(session_.heard_count(), 1u);
  Feed(4, Filled(4, 1, 9.0f));  // a fast neighbour, already in round 1
  EXPECT_EQ(session_.round(), 0u);
  EXPECT_EQ(session_.counters().models_buffered, 1u);
  Feed(4, Filled(4, 0, 0.0f), 5 * kMs);  // completes round 0
  ASSERT_EQ(session_.round(), 1u);
  // x = (6 + 0 + 3) / 3 - 0.5 * (3 - 1) = 2 (the weights are exactly 1/3 and 1/3; the diagonal
  // is 1/3 to within a float rounding).
  for (const float v : session_.model()) EXPECT_NEAR(v, 2.0f, 1e-6f);
  EXPECT_EQ(session_.heard_count(), 1u);  // neighbour 4's buffered round-1 model
  EXPECT_EQ(session_.NextWakeup(), 5 * kMs + kDeadline);
  const std::vector<Sent> frames = PollAll();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].work_samples, 16u);

  Feed(2, Filled(2, 1, 3.0f), 6 * kMs);
  ASSERT_EQ(session_.round(), 2u);
  // x = (3 + 9 + 2) / 3 - 0.5 * (2 - 1) = 14/3 - 0.5
  for (const float v : session_.model()) EXPECT_NEAR(v, 14.0f / 3.0f - 0.5f, 1e-5f);
  EXPECT_EQ(session_.counters().total_rejected(), 0u);
  EXPECT_EQ(session_.counters().models_accepted, 4u);
  EXPECT_EQ(session_.counters().neighbours_missed, 0u);
}

TEST_F(GossipSessionTest, DeadlineMovesMissingWeightsOntoTheDiagonal) {
  session_.Start(0);
  PollAll();
  Feed(2, Filled(2, 0, 6.0f));
  session_.OnTimer(kDeadline - 1);
  EXPECT_EQ(session_.round(), 0u);
  session_.OnTimer(kDeadline);
  ASSERT_EQ(session_.round(), 1u);
  // x = 6/3 + (1/3 + 1/3) * 3 - 0.5 * 2 = 3
  for (const float v : session_.model()) EXPECT_NEAR(v, 3.0f, 1e-6f);
  const GossipCounters& c = session_.counters();
  EXPECT_EQ(c.neighbours_missed, 1u);
  EXPECT_EQ(c.reweighted_steps, 1u);
  EXPECT_EQ(c.deadline_closes, 1u);
  GossipRoundEvent event;
  ASSERT_TRUE(session_.PollRoundEvent(event));
  EXPECT_EQ(event.round, 0u);
  EXPECT_EQ(event.time_closed, kDeadline);
  EXPECT_EQ(event.neighbours_heard, 1u);
  EXPECT_EQ(event.neighbours_missed, 1u);
  EXPECT_TRUE(event.deadline_passed);
  EXPECT_FALSE(session_.PollRoundEvent(event));

  // Nobody heard at all: the peer keeps its own model (plus the gradient step).
  session_.OnTimer(2 * kDeadline);
  ASSERT_EQ(session_.round(), 2u);
  for (const float v : session_.model()) EXPECT_NEAR(v, 3.0f - 0.5f * 2.0f, 1e-6f);
}

TEST_F(GossipSessionTest, CountsEveryKindOfBadFrame) {
  session_.Start(0);
  PollAll();
  const std::vector<float> model(TestLayout().dimension(), 1.0f);

  // Malformed: garbage, a truncated frame, a misaligned copy.
  FrameBytes garbage;
  garbage.Resize(40);
  for (std::size_t i = 0; i < 40; ++i) garbage.mutable_bytes()[i] = static_cast<std::byte>(i * 37);
  Feed(2, garbage);
  FrameBytes truncated = Filled(2, 0, 1.0f);
  truncated.size -= 8;
  Feed(2, truncated);
  const FrameBytes good = Filled(2, 0, 1.0f);
  std::vector<std::byte> shifted(good.size + 1);
  std::memcpy(shifted.data() + 1, good.bytes().data(), good.size);
  session_.OnFrame(2, std::span<const std::byte>(shifted).subspan(1), 0);
  Feed(2, FrameBytes());
  EXPECT_EQ(Rejected(GossipRejectReason::kMalformed), 4u);

  // Unknown sender: a non-neighbour, and a neighbour's link carrying another peer's envelope.
  Feed(3, Filled(3, 0, 1.0f));
  Feed(2, Filled(4, 0, 1.0f));
  Feed(0, Filled(0, 0, 1.0f));
  EXPECT_EQ(Rejected(GossipRejectReason::kUnknownSender), 3u);

  // Messages a gossip peer does not take.
  std::vector<std::uint64_t> control(GossipPeerSession::kControlBuilderBytes / 8 + 1);
  wire::FrameBuilder builder(
      std::span<std::byte>(reinterpret_cast<std::byte*>(control.data()), control.size() * 8));
  const FrameBytes heartbeat(builder.EncodeHeartbeat({2, 0, 1}, {5, 0}).value());
  Feed(2, heartbeat);
  const FrameBytes join(builder.EncodeJoin({2, 0, 2}, {}).value());
  Feed(2, join);
  EXPECT_EQ(Rejected(GossipRejectReason::kUnexpectedMessage), 2u);

  // Exchanges D-PSGD never sends, and payloads that are not a dense model.
  Feed(2, ModelFrame(2, 0, model, {0, 0, wire::GossipVector::kTracker}));
  Feed(2, ModelFrame(2, 0, model, {1, 0, wire::GossipVector::kModel}));
  Feed(2, ModelFrame(2, 0, model, {0, 3, wire::GossipVector::kModel}));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongExchange), 3u);
  Feed(2,
       ModelFrame(2, 0, model, {0, 0, wire::GossipVector::kModel}, RandKParams{.k_ratio = 0.5f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongCodec), 1u);
  Feed(2, Filled(2, 0, 1.0f, TestLayout().dimension() + 1));
  Feed(2, Filled(2, 0, 1.0f, 3));
  std::vector<float> with_nan = model;
  with_nan[4] = std::nanf("");
  Feed(2, ModelFrame(2, 0, with_nan));
  std::vector<float> with_inf = model;
  with_inf[0] = -INFINITY;
  Feed(2, ModelFrame(2, 0, with_inf));
  EXPECT_EQ(Rejected(GossipRejectReason::kBadPayload), 4u);

  // None of that counted as hearing from neighbour 2.
  EXPECT_EQ(session_.heard_count(), 0u);
  EXPECT_EQ(session_.round(), 0u);

  // Duplicates, in the current and the buffered round; and rounds too far ahead.
  Feed(2, Filled(2, 0, 1.0f));
  Feed(2, Filled(2, 0, 2.0f));
  Feed(4, Filled(4, 1, 1.0f));
  Feed(4, Filled(4, 1, 1.0f));
  Feed(4, Filled(4, 2, 1.0f));
  Feed(4, Filled(4, kRounds, 1.0f));
  Feed(4, Filled(4, 0xFFFFFFFFu, 1.0f));
  EXPECT_EQ(Rejected(GossipRejectReason::kDuplicate), 2u);
  EXPECT_EQ(Rejected(GossipRejectReason::kFuture), 3u);

  // Close round 0 at the deadline (4 missed), then round 1 (2 missed; 4 buffered) and round 2:
  // late and stale models.
  session_.OnTimer(kDeadline);
  ASSERT_EQ(session_.round(), 1u);
  Feed(4, Filled(4, 0, 1.0f));
  EXPECT_EQ(Rejected(GossipRejectReason::kLate), 1u);
  session_.OnTimer(2 * kDeadline);
  ASSERT_EQ(session_.round(), 2u);
  Feed(4, Filled(4, 0, 1.0f));
  Feed(2, Filled(2, 0, 1.0f));
  EXPECT_EQ(Rejected(GossipRejectReason::kStale), 2u);

  // The log tells the same story, oldest first.
  GossipRejectEvent event;
  ASSERT_TRUE(session_.PollRejectEvent(event));
  EXPECT_EQ(event.reason, GossipRejectReason::kMalformed);
  EXPECT_EQ(event.peer, 2u);
  std::uint64_t logged = 1;
  while (session_.PollRejectEvent(event)) ++logged;
  EXPECT_EQ(logged + session_.counters().reject_events_dropped,
            session_.counters().total_rejected());
  EXPECT_EQ(session_.counters().total_rejected(), 25u);
  EXPECT_STREQ(GossipRejectReasonName(GossipRejectReason::kWrongExchange), "wrong_exchange");
  for (std::size_t r = 0; r < kGossipRejectReasonCount; ++r) {
    EXPECT_STRNE(GossipRejectReasonName(static_cast<GossipRejectReason>(r)), "unknown");
  }
}

TEST_F(GossipSessionTest, LostNeighbourIsSkippedAndRevivedWhenHeardInStep) {
  session_.Start(0);
  PollAll();
  Feed(2, Filled(2, 0, 6.0f));
  session_.OnPeerLost(4, kMs);  // the only neighbour still owed: round 0 closes now
  ASSERT_EQ(session_.round(), 1u);
  EXPECT_FALSE(session_.IsLive(4));
  EXPECT_EQ(session_.counters().neighbours_lost, 1u);
  EXPECT_EQ(session_.counters().deadline_closes, 0u);
  std::vector<Sent> frames = PollAll();
  ASSERT_EQ(frames.size(), 1u);  // nothing for the lost neighbour
  EXPECT_EQ(frames[0].to, 2u);

  // Round 1 waits only for neighbour 2.
  Feed(2, Filled(2, 1, 0.0f), 2 * kMs);
  ASSERT_EQ(session_.round(), 2u);
  PollAll();

  // Neighbour 4 comes back in step (round 2): it is live again and gets round 2's model.
  Feed(4, Filled(4, 2, 1.0f), 3 * kMs);
  EXPECT_TRUE(session_.IsLive(4));
  EXPECT_EQ(session_.counters().revivals, 1u);
  frames = PollAll();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].to, 4u);
  const FrameBytes& copy = frames[0].frame;
  EXPECT_EQ(wire::DecodeFrame(copy.bytes()).value().header.round, 2u);

  // Lost again in round 2: a stale frame, and a next-round one that may have been in flight at
  // the loss, are no sign of life (the latter is still mixed in).
  session_.OnPeerLost(4, 4 * kMs);
  Feed(4, Filled(4, 0, 1.0f), 4 * kMs);
  Feed(4, Filled(4, 3, 1.0f), 4 * kMs);
  EXPECT_FALSE(session_.IsLive(4));
  EXPECT_EQ(session_.counters().models_buffered, 1u);
  EXPECT_EQ(session_.counters().revivals, 1u);
}

TEST_F(GossipSessionTest, AllNeighboursLostStillPacesByTheDeadline) {
  session_.Start(0);
  PollAll();
  session_.OnPeerLost(2, kMs);
  session_.OnPeerLost(4, kMs);
  EXPECT_EQ(session_.round(), 0u);
  EXPECT_EQ(session_.NextWakeup(), kDeadline);
  session_.OnTimer(kDeadline);
  EXPECT_EQ(session_.round(), 1u);
  EXPECT_TRUE(PollAll().empty());
}

TEST_F(GossipSessionTest, LeaveFromANeighbourMarksItLost) {
  session_.Start(0);
  PollAll();
  Feed(4, Filled(4, 0, 3.0f));
  std::vector<std::uint64_t> control(GossipPeerSession::kControlBuilderBytes / 8 + 1);
  wire::FrameBuilder builder(
      std::span<std::byte>(reinterpret_cast<std::byte*>(control.data()), control.size() * 8));
  Feed(2, FrameBytes(builder.EncodeLeave({2, 0, 9}, {wire::LeaveReason::kShutdown}).value()));
  EXPECT_EQ(session_.counters().leaves_received, 1u);
  EXPECT_FALSE(session_.IsLive(2));
  EXPECT_EQ(session_.round(), 1u);  // not waiting for the departed neighbour
}

TEST_F(GossipSessionTest, FinishesAfterTRoundsAndSaysGoodbye) {
  session_.Start(0);
  PollAll();
  for (std::uint32_t t = 0; t < kRounds; ++t) {
    Feed(2, Filled(2, t, 1.0f), t * kMs);
    Feed(4, Filled(4, t, 1.0f), t * kMs);
    const std::vector<Sent> frames = PollAll();
    if (t + 1 < kRounds) {
      EXPECT_EQ(frames.size(), 2u);
    } else {
      ASSERT_EQ(frames.size(), 2u);  // the Leaves
      for (const Sent& out : frames) {
        const FrameBytes& copy = out.frame;
        const wire::FrameView view = wire::DecodeFrame(copy.bytes()).value();
        EXPECT_EQ(view.kind, wire::MessageKind::kLeave);
        EXPECT_EQ(view.leave.reason, wire::LeaveReason::kDone);
      }
    }
  }
  EXPECT_TRUE(session_.Finished());
  EXPECT_EQ(session_.round(), kRounds);
  EXPECT_EQ(session_.NextWakeup(), kNever);
  // Targets and neighbours all at 1: the model converges to 1.
  for (const float v : session_.model()) EXPECT_NEAR(v, 1.0f, 0.1f);
  // Frames after the end are counted, never acted on.
  Feed(2, Filled(2, kRounds - 1, 1.0f));
  Feed(2, Filled(2, kRounds, 1.0f));
  EXPECT_EQ(Rejected(GossipRejectReason::kLate), 1u);
  EXPECT_EQ(Rejected(GossipRejectReason::kFuture), 1u);
  session_.OnTimer(kNever - 1);
  EXPECT_TRUE(PollAll().empty());
}

TEST_F(GossipSessionTest, FramesBeforeStartCountForTheFirstRounds) {
  Feed(2, Filled(2, 0, 3.0f));
  Feed(4, Filled(4, 0, 3.0f));
  Feed(4, Filled(4, 1, 3.0f));
  EXPECT_EQ(session_.round(), 0u);
  session_.Start(0);
  EXPECT_EQ(session_.round(), 1u);  // round 0 was complete on arrival
  // Both rounds' frames are queued, round 0's first.
  const std::vector<Sent> frames = PollAll();
  ASSERT_EQ(frames.size(), 4u);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const FrameBytes& copy = frames[i].frame;
    EXPECT_EQ(wire::DecodeFrame(copy.bytes()).value().header.round, i < 2 ? 0u : 1u);
  }
}

TEST_F(GossipSessionTest, GradientFailureStillMixes) {
  GossipPeerSession session;
  std::vector<std::byte> storage(GossipPeerSession::ArenaBytes(config_) + kArenaAlignment);
  Arena arena(storage);
  GossipOptions options = options_;
  options.gradient = &FailingGradient;
  ASSERT_TRUE(session.Init(arena, config_, options).ok());
  session.Start(0);
  session.OnFrame(2, Filled(2, 0, 6.0f).bytes(), 0);
  session.OnFrame(4, Filled(4, 0, 0.0f).bytes(), 0);
  ASSERT_EQ(session.round(), 1u);
  for (const float v : session.model()) EXPECT_NEAR(v, 3.0f, 1e-6f);  // (6 + 0 + 3) / 3
  EXPECT_EQ(session.counters().gradient_errors, 2u);                  // rounds 0 and 1
}

TEST_F(GossipSessionTest, ArenaBytesIsExactAndInitChecksItsInputs) {
  EXPECT_EQ(arena_->used_bytes(), GossipPeerSession::ArenaBytes(config_));
  EXPECT_EQ(session_.Init(*arena_, config_, options_), Status::FailedPrecondition());

  std::vector<std::byte> storage(GossipPeerSession::ArenaBytes(config_) + kArenaAlignment);
  {
    GossipPeerSession session;
    Arena small(std::span<std::byte>(storage).first(GossipPeerSession::ArenaBytes(config_) / 2));
    EXPECT_EQ(session.Init(small, config_, options_), Status::ResourceExhausted());
    EXPECT_EQ(small.used_bytes(), 0u);
  }
  {
    GossipPeerSession session;
    Arena arena(storage);
    arena.Seal();
    EXPECT_EQ(session.Init(arena, config_, options_), Status::FailedPrecondition());
  }
  const auto expect_invalid = [&](const GossipConfig& config, const GossipOptions& options) {
    GossipPeerSession session;
    Arena arena(storage);
    const Status check = session.Init(arena, config, options);
    EXPECT_EQ(check, Status::InvalidArgument());
    EXPECT_STRNE(check.reason(), "ok");
    EXPECT_EQ(arena.used_bytes(), 0u);
  };
  GossipOptions options = options_;
  options.gradient = nullptr;
  expect_invalid(config_, options);
  options = options_;
  const std::vector<float> short_model(3, 0.0f);
  options.initial_model = short_model;
  expect_invalid(config_, options);
  std::vector<float> nan_model = initial_;
  nan_model[0] = std::nanf("");
  options.initial_model = nan_model;
  expect_invalid(config_, options);

  GossipConfig config = config_;
  config.rounds = 0;
  expect_invalid(config, options_);
  config = config_;
  config.learning_rate = -0.1f;
  expect_invalid(config, options_);
  config.learning_rate = std::nanf("");
  expect_invalid(config, options_);
  config = config_;
  config.neighbour_deadline_ns = 0;
  expect_invalid(config, options_);
  config = config_;
  config.layout = TensorLayout();
  expect_invalid(config, options_);
  config = config_;
  config.mixing.self_weight = 0.9f;
  expect_invalid(config, options_);
  config = config_;
  config.algorithm = static_cast<GossipAlgorithm>(200);  // not an algorithm
  expect_invalid(config, options_);
  config = config_;
  config.learning_rate = 0.0f;  // pure gossip averaging is allowed
  EXPECT_TRUE(ValidateGossipConfig(config).ok());
}

// Random and mutated frames from random links into one session: every one is counted as
// received, the session never crashes, and its rounds keep closing at the deadline.
TEST_F(GossipSessionTest, FuzzedFramesNeverCrashOrStall) {
  session_.Start(0);
  PollAll();
  std::mt19937 rng(42);
  std::vector<FrameBytes> seeds;
  for (std::uint32_t round = 0; round < 4; ++round) {
    seeds.push_back(Filled(2, round, 0.5f));
    seeds.push_back(Filled(4, round, -0.5f));
  }
  std::uint64_t fed = 0;
  TimeNs now = 0;
  for (int i = 0; i < 20000; ++i) {
    FrameBytes frame = seeds[std::uniform_int_distribution<std::size_t>(0, seeds.size() - 1)(rng)];
    const int mode = std::uniform_int_distribution<int>(0, 4)(rng);
    if (mode == 0) {
      const int flips = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int f = 0; f < flips; ++f) {
        const std::size_t at = std::uniform_int_distribution<std::size_t>(0, frame.size - 1)(rng);
        frame.mutable_bytes()[at] =
            static_cast<std::byte>(std::uniform_int_distribution<int>(0, 255)(rng));
      }
    } else if (mode == 1) {
      frame.size = std::uniform_int_distribution<std::size_t>(0, frame.size)(rng);
    } else if (mode == 2) {
      frame.Resize(std::uniform_int_distribution<std::size_t>(0, 256)(rng));
      for (std::byte& b : frame.mutable_bytes()) {
        b = static_cast<std::byte>(std::uniform_int_distribution<int>(0, 255)(rng));
      }
    }
    const PeerId from = std::uniform_int_distribution<PeerId>(0, 5)(rng);
    session_.OnFrame(from, frame.bytes(), now);
    ++fed;
    PollAll();
    if (i % 500 == 499) {
      now = session_.NextWakeup() == kNever ? now : session_.NextWakeup();
      session_.OnTimer(now);
      PollAll();
    }
  }
  EXPECT_EQ(session_.counters().frames_received, fed);
  EXPECT_GT(session_.counters().rejected_for(GossipRejectReason::kMalformed), 0u);
  EXPECT_TRUE(session_.status().ok());
  for (const float v : session_.model()) EXPECT_TRUE(std::isfinite(v));
  // Deadlines alone finish the run.
  for (int guard = 0; guard < 100 && !session_.Finished(); ++guard) {
    now = session_.NextWakeup();
    ASSERT_NE(now, kNever);
    session_.OnTimer(now);
    PollAll();
  }
  EXPECT_TRUE(session_.Finished());
  EXPECT_EQ(session_.round(), kRounds);
}

}  // namespace
}  // namespace edgesgd::protocol
