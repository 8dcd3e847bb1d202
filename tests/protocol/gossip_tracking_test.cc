// Gradient tracking and DeTAG in GossipPeerSession: lossless runs against a dense reference of
// The update rules of docs/algorithms.md §6, accelerated gossip (eta_g = 0 is plain gossip; AG
// contracts faster on a ring), tracking's exact convergence on heterogeneous linear regression where
// D-PSGD stalls, and the fault tolerance (silent neighbours, a hostile network) the D-PSGD peer
// already had.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <tuple>
#include <vector>

#include "edgesgd/core/data/synthetic.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/topology.h"
#include "protocol/gossip_network.h"

namespace edgesgd::protocol {
namespace {

using namespace gossip_test;  // NOLINT: the shared driver

// The quadratic gradient plus +-0.5 on every coordinate by the parity of local_step: the mean of
// two calls is the plain quadratic gradient, one call alone is biased.
Status AlternatingGradient(void* user, std::span<const float> point, std::uint32_t round,
                           std::uint32_t local_step, std::span<float> gradient) {
  const Status status = QuadraticGradient(user, point, round, local_step, gradient);
  for (float& g : gradient) g += local_step % 2 == 0 ? 0.5f : -0.5f;
  return status;
}

using Vectors = std::vector<std::vector<float>>;

// AG(Z) of docs/algorithms.md §6 on the dense W, every peer at once.
Vectors DenseAcceleratedGossip(const Topology& topology, const Vectors& z0, std::uint32_t steps,
                               float eta) {
  const std::size_t n = z0.size();
  const std::size_t d = z0.front().size();
  Vectors previous = z0;
  Vectors current = z0;
  for (std::uint32_t r = 0; r < steps; ++r) {
    Vectors next(n, std::vector<float>(d, 0.0f));
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        const float w = MixingWeight(topology, MixingRule::kMetropolisHastings,
                                     static_cast<PeerId>(i + 1), static_cast<PeerId>(j + 1));
        for (std::size_t k = 0; k < d; ++k) next[i][k] += (1.0f + eta) * w * current[j][k];
      }
      for (std::size_t k = 0; k < d; ++k) next[i][k] -= eta * previous[i][k];
    }
    previous = current;
    current = next;
  }
  return current;
}

// The documented update rules run centrally: D-PSGD, or tracking with y_0 = g_0.
Vectors ReferenceRun(const Topology& topology, const GossipConfig& config, GossipNetwork& network,
                     GradientFunction gradient) {
  const std::uint32_t n = topology.peers;
  Vectors x;
  for (PeerId id = 1; id <= n; ++id) x.push_back(network.peer(id).initial);
  const std::size_t d = x.front().size();
  Vectors y(n), previous_gradient(n);
  std::vector<float> call(d);
  for (std::uint32_t k = 0; k < config.rounds; ++k) {
    Vectors g(n, std::vector<float>(d, 0.0f));
    for (PeerId id = 1; id <= n; ++id) {
      for (std::uint32_t b = 0; b < config.phase_batches; ++b) {
        EXPECT_TRUE(gradient(&network.peer(id).target, x[id - 1], k, b, call).ok());
        for (std::size_t i = 0; i < d; ++i) g[id - 1][i] += call[i];
      }
      for (float& v : g[id - 1]) v /= static_cast<float>(config.phase_batches);
    }
    if (!TracksGradients(config.algorithm)) {
      const Vectors mixed = DenseAcceleratedGossip(topology, x, 1, 0.0f);
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t c = 0; c < d; ++c) x[i][c] = mixed[i][c] - config.learning_rate * g[i][c];
      }
      continue;
    }
    if (k == 0) {
      y = g;
      previous_gradient = g;
    }
    const Vectors mixed_x = DenseAcceleratedGossip(topology, x, config.gossip_steps, config.accel);
    const Vectors mixed_y = DenseAcceleratedGossip(topology, y, config.gossip_steps, config.accel);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t c = 0; c < d; ++c) {
        x[i][c] = mixed_x[i][c] - config.learning_rate * y[i][c];
        y[i][c] = mixed_y[i][c] + g[i][c] - previous_gradient[i][c];
      }
    }
    previous_gradient = g;
  }
  return x;
}

GossipConfig& Configure(GossipNetwork& network, GossipAlgorithm algorithm, std::uint32_t steps,
                        float accel, std::uint32_t batches = 1) {
  GossipConfig& config = network.base_config();
  config.algorithm = algorithm;
  config.gossip_steps = steps;
  config.accel = accel;
  config.phase_batches = batches;
  return config;
}

void ExpectModelsNear(GossipNetwork& network, const Vectors& expected, float tolerance) {
  for (PeerId id = 1; id <= expected.size(); ++id) {
    const std::span<const float> model = network.session(id).model();
    ASSERT_EQ(model.size(), expected[id - 1].size());
    for (std::size_t k = 0; k < model.size(); ++k) {
      EXPECT_NEAR(model[k], expected[id - 1][k], tolerance) << "peer " << id << " coordinate " << k;
    }
  }
}

// ---- Exactness against the reference ----

TEST(GossipTrackingTest, GradientTrackingMatchesTheReference) {
  constexpr std::uint32_t kRounds = 40;
  for (const Topology topology :
       {Topology{TopologyKind::kRing, 5}, Topology{TopologyKind::kComplete, 4},
        Topology{TopologyKind::kRing, 2}, Topology{TopologyKind::kStar, 6}}) {
    SCOPED_TRACE(TopologyKindName(topology.kind));
    GossipNetwork network(topology, kRounds, 0.1f);
    const GossipConfig config = Configure(network, GossipAlgorithm::kGradientTracking, 1, 0.0f);
    network.InitAll();
    const Vectors expected = ReferenceRun(topology, config, network, &QuadraticGradient);
    ASSERT_TRUE(network.Run(kRounds * kDeadline));
    ExpectModelsNear(network, expected, 1e-4f);
    for (PeerId id = 1; id <= topology.peers; ++id) {
      const GossipCounters& c = network.session(id).counters();
      EXPECT_EQ(c.rounds_completed, kRounds);
      EXPECT_EQ(c.steps_completed, kRounds);
      // A model and a tracker to every neighbour each round, then a Leave.
      const std::uint64_t degree = Degree(topology, id);
      EXPECT_EQ(c.frames_sent, degree * (2 * kRounds + 1));
      EXPECT_EQ(c.models_accepted, degree * 2 * kRounds);
      EXPECT_EQ(c.total_rejected(), 0u);
      EXPECT_EQ(c.deadline_closes, 0u);
    }
  }
}

TEST(GossipTrackingTest, DetagMatchesTheReferenceAndAveragesItsBatches) {
  constexpr std::uint32_t kRounds = 20;
  const Topology ring{TopologyKind::kRing, 6};
  GossipNetwork network(ring, kRounds, 0.05f);
  network.gradient = &AlternatingGradient;
  const GossipConfig config = Configure(network, GossipAlgorithm::kDetag, 3, 0.3f, 2);
  network.InitAll();
  const Vectors expected = ReferenceRun(ring, config, network, &AlternatingGradient);
  ASSERT_TRUE(network.Run(kRounds * 3 * kDeadline));
  ExpectModelsNear(network, expected, 1e-4f);
  const GossipCounters& c = network.session(1).counters();
  EXPECT_EQ(c.rounds_completed, kRounds);
  EXPECT_EQ(c.steps_completed, 3u * kRounds);
  EXPECT_EQ(c.frames_sent, 2u * (2 * 3 * kRounds + 1));
  // Two calls per round, reported once per round: 2 * samples_per_step (8) on its first frame.
  std::uint64_t work = 0;
  for (const std::uint64_t w : network.work_samples_seen) work += w;
  EXPECT_EQ(work, 6u * kRounds * 2u * 8u);

  // One batch per round instead: the +0.5 bias of call 0 is never cancelled, and the models
  // differ from the two-batch run's.
  GossipNetwork single(ring, kRounds, 0.05f);
  single.gradient = &AlternatingGradient;
  Configure(single, GossipAlgorithm::kDetag, 3, 0.3f, 1);
  single.InitAll();
  ASSERT_TRUE(single.Run(kRounds * 3 * kDeadline));
  EXPECT_GT(std::fabs(single.session(1).model()[0] - network.session(1).model()[0]), 0.01f);
}

// ---- Accelerated gossip ----

TEST(GossipTrackingTest, AcceleratedGossipWithZeroEtaIsPlainGossip) {
  // lr = 0: DeTAG's round with R = 4 and eta_g = 0 is W^4, as are four D-PSGD rounds.
  const Topology ring{TopologyKind::kRing, 8};
  GossipNetwork detag(ring, 1, 0.0f);
  Configure(detag, GossipAlgorithm::kDetag, 4, 0.0f);
  detag.InitAll();
  ASSERT_TRUE(detag.Run(4 * kDeadline));
  GossipNetwork dpsgd(ring, 4, 0.0f);
  dpsgd.InitAll();
  ASSERT_TRUE(dpsgd.Run(4 * kDeadline));
  Vectors initial;
  for (PeerId id = 1; id <= 8; ++id) initial.push_back(detag.peer(id).initial);
  const Vectors expected = DenseAcceleratedGossip(ring, initial, 4, 0.0f);
  ExpectModelsNear(detag, expected, 1e-5f);
  ExpectModelsNear(dpsgd, expected, 1e-5f);
}

TEST(GossipTrackingTest, AcceleratedGossipContractsFasterThanPlainGossipOnARing) {
  const Topology ring{TopologyKind::kRing, 16};
  std::vector<std::byte> scratch(SpectrumScratchBytes(ring));
  MixingSpectrum spectrum;
  ASSERT_TRUE(ComputeMixingSpectrum(ring, MixingRule::kMetropolisHastings, scratch, spectrum).ok());
  const float eta = AcceleratedGossipRate(spectrum.lambda);
  const std::uint32_t steps = DetagGossipSteps(16, spectrum.lambda);
  ASSERT_EQ(steps, 6u);
  double consensus[2] = {0, 0};
  double initial = 0;
  for (const int accelerated : {0, 1}) {
    GossipNetwork network(ring, 2, 0.0f);  // pure averaging: two rounds of R steps
    Configure(network, GossipAlgorithm::kDetag, steps, accelerated ? eta : 0.0f);
    network.InitAll();
    initial = ConsensusDistance(network.Models());
    ASSERT_TRUE(network.Run(2 * steps * kDeadline));
    consensus[accelerated] = ConsensusDistance(network.Models());
    // The average is preserved either way (W doubly stochastic, AG a combination of W powers).
    std::vector<double> mean_before(TestLayout().dimension(), 0.0);
    std::vector<double> mean_after(TestLayout().dimension(), 0.0);
    for (PeerId id = 1; id <= 16; ++id) {
      for (std::size_t k = 0; k < mean_before.size(); ++k) {
        mean_before[k] += static_cast<double>(network.peer(id).initial[k]) / 16.0;
        mean_after[k] += static_cast<double>(network.session(id).model()[k]) / 16.0;
      }
    }
    for (std::size_t k = 0; k < mean_before.size(); ++k) {
      EXPECT_NEAR(mean_after[k], mean_before[k], 1e-4);
    }
  }
  // 12 plain rounds shrink the worst mode by lambda^12 = 0.53; AG by about sqrt(eta)^12 times a
  // polynomial factor — several times more.
  std::printf("consensus after 2 rounds of %u steps: initial %.4g, plain gossip %.4g, AG (eta_g %.3f) "
              "%.4g\n", steps, initial, consensus[0], static_cast<double>(eta), consensus[1]);
  EXPECT_LT(consensus[0], initial);
  EXPECT_LT(consensus[1], consensus[0] / 4.0) << "plain " << consensus[0] << " AG " << consensus[1];
}

// ---- Heterogeneous linear regression: tracking converges, D-PSGD stalls ----

struct LinregShard {
  std::span<const float> features;  // samples x dimension
  std::span<const float> targets;
  std::size_t dimension = 0;
};

// Full local gradient of f_i(x) = ||A_i x - y_i||^2 / (2 m).
Status LinregGradient(void* user, std::span<const float> point, std::uint32_t, std::uint32_t,
                      std::span<float> gradient) {
  const auto& shard = *static_cast<const LinregShard*>(user);
  const std::size_t d = shard.dimension;
  const std::size_t m = shard.targets.size();
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  for (std::size_t s = 0; s < m; ++s) {
    const float* row = shard.features.data() + s * d;
    float residual = -shard.targets[s];
    for (std::size_t k = 0; k < d; ++k) residual += row[k] * point[k];
    for (std::size_t k = 0; k < d; ++k) gradient[k] += residual * row[k] / static_cast<float>(m);
  }
  return Status::Ok();
}

TEST(GossipTrackingTest, TrackingConvergesOnHeterogeneousDataWhereDpsgdStalls) {
  // Experiment A's linear-regression generator (client means m_k ~ N(0, 5): very different
  // local optima) on a ring of 12 with weights 1/3, lr 0.02, and every algorithm given 2400 vectors per neighbour.
  constexpr std::uint32_t kPeers = 12;
  constexpr std::uint32_t kVectors = 2400;
  constexpr float kLr = 0.02f;
  LinearRegressionTaskParams params;
  params.clients = kPeers;
  params.dimension = TestLayout().dimension();
  params.samples_per_client = 50;
  std::vector<float> features(kPeers * 50 * params.dimension), targets(kPeers * 50),
      truths(kPeers * params.dimension);
  ASSERT_TRUE(GenerateLinearRegressionTask(params, features, targets, truths).ok());
  std::vector<float> optimum(params.dimension);
  std::vector<std::byte> solve_scratch(LeastSquaresScratchBytes(params.dimension));
  ASSERT_TRUE(SolveLeastSquares(LinearRegressionTaskView(params, features, targets), optimum,
                                solve_scratch)
                  .ok());
  std::vector<LinregShard> shards(kPeers + 1);
  for (std::uint32_t k = 0; k < kPeers; ++k) {
    shards[k + 1] = LinregShard{std::span<const float>(features).subspan(k * 50 * params.dimension,
                                                                         50 * params.dimension),
                                std::span<const float>(targets).subspan(k * 50, 50),
                                params.dimension};
  }

  const Topology ring{TopologyKind::kRing, kPeers};
  std::vector<std::byte> scratch(SpectrumScratchBytes(ring));
  MixingSpectrum spectrum;
  ASSERT_TRUE(ComputeMixingSpectrum(ring, MixingRule::kMetropolisHastings, scratch, spectrum).ok());
  const std::uint32_t steps = DetagGossipSteps(kPeers, spectrum.lambda);

  // log10 of mean_i ||x_i - x*||^2 at the end of a run.
  const auto run = [&](GossipAlgorithm algorithm, std::uint32_t gossip_steps, float accel) {
    const std::uint32_t per_round = (TracksGradients(algorithm) ? 2 : 1) * gossip_steps;
    const std::uint32_t rounds = kVectors / per_round;
    GossipNetwork network(ring, rounds, kLr, 0.0f);
    network.gradient = &LinregGradient;
    for (PeerId id = 1; id <= kPeers; ++id) network.peer(id).user = &shards[id];
    Configure(network, algorithm, gossip_steps, accel);
    network.InitAll();
    EXPECT_TRUE(network.Run(std::uint64_t{rounds} * gossip_steps * kDeadline));
    double distance = 0.0;
    for (const std::vector<float>& x : network.Models()) {
      for (std::size_t k = 0; k < x.size(); ++k) {
        const double diff = static_cast<double>(x[k]) - static_cast<double>(optimum[k]);
        distance += diff * diff / kPeers;
      }
    }
    return std::log10(distance);
  };
  const double dpsgd = run(GossipAlgorithm::kDpsgd, 1, 0.0f);
  const double tracking = run(GossipAlgorithm::kGradientTracking, 1, 0.0f);
  const double detag = run(GossipAlgorithm::kDetag, steps, AcceleratedGossipRate(spectrum.lambda));
  std::printf("log10 mean ||x_i - x*||^2 after %u vectors: D-PSGD %.2f, GT %.2f, DeTAG (R %u) %.2f\n",
              kVectors, dpsgd, tracking, steps, detag);
  EXPECT_GT(dpsgd, -1.0);  // the bias floor of heterogeneous data
  EXPECT_LT(tracking, -8.0);
  EXPECT_LT(detag, -3.0);
  EXPECT_LT(tracking, dpsgd - 6.0);
  EXPECT_LT(detag, dpsgd - 2.0);
}

// ---- Faults ----

TEST(GossipTrackingTest, SilentPeerIsReweightedEveryStepWhileTracking) {
  constexpr std::uint32_t kRounds = 10;
  for (const auto& [algorithm, steps, accel] :
       {std::tuple{GossipAlgorithm::kGradientTracking, 1u, 0.0f},
        std::tuple{GossipAlgorithm::kDetag, 3u, 0.3f}}) {
    SCOPED_TRACE(GossipAlgorithmName(algorithm));
    GossipNetwork network({TopologyKind::kRing, 8}, kRounds, 0.05f);
    Configure(network, algorithm, steps, accel);
    network.InitAll();
    network.peer(3).silent = true;
    ASSERT_TRUE(network.Run(4 * kRounds * steps * kDeadline));
    for (const PeerId id : {2u, 4u}) {
      const GossipCounters& c = network.session(id).counters();
      EXPECT_EQ(c.rounds_completed, kRounds);
      EXPECT_EQ(c.deadline_closes, kRounds * steps);
      EXPECT_EQ(c.neighbours_missed, kRounds * steps);
      EXPECT_EQ(c.reweighted_steps, kRounds * steps);
      GossipRoundEvent event;
      std::uint32_t events = 0;
      while (network.session(id).PollRoundEvent(event)) {
        EXPECT_TRUE(event.deadline_passed);
        EXPECT_EQ(event.neighbours_missed, steps);
        EXPECT_EQ(event.neighbours_heard, steps);
        ++events;
      }
      EXPECT_EQ(events, kRounds);
    }
    for (PeerId id = 1; id <= 8; ++id) {
      EXPECT_TRUE(network.session(id).Finished()) << id;
      EXPECT_TRUE(network.session(id).status().ok()) << id;
      for (const float v : network.session(id).model()) EXPECT_TRUE(std::isfinite(v));
      for (const float v : network.session(id).tracker()) EXPECT_TRUE(std::isfinite(v));
    }
  }
}

TEST(GossipTrackingTest, FuzzedNetworkNeverCrashesOrStallsWhileTracking) {
  constexpr std::uint32_t kRounds = 20;
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    GossipNetwork network({TopologyKind::kRing, 5}, kRounds, 0.05f, 5.0f, seed);
    Configure(network, seed % 2 == 0 ? GossipAlgorithm::kGradientTracking : GossipAlgorithm::kDetag,
              seed % 2 == 0 ? 1u : 3u, seed % 2 == 0 ? 0.0f : 0.4f);
    network.InitAll();
    ExpectFinishesUnderFuzzing(network, 5, kRounds, 10 * kRounds * 3 * kDeadline);
  }
}

// ---- Frames a tracking peer does and does not accept ----

TEST(GossipTrackingTest, ExchangesOutsideTheAlgorithmAreRejected) {
  const Topology ring{TopologyKind::kRing, 4};
  const std::vector<float> values(TestLayout().dimension(), 1.0f);
  // D-PSGD never exchanges a tracker; DeTAG with R = 2 never a step 2.
  GossipNetwork dpsgd(ring, 3, 0.1f);
  dpsgd.InitAll();
  dpsgd.session(1).OnFrame(2, GossipFrame(2, 0, values, {0, 0, wire::GossipVector::kTracker}).bytes(),
                           0);
  EXPECT_EQ(dpsgd.session(1).counters().rejected_for(GossipRejectReason::kWrongExchange), 1u);

  GossipNetwork detag(ring, 3, 0.1f);
  Configure(detag, GossipAlgorithm::kDetag, 2, 0.2f);
  detag.InitAll();
  GossipPeerSession& session = detag.session(1);
  session.OnFrame(2, GossipFrame(2, 0, values, {0, 2, wire::GossipVector::kModel}).bytes(), 0);
  session.OnFrame(2, GossipFrame(2, 0, values, {0, 0, wire::GossipVector::kModelDelta}).bytes(), 0);
  EXPECT_EQ(session.counters().rejected_for(GossipRejectReason::kWrongExchange), 2u);
  // Step 0 and step 1 of round 0 are accepted (the next step is buffered), one copy of each
  // vector; round 1 step 0 is two steps ahead.
  session.OnFrame(2, GossipFrame(2, 0, values, {0, 0, wire::GossipVector::kTracker}).bytes(), 0);
  session.OnFrame(2, GossipFrame(2, 0, values, {0, 1, wire::GossipVector::kTracker}).bytes(), 0);
  session.OnFrame(2, GossipFrame(2, 0, values, {0, 1, wire::GossipVector::kTracker}).bytes(), 0);
  session.OnFrame(2, GossipFrame(2, 1, values, {0, 0, wire::GossipVector::kModel}).bytes(), 0);
  EXPECT_EQ(session.counters().models_accepted, 2u);
  EXPECT_EQ(session.counters().models_buffered, 1u);
  EXPECT_EQ(session.counters().rejected_for(GossipRejectReason::kDuplicate), 1u);
  EXPECT_EQ(session.counters().rejected_for(GossipRejectReason::kFuture), 1u);
}

TEST(GossipTrackingTest, ConfigurationsOutsideTheAlgorithmAreRejected) {
  GossipConfig config;
  config.mixing = MakeMixingRow({TopologyKind::kRing, 4}, MixingRule::kMetropolisHastings, 1).value();
  config.layout = TestLayout();
  ASSERT_TRUE(ValidateGossipConfig(config).ok());
  GossipConfig bad = config;
  bad.gossip_steps = 2;  // D-PSGD takes one step
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  bad = config;
  bad.algorithm = GossipAlgorithm::kGradientTracking;
  bad.accel = 0.3f;
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  bad = config;
  bad.algorithm = GossipAlgorithm::kDetag;
  bad.gossip_steps = 0;
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  bad.gossip_steps = kMaxGossipSteps + 1;
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  bad.gossip_steps = 3;
  bad.accel = 1.0f;
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  bad.accel = std::nanf("");
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  bad.accel = 0.5f;
  EXPECT_TRUE(ValidateGossipConfig(bad).ok());
  bad.phase_batches = 0;
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  bad.algorithm = static_cast<GossipAlgorithm>(9);
  EXPECT_FALSE(ValidateGossipConfig(bad).ok());
  // Arena sizes: D-PSGD 4 vectors; GT 8; DeTAG with eta_g, R > 1 and B > 1: 13.
  EXPECT_EQ(GossipPeerSession::ModelVectors(config), 4u);
  GossipConfig tracking = config;
  tracking.algorithm = GossipAlgorithm::kGradientTracking;
  EXPECT_EQ(GossipPeerSession::ModelVectors(tracking), 8u);
  GossipConfig detag = config;
  detag.algorithm = GossipAlgorithm::kDetag;
  detag.gossip_steps = 4;
  detag.accel = 0.4f;
  detag.phase_batches = 3;
  EXPECT_EQ(GossipPeerSession::ModelVectors(detag), 13u);
}

}  // namespace
}  // namespace edgesgd::protocol
