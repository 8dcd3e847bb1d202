// BEER in GossipPeerSession (docs/algorithms.md §6): gradient tracking with the model and the
// tracker both compressed against public copies. The copies of both vectors agree bit for bit at
// every holder and the trackers' mean is the mean gradient at every round, with several codecs;
// the identity codec with gamma = 1 is the float64 BEER recursion (dense gradient tracking with
// the gradient at x_k); on heterogeneous quadratics BEER with top_k reaches the exact optimum
// where CHOCO with the same codec keeps a bias; lost deltas of either vector are repaired, bad
// frames counted (a hostile network and a crashed neighbour: gossip_choco_test.cc, for both).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "protocol/gossip_network.h"

namespace edgesgd::protocol {
namespace {

using namespace gossip_test;  // NOLINT: the shared driver

constexpr std::size_t kModelVector = 0;
constexpr std::size_t kTrackerVector = 1;

GossipConfig& ConfigureBeer(GossipNetwork& network, const CodecParams& codec, float gamma) {
  return ConfigureCompressed(network, GossipAlgorithm::kBeer, codec, gamma);
}

// The largest squared distance of a live peer's model to the optimum (the mean target).
double WorstDistanceToOptimum(GossipNetwork& network) {
  const std::vector<float> optimum = network.MeanTarget();
  double worst = 0.0;
  for (const std::vector<float>& x : network.Models()) {
    double distance = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double diff = static_cast<double>(x[i]) - static_cast<double>(optimum[i]);
      distance += diff * diff;
    }
    worst = std::max(worst, distance);
  }
  return worst;
}

// While every peer is in round r (model() = x_r and tracker() = v_r do not change during a
// round), checks mean_i v_i = mean_i grad f_i(x_i) once per round; returns the rounds checked.
class TrackedMeanCheck {
 public:
  explicit TrackedMeanCheck(GossipNetwork& network, PeerId peers) : peers_(peers) {
    network.on_event = [this](GossipNetwork& net) { Check(net); };
  }
  std::uint32_t rounds_checked() const { return checked_; }
  double worst_gap() const { return worst_; }

 private:
  void Check(GossipNetwork& net) {
    const std::uint32_t round = net.session(1).round();
    if (round < next_ || net.session(1).Finished()) return;
    for (PeerId id = 1; id <= peers_; ++id) {
      if (net.session(id).round() != round || net.session(id).Finished()) return;
    }
    const std::size_t d = TestLayout().dimension();
    for (std::size_t i = 0; i < d; ++i) {
      double tracked = 0.0;
      double gradient = 0.0;
      for (PeerId id = 1; id <= peers_; ++id) {
        tracked += static_cast<double>(net.session(id).tracker()[i]);
        gradient += static_cast<double>(net.session(id).model()[i]) -
                    static_cast<double>(net.peer(id).target[i]);
      }
      worst_ = std::max(worst_, std::abs(tracked - gradient) / static_cast<double>(peers_));
    }
    ++checked_;
    next_ = round + 1;
  }

  PeerId peers_;
  std::uint32_t next_ = 0;
  std::uint32_t checked_ = 0;
  double worst_ = 0.0;
};

// ---- The copies and the update rule ----

TEST(BeerTest, CopiesOfBothVectorsAgreeAndTheTrackersFollowTheMeanGradient) {
  constexpr std::uint32_t kRounds = 40;
  constexpr PeerId kPeers = 6;
  const std::vector<std::pair<const char*, CodecParams>> codecs = {
      {"identity", IdentityParams{}},
      {"top_k", TopKParams{.k_ratio = 0.3f}},
      {"sign", SignParams{}},
      {"qsgd", QsgdParams{.levels = 127, .bucket = 4}},
      {"rand_k", RandKParams{.k_ratio = 0.5f}},
  };
  for (const auto& [name, codec] : codecs) {
    SCOPED_TRACE(name);
    CompressedRing network(GossipAlgorithm::kBeer, codec, kPeers, kRounds);
    TrackedMeanCheck mean_check(network, kPeers);
    ASSERT_TRUE(network.Run(kRounds * kDeadline));
    EXPECT_EQ(mean_check.rounds_checked(), kRounds);
    EXPECT_LT(mean_check.worst_gap(), 1e-5);
    // Two neighbours, two deltas each per round.
    ExpectCopiesFollowed(network, kPeers, kRounds, 4, kTrackerVector);
    for (PeerId id = 1; id <= kPeers; ++id) {
      EXPECT_EQ(network.session(id).counters().frames_sent, 4u * kRounds + 2u);  // and two Leaves
    }
  }
}

// With the identity codec every copy is the vector it tracks (up to float rounding: ẑ + (z - ẑ)
// need not be z), so with gamma = 1 BEER is dense gradient tracking with the fresh gradient:
//   x_{k+1} = W x_k - lr v_k,   v_{k+1} = W v_k + g(x_{k+1}) - g(x_k),   v_0 = g(x_0).
// Checked against that recursion in float64; kGradientTracking (whose tracker lags a round) is
// shown to differ from it.
TEST(BeerTest, IdentityWithGammaOneIsTheFloat64BeerRecursion) {
  constexpr std::uint32_t kRounds = 40;
  constexpr float kLr = 0.1f;
  ForEachReferenceTopology([&](const Topology& topology) {
    const std::uint32_t n = topology.peers;
    IdentityRuns runs(topology, GossipAlgorithm::kBeer, GossipAlgorithm::kGradientTracking, kRounds,
                      kLr);
    GossipNetwork& beer = runs.compressed;
    GossipNetwork& tracking = runs.reference;
    TrackedMeanCheck mean_check(beer, static_cast<PeerId>(n));

    const std::size_t d = TestLayout().dimension();
    std::vector<std::vector<double>> x(n, std::vector<double>(d));
    std::vector<std::vector<double>> target(n, std::vector<double>(d));
    for (PeerId id = 1; id <= n; ++id) {
      for (std::size_t k = 0; k < d; ++k) {
        x[id - 1][k] = static_cast<double>(beer.peer(id).initial[k]);
        target[id - 1][k] = static_cast<double>(beer.peer(id).target[k]);
      }
    }
    const auto gradient = [&](const std::vector<std::vector<double>>& at) {
      std::vector<std::vector<double>> g = at;
      for (std::uint32_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < d; ++k) g[i][k] -= target[i][k];
      }
      return g;
    };
    const auto mix = [&](const std::vector<std::vector<double>>& z) {
      std::vector<std::vector<double>> mixed(n, std::vector<double>(d, 0.0));
      for (PeerId i = 1; i <= n; ++i) {
        for (PeerId j = 1; j <= n; ++j) {
          const auto w =
              static_cast<double>(MixingWeight(topology, MixingRule::kMetropolisHastings, i, j));
          for (std::size_t k = 0; k < d; ++k) mixed[i - 1][k] += w * z[j - 1][k];
        }
      }
      return mixed;
    };
    std::vector<std::vector<double>> g = gradient(x);
    std::vector<std::vector<double>> v = g;
    for (std::uint32_t t = 0; t < kRounds; ++t) {
      std::vector<std::vector<double>> next = mix(x);
      for (std::uint32_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < d; ++k) next[i][k] -= static_cast<double>(kLr) * v[i][k];
      }
      const std::vector<std::vector<double>> next_g = gradient(next);
      std::vector<std::vector<double>> next_v = mix(v);
      for (std::uint32_t i = 0; i < n; ++i) {
        for (std::size_t k = 0; k < d; ++k) next_v[i][k] += next_g[i][k] - g[i][k];
      }
      x = std::move(next);
      v = std::move(next_v);
      g = next_g;
    }
    ASSERT_TRUE(beer.Run(kRounds * kDeadline));
    ASSERT_TRUE(tracking.Run(kRounds * kDeadline));
    EXPECT_EQ(mean_check.rounds_checked(), kRounds);
    EXPECT_LT(mean_check.worst_gap(), 1e-5);
    double tracking_gap = 0.0;
    for (PeerId id = 1; id <= n; ++id) {
      const std::span<const float> model = beer.session(id).model();
      const std::span<const float> lagged = tracking.session(id).model();
      for (std::size_t k = 0; k < d; ++k) {
        EXPECT_NEAR(static_cast<double>(model[k]), x[id - 1][k], 1e-5)
            << "peer " << id << " coordinate " << k;
        tracking_gap =
            std::max(tracking_gap, std::abs(static_cast<double>(lagged[k]) - x[id - 1][k]));
      }
    }
    EXPECT_GT(tracking_gap, 1e-3);
  });
}

// Ring of 8, f_i(x) = 0.5 ||x - target_i||^2 with targets spread over [-1, 1]: CHOCO's peers each
// settle at a point biased towards their own target (the fixed point of x = W'(x - lr (x - t_i))
// is not the mean target), which no number of rounds removes; BEER's trackers replace each
// peer's own gradient by the network's, so with the same codec every peer reaches the optimum to
// float precision. lr = 0.1, gamma = 0.3, top_k keeping 2 of 6 and 1 of 4 coordinates.
TEST(BeerTest, TopKReachesTheExactOptimumWhereChocoKeepsItsHeterogeneityBias) {
  constexpr std::uint32_t kRounds = 1000;
  double worst[2] = {0.0, 0.0};
  double halfway_choco = 0.0;
  for (const GossipAlgorithm algorithm : {GossipAlgorithm::kBeer, GossipAlgorithm::kChoco}) {
    for (const std::uint32_t rounds : {kRounds, kRounds / 2}) {
      if (algorithm == GossipAlgorithm::kBeer && rounds != kRounds) continue;
      GossipNetwork network({TopologyKind::kRing, 8}, rounds, 0.1f);
      ConfigureBeer(network, TopKParams{.k_ratio = 0.3f}, 0.3f).algorithm = algorithm;
      network.InitAll();
      ASSERT_TRUE(network.Run(rounds * kDeadline));
      const double distance = WorstDistanceToOptimum(network);
      if (rounds != kRounds) {
        halfway_choco = distance;
      } else {
        worst[algorithm == GossipAlgorithm::kBeer ? 0 : 1] = distance;
      }
    }
  }
  EXPECT_LT(worst[0], 1e-10) << worst[0];
  EXPECT_GT(worst[1], 1e-2) << worst[1];
  // CHOCO's gap is a floor, not slow progress: it did not shrink over the last 500 rounds.
  EXPECT_NEAR(worst[1], halfway_choco, 1e-3 * halfway_choco);
}

// ---- Frames fed by hand ----

class BeerSessionTest : public CompressedSessionTest<GossipAlgorithm::kBeer> {
 protected:
  static FrameBytes ModelDelta(PeerId sender, std::uint32_t round,
                               std::array<std::uint32_t, 3> indices, std::array<float, 3> values) {
    return TopKDelta(sender, round, indices, values, wire::GossipVector::kModelDelta);
  }
  static FrameBytes TrackerDelta(PeerId sender, std::uint32_t round,
                                 std::array<std::uint32_t, 3> indices,
                                 std::array<float, 3> values) {
    return TopKDelta(sender, round, indices, values, wire::GossipVector::kTrackerDelta);
  }
};

TEST_F(BeerSessionTest, SendsBothDeltasAndClosesTheRoundWithTheBeerUpdate) {
  EXPECT_EQ(arena_->used_bytes(), GossipPeerSession::ArenaBytes(config_));
  // Model and tracker, their accumulators, the gradient and the previous one, 2 x (2 + 1) copies.
  EXPECT_EQ(GossipPeerSession::ModelVectors(config_), 2u + 2u + 1u + 1u + 6u);
  session_.Start(0);
  const std::vector<Sent> frames = PollAll();
  ASSERT_EQ(frames.size(), 4u);
  // Every neighbour gets the model delta, then the tracker delta.
  EXPECT_EQ(frames[0].view().message.gossip.vector, wire::GossipVector::kModelDelta);
  EXPECT_EQ(frames[1].view().message.gossip.vector, wire::GossipVector::kModelDelta);
  EXPECT_EQ(frames[2].view().message.gossip.vector, wire::GossipVector::kTrackerDelta);
  EXPECT_EQ(frames[3].view().message.gossip.vector, wire::GossipVector::kTrackerDelta);
  EXPECT_EQ(frames[0].to, 2u);
  EXPECT_EQ(frames[2].to, 2u);
  EXPECT_EQ(frames[2].view().payload.codec, kCodecId<TopKCodec>);
  for (const Sent& sent : frames) {
    EXPECT_LE(sent.frame.size, GossipPeerSession::MaxFrameBytes(config_));
  }
  // x_0 = 3 and v_0 = g_0 = 3 - 1 = 2: the copies hold top_k of each (lowest indices win ties).
  EXPECT_EQ(Copy(1, kModelVector), (std::vector<float>{3, 3, 0, 0, 0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(Copy(1, kTrackerVector), (std::vector<float>{2, 2, 0, 0, 0, 0, 2, 0, 0, 0}));
  EXPECT_EQ(session_.public_copy_rounds(1, kTrackerVector), 1u);
  EXPECT_TRUE(session_.public_copy(3, kModelVector).empty());  // not a neighbour
  EXPECT_TRUE(session_.public_copy(1, 2).empty());             // no third vector
  EXPECT_EQ(std::vector<float>(session_.tracker().begin(), session_.tracker().end()),
            std::vector<float>(10, 2.0f));

  // The round waits for both vectors of both neighbours.
  Feed(2, ModelDelta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  Feed(2, TrackerDelta(2, 0, {0, 5, 9}, {4.0f, 1.0f, 2.0f}));
  Feed(4, ModelDelta(4, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(session_.heard_count(), 1u);
  EXPECT_EQ(session_.round(), 0u);
  Feed(4, TrackerDelta(4, 0, {2, 3, 8}, {2.0f, 2.0f, 2.0f}));
  ASSERT_EQ(session_.round(), 1u);
  EXPECT_EQ(session_.counters().models_accepted, 4u);

  // x_1 = x_0 + gamma * sum_j W_1j (x̂_j - x̂_1) - lr * v_0;
  // v_1 = v_0 + gamma * sum_j W_1j (ŷ_j - ŷ_1) + g(x_1) - g(x_0).
  const float w = config_.mixing.weights[0];  // 1/3 on this ring
  const std::vector<float> own_x{3, 3, 0, 0, 0, 0, 3, 0, 0, 0};
  const std::vector<float> x2{0, 1, 0, 0, 2, 0, 0, 3, 0, 0};
  const std::vector<float> x4{1, 1, 0, 0, 0, 0, 1, 0, 0, 0};
  const std::vector<float> own_v{2, 2, 0, 0, 0, 0, 2, 0, 0, 0};
  const std::vector<float> v2{4, 0, 0, 0, 0, 1, 0, 0, 0, 2};
  const std::vector<float> v4{0, 0, 2, 2, 0, 0, 0, 0, 2, 0};
  for (std::size_t i = 0; i < 10; ++i) {
    const float x1 = 3.0f + kGamma * (w * (x2[i] - own_x[i]) + w * (x4[i] - own_x[i])) - kLr * 2.0f;
    EXPECT_NEAR(session_.model()[i], x1, 1e-6) << i;
    const float v1 =
        2.0f + kGamma * (w * (v2[i] - own_v[i]) + w * (v4[i] - own_v[i])) + (x1 - 1.0f) - 2.0f;
    EXPECT_NEAR(session_.tracker()[i], v1, 1e-6) << i;
  }
  EXPECT_EQ(Copy(2, kTrackerVector), v2);
  EXPECT_EQ(Copy(4, kModelVector), x4);
}

TEST_F(BeerSessionTest, CountsBadFramesAndKeepsEachVectorsCopiesInRoundOrder) {
  StartAndDrain();
  Feed(2, TrackerDelta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  Feed(2, TrackerDelta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kDuplicate), 1u);
  EXPECT_EQ(session_.public_copy_rounds(2, kTrackerVector), 1u);
  EXPECT_EQ(session_.public_copy_rounds(2, kModelVector), 0u);  // each vector its own order
  const std::vector<float> dense(TestLayout().dimension(), 1.0f);
  Feed(4, GossipFrame(4, 0, dense, {0, 0, wire::GossipVector::kTracker}));
  Feed(4, GossipFrame(4, 0, dense, {0, 0, wire::GossipVector::kModel}));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongExchange), 2u);
  Feed(4, GossipFrame(4, 0, dense, {0, 0, wire::GossipVector::kTrackerDelta}));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongCodec), 1u);
  Feed(4, TrackerDelta(4, 0, {0, 1, 6}, {1.0f, std::nanf(""), 1.0f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kBadPayload), 1u);
  Feed(4, TrackerDelta(4, kRounds, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(Rejected(GossipRejectReason::kFuture), 1u);
  // A resynchronisation frame for a third vector is a wrong exchange.
  Feed(4, GossipFrame(4, 0, std::vector<float>{0.0f}, {0, 2, wire::GossipVector::kCopyRequest}));
  EXPECT_EQ(Rejected(GossipRejectReason::kWrongExchange), 3u);
  EXPECT_EQ(session_.public_copy_rounds(4, kTrackerVector), 0u);
  EXPECT_EQ(session_.counters().total_rejected(), 7u);
  EXPECT_TRUE(PollAll().empty());

  // The deadline closes round 0 without neighbour 4 (and without neighbour 2's model).
  session_.OnTimer(kDeadline);
  ASSERT_EQ(session_.round(), 1u);
  EXPECT_EQ(session_.counters().neighbours_missed, 2u);
  // Late deltas of round 0 still complete the copies.
  Feed(4, TrackerDelta(4, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}), kDeadline + 1);
  Feed(2, ModelDelta(2, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}), kDeadline + 1);
  EXPECT_EQ(session_.counters().late_deltas, 2u);
  EXPECT_EQ(session_.public_copy_rounds(4, kTrackerVector), 1u);
  EXPECT_EQ(session_.public_copy_rounds(2, kModelVector), 1u);
}

TEST_F(BeerSessionTest, ATrackerGapIsRepairedWithTheNeighboursOwnTrackerCopy) {
  StartAndDrain();
  // Neighbour 4's round-0 tracker delta was lost: peer 1 asks for its tracker copy (step 1).
  Feed(4, ModelDelta(4, 0, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  Feed(4, TrackerDelta(4, 1, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  ASSERT_NO_FATAL_FAILURE(ExpectGapRequest(4, 1, 1, 1, 0));

  // The tracker copy holding round 0 replaces peer 1's and counts neighbour 4 in; the model copy
  // is untouched.
  std::vector<float> held(TestLayout().dimension());
  for (std::size_t i = 0; i < held.size(); ++i) held[i] = 0.5f * static_cast<float>(i);
  Feed(4, GossipFrame(4, 1, held, {0, 1, wire::GossipVector::kModelCopy}));
  EXPECT_EQ(Copy(4, kTrackerVector), held);
  EXPECT_EQ(session_.public_copy_rounds(4, kTrackerVector), 1u);
  EXPECT_EQ(Copy(4, kModelVector), (std::vector<float>{1, 1, 0, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(session_.counters().copies_applied, 1u);
  EXPECT_EQ(session_.heard_count(), 1u);
  Feed(4, TrackerDelta(4, 1, {0, 1, 6}, {1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(session_.public_copy_rounds(4, kTrackerVector), 2u);

  // Asked for its own tracker copy, peer 1 answers with it (step 1, one delta) ahead of the
  // deltas of round 1.
  const std::vector<float> own_tracker = Copy(1, kTrackerVector);
  Feed(2, GossipFrame(2, 0, std::vector<float>{0.0f}, {0, 1, wire::GossipVector::kCopyRequest}));
  Feed(2, ModelDelta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  Feed(2, TrackerDelta(2, 0, {1, 4, 7}, {1.0f, 2.0f, 3.0f}));
  std::vector<Sent> frames;
  ASSERT_NO_FATAL_FAILURE(PollCopyFirst(1, 2, 5, frames));
  const wire::FrameView copy = frames[0].view();
  EXPECT_EQ(copy.message.gossip.step, 1u);
  EXPECT_EQ(copy.header.round, 1u);
  EXPECT_TRUE(std::equal(copy.payload.view.values.begin(), copy.payload.view.values.end(),
                         own_tracker.begin(), own_tracker.end()));
  EXPECT_EQ(session_.counters().copies_sent, 1u);
}

// ---- Configurations ----

TEST(BeerConfigTest, TakesTheCodecsChocoTakesAndSizesItsArenaExactly) {
  GossipConfig config;
  config.algorithm = GossipAlgorithm::kBeer;
  config.layout = TestLayout();
  config.codec = TopKParams{.k_ratio = 0.3f};
  config.consensus_step = 0.3f;
  for (const Topology topology :
       {Topology{TopologyKind::kRing, 6}, Topology{TopologyKind::kComplete, 5}}) {
    config.mixing = MakeMixingRow(topology, MixingRule::kMetropolisHastings, 1).value();
    EXPECT_TRUE(ValidateGossipConfig(config).ok());
    for (const std::uint32_t batches : {1u, 3u}) {
      config.phase_batches = batches;
      const std::size_t degree = config.mixing.degree;
      EXPECT_EQ(GossipPeerSession::ModelVectors(config),
                6u + 2u * (degree + 1u) + (batches > 1 ? 1u : 0u));
      for (const CodecParams& codec :
           {CodecParams{IdentityParams{}}, CodecParams{TopKParams{.k_ratio = 0.3f}},
            CodecParams{SignParams{}}, CodecParams{QsgdParams{.levels = 127, .bucket = 4}}}) {
        config.codec = codec;
        std::vector<std::byte> storage(GossipPeerSession::ArenaBytes(config) + kArenaAlignment);
        Arena arena(storage);
        std::vector<float> target(TestLayout().dimension(), 0.0f);
        GossipOptions options;
        options.gradient = &QuadraticGradient;
        options.user = &target;
        options.codecs = &AllCodecs();
        options.initial_model = target;
        GossipPeerSession session;
        ASSERT_TRUE(session.Init(arena, config, options).ok());
        EXPECT_EQ(arena.used_bytes(), GossipPeerSession::ArenaBytes(config));
      }
    }
  }
  config.phase_batches = 1;
  config.codec = TopKParams{.k_ratio = 0.3f};
  for (const CodecParams& codec :
       {CodecParams{RegTopKParams{}}, CodecParams{SignParams{SignScale::kUnit}},
        CodecParams{RandKParams{.k_ratio = 0.1f, .scaling = RandKScaling::kUnbiased}}}) {
    GossipConfig refused = config;
    refused.codec = codec;
    EXPECT_FALSE(ValidateGossipConfig(refused).ok());
  }
  GossipConfig no_copies = config;
  no_copies.public_copies = false;
  EXPECT_FALSE(ValidateGossipConfig(no_copies).ok());
  for (const float gamma : {0.0f, 1.5f}) {
    GossipConfig bad_gamma = config;
    bad_gamma.consensus_step = gamma;
    EXPECT_FALSE(ValidateGossipConfig(bad_gamma).ok());
  }
  GossipConfig steps = config;
  steps.gossip_steps = 2;
  EXPECT_FALSE(ValidateGossipConfig(steps).ok());
  EXPECT_STREQ(GossipAlgorithmName(GossipAlgorithm::kBeer), "beer");
  EXPECT_TRUE(TracksGradients(GossipAlgorithm::kBeer));
  EXPECT_TRUE(CompressesGossip(GossipAlgorithm::kBeer));
}

// ---- Faults ----

// Deltas of both vectors lost before a link is up and in mid-run: every holder repairs each copy
// from the owner's, and all copies of both vectors agree bit for bit at the end.
TEST(BeerTest, LostDeltasOfBothVectorsAreRepairedAndTheCopiesAgreeAgain) {
  constexpr std::uint32_t kRounds = 40;
  constexpr PeerId kPeers = 6;
  CompressedRing network(GossipAlgorithm::kBeer, TopKParams{.k_ratio = 0.3f}, kPeers, kRounds);
  network.mutate = [&](PeerId from, PeerId to, FrameBytes& frame, std::mt19937&) {
    const wire::FrameView view = wire::DecodeFrame(frame.bytes()).value();
    const wire::GossipVector vector = view.message.gossip.vector;
    const std::uint32_t round = view.header.round;
    const bool model = vector == wire::GossipVector::kModelDelta;
    const bool tracker = vector == wire::GossipVector::kTrackerDelta;
    if (model && from == 1 && to == 2 && round <= 2) return 0;  // the link is not up yet
    if (tracker && from == 3 && to == 4 && round >= 10 && round <= 12) return 0;
    if (tracker && from == 5 && to == 6 && round == 20) return 0;
    return 1;
  };
  ASSERT_TRUE(network.Run(4 * kRounds * kDeadline));
  for (PeerId id = 1; id <= kPeers; ++id) {
    EXPECT_TRUE(network.session(id).Finished());
    EXPECT_TRUE(network.session(id).status().ok());
    ExpectCopiesAgree(network, id, kRounds);
  }
  for (const PeerId holder : {2u, 4u, 6u}) {
    const GossipCounters& counters = network.session(holder).counters();
    EXPECT_GE(counters.rejected_for(GossipRejectReason::kOutOfOrder), 1u);
    EXPECT_EQ(counters.copies_applied, 1u);
  }
  for (const PeerId owner : {1u, 3u, 5u}) {
    EXPECT_EQ(network.session(owner).counters().copies_sent, 1u);
  }
}

}  // namespace
}  // namespace edgesgd::protocol
