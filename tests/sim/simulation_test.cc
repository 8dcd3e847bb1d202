// The simulator's library entry points against the sessions driven by hand on a SimNetwork (the
// way the simulator is driven without them): the same settings must give the same run — every
// round at the same virtual time with the same bytes and model, the same final model and
// network counters — with faults, uneven devices, sign-flip attackers and device threads; plus
// DEF-A's read-out and Init's refusals.

#include "edgesgd/sim/simulation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/protocol/topology.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::sim {
namespace {

using protocol::testing::NegatedQuadraticGradient;
using protocol::testing::QuadraticGradient;
using protocol::testing::QuadraticProblem;

constexpr std::size_t kDim = 24;
constexpr std::uint32_t kWorkers = 5;
constexpr std::uint32_t kRounds = 30;
constexpr protocol::TimeNs kMs = 1'000'000;

// What a run shows of itself, round by round.
struct Trace {
  std::vector<protocol::TimeNs> times;
  std::vector<std::uint64_t> bytes;  // up + down, cumulative
  std::vector<std::vector<float>> models;
  std::vector<float> final_model;
  DeviceCounters network;
};

// Uneven devices on slow links, with every kind of fault.
SimConfig FaultyNetwork() {
  SimConfig network;
  network.seed = 11;
  network.ns_per_sample = 50'000;
  network.faults.loss = 0.05;
  network.faults.corruption = 0.03;
  network.faults.duplication = 0.03;
  network.faults.dropout = 0.05;
  network.faults.dropout_epoch_ns = 200 * kMs;
  return network;
}

std::vector<SimDevice> UnevenDevices(std::size_t count) {
  std::vector<SimDevice> devices(count);
  for (std::size_t i = 0; i < count; ++i) {
    devices[i].profile =
        DeviceProfile{2'000'000, 4'000'000, (1 + i) * kMs, 1.0 / static_cast<double>(1 + i)};
    devices[i].samples_per_step = 8;
  }
  return devices;
}

// Each device's gradient from its quadratic problem.
auto GradientsOf(std::vector<QuadraticProblem>& problems) {
  return [&problems](std::size_t device, std::span<const float> point, std::uint32_t round,
                     std::uint32_t step, std::span<float> gradient) {
    return QuadraticGradient(&problems[device], point, round, step, gradient);
  };
}

ServerSimulationSettings ServerRun(protocol::RunConfig run, std::span<const float> initial,
                                   std::vector<QuadraticProblem>& problems) {
  ServerSimulationSettings settings;
  settings.run = run;
  settings.server.workers = kWorkers;
  settings.server.quorum = kWorkers - 1;
  settings.server.round_deadline_ns = 300 * kMs;
  settings.server.liveness_timeout_ns = protocol::kNever;  // workers send no heartbeats
  settings.initial_model.assign(initial.begin(), initial.end());
  settings.network = FaultyNetwork();
  settings.workers = UnevenDevices(kWorkers);
  settings.gradient = GradientsOf(problems);
  return settings;
}

std::vector<QuadraticProblem> Problems(std::size_t count) {
  std::vector<QuadraticProblem> problems(count);
  const std::vector<std::vector<float>> targets = protocol::testing::Targets(count, kDim);
  for (std::size_t i = 0; i < count; ++i) problems[i].target = targets[i];
  return problems;
}

// The run of `settings` with the sessions set up and driven by hand, workers 1..sign_flippers
// on the negated gradient; with `poison_idle`, every worker's IdleBuffers() are filled with NaN
// after every event that concerned it.
Trace ServerRunByHand(const ServerSimulationSettings& settings,
                      std::vector<QuadraticProblem>& problems, std::uint32_t sign_flippers = 0,
                      bool poison_idle = false) {
  protocol::ServerSession server;
  std::vector<std::byte> server_storage(
      protocol::ServerSession::ArenaBytes(settings.run, settings.server) + kArenaAlignment);
  Arena server_arena{std::span<std::byte>(server_storage)};
  EXPECT_TRUE(
      server.Init(server_arena, AllCodecs(), settings.run, settings.server, settings.initial_model)
          .ok());
  std::vector<std::vector<std::byte>> storages(kWorkers);
  std::vector<std::unique_ptr<Arena>> arenas;
  std::vector<std::unique_ptr<protocol::WorkerSession>> workers;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    storages[w].resize(protocol::WorkerSession::ArenaBytes(settings.run) + kArenaAlignment);
    arenas.push_back(std::make_unique<Arena>(std::span<std::byte>(storages[w])));
    workers.push_back(std::make_unique<protocol::WorkerSession>());
    protocol::WorkerOptions options;
    options.device_id = w + 1;
    options.gradient = w < sign_flippers ? &NegatedQuadraticGradient : &QuadraticGradient;
    options.codecs = &AllCodecs();
    options.user = &problems[w];
    options.samples_per_step = settings.workers[w].samples_per_step;
    EXPECT_TRUE(workers[w]->Init(*arenas[w], options).ok());
  }
  SimNetwork network(settings.network);
  network.AddSession(protocol::kServerPeer, server, settings.server_device);
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    network.AddSession(w + 1, *workers[w], settings.workers[w].profile);
  }
  Trace trace;
  network.SetObserver([&](const SimEvent& event) {
    if (poison_idle && event.peer != protocol::kServerPeer) {
      for (const std::span<std::byte> region : workers[event.peer - 1]->IdleBuffers()) {
        std::fill(region.begin(), region.end(), std::byte{0xFF});  // 0xFFFFFFFF is a NaN
      }
    }
    protocol::RoundEvent round;
    while (server.PollRoundEvent(round)) {
      trace.times.push_back(round.time_closed);
      trace.bytes.push_back(round.bytes_up + round.bytes_down);
      trace.models.emplace_back(server.model().begin(), server.model().end());
    }
  });
  network.Run();
  EXPECT_TRUE(server.Finished());
  trace.final_model.assign(server.model().begin(), server.model().end());
  trace.network = network.TotalCounters();
  return trace;
}

Trace ServerRunByLibrary(const ServerSimulationSettings& settings) {
  ServerSimulation simulation;
  const HostResult<> init = simulation.Init(settings);
  EXPECT_TRUE(init.ok()) << init.message();
  Trace trace;
  simulation.OnRound([&trace](const protocol::RoundEvent& round, std::span<const float> model) {
    trace.times.push_back(round.time_closed);
    trace.bytes.push_back(round.bytes_up + round.bytes_down);
    trace.models.emplace_back(model.begin(), model.end());
  });
  const SimulationResult result = simulation.Run();
  EXPECT_TRUE(result.finished);
  EXPECT_EQ(result.rounds, kRounds);
  EXPECT_EQ(result.memory.server_arena_bytes,
            protocol::ServerSession::ArenaBytes(settings.run, settings.server));
  EXPECT_EQ(result.memory.device_arena_bytes, protocol::WorkerSession::ArenaBytes(settings.run));
  trace.final_model = result.model;
  trace.network = result.network;
  return trace;
}

void ExpectSameRun(const Trace& expected, const Trace& actual) {
  ASSERT_EQ(actual.times.size(), kRounds);
  EXPECT_EQ(actual.times, expected.times);
  EXPECT_EQ(actual.bytes, expected.bytes);
  EXPECT_EQ(actual.models, expected.models);
  EXPECT_EQ(actual.final_model, expected.final_model);
  EXPECT_EQ(actual.network, expected.network);
  EXPECT_GT(actual.network.frames_lost, 0u);  // the faults were there
}

TEST(SimulationTest, ServerSimulationIsTheSessionsOnASimNetwork) {
  const std::vector<float> initial(kDim, 2.0f);
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  const ServerSimulationSettings settings =
      ServerRun(protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds), initial, problems);
  ExpectSameRun(ServerRunByHand(settings, problems), ServerRunByLibrary(settings));
}

// Settings own their initial model: one built as a temporary is still there at Init.
TEST(SimulationTest, SettingsKeepATemporaryInitialModel) {
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  ServerSimulationSettings settings = ServerRun(
      protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds), {}, problems);
  settings.initial_model = std::vector<float>(kDim, 2.0f);
  std::vector<float> filler(kDim * 64, -7.0f);  // reuses freed memory, were it freed
  ServerSimulation simulation;
  const HostResult<> init = simulation.Init(settings);
  ASSERT_TRUE(init.ok()) << init.message();
  for (float value : simulation.server().model()) EXPECT_EQ(value, 2.0f);
  EXPECT_EQ(filler.front(), -7.0f);
}

// A diverging run does not finish normally: its result says why and in which round.
TEST(SimulationTest, ADivergingRunFailsWithTheRound) {
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  protocol::RunConfig run = protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds);
  run.feedback.learning_rate = 50.0f;  // each step overshoots the target by far more than it started
  ServerSimulationSettings settings = ServerRun(run, std::vector<float>(kDim, 2.0f), problems);
  settings.server.max_model_norm = 1e3f;
  ServerSimulation simulation;
  const HostResult<> init = simulation.Init(settings);
  ASSERT_TRUE(init.ok()) << init.message();
  const SimulationResult result = simulation.Run();
  EXPECT_FALSE(result.finished);
  EXPECT_EQ(result.status.code(), StatusCode::kDataLoss);
  EXPECT_LT(result.rounds, kRounds);
  EXPECT_NE(std::string(result.status.reason()).find("max_model_norm"), std::string::npos);
}

// Devices on equal links reach the same instant together, so with device threads their frames
// are handed out in parallel batches; faults included, the run is the one-thread run, round by
// round and byte by byte.
TEST(SimulationThreadsTest, DeviceThreadsChangeNothingButTheThreads) {
  const std::vector<float> initial(kDim, 2.0f);
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  ServerSimulationSettings settings =
      ServerRun(protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds), initial, problems);
  for (SimDevice& device : settings.workers) {
    device.profile = DeviceProfile{2'000'000, 4'000'000, 3 * kMs, 1.0};
  }
  const Trace by_hand = ServerRunByHand(settings, problems);
  std::mutex seen_mutex;
  std::uint32_t highest_thread = 0;
  const DeviceGradient plain = settings.gradient;
  settings.gradient = [&](std::size_t device, std::span<const float> point, std::uint32_t round,
                          std::uint32_t step, std::span<float> gradient) {
    {
      const std::lock_guard<std::mutex> lock(seen_mutex);
      highest_thread = std::max(highest_thread, DeviceThreadIndex());
    }
    return plain(device, point, round, step, gradient);
  };
  settings.network.device_threads = 3;
  ExpectSameRun(by_hand, ServerRunByLibrary(settings));
  EXPECT_EQ(highest_thread, 2u);  // the batches did run on the helpers
}

// What WorkerSession::IdleBuffers() lists is never read before it is written again: filling it
// with NaN after every event changes nothing, faults (re-sent rounds among them) included, for
// every aggregation component, local steps with a detached residual, plain compressed SGD,
// RegTop-k (which keeps its model copy), sampled participation and FedBuff.
TEST(SimulationTest, IdleBuffersAreNeverReadBeforeTheyAreWritten) {
  const std::vector<float> initial(kDim, 2.0f);
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  std::vector<protocol::testing::ComponentConfig> configs =
      protocol::testing::ConfigPerAggregation(kDim, kRounds);
  protocol::RunConfig local_steps = protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds);
  local_steps.feedback.kind = FeedbackKind::kDef;
  local_steps.feedback.local_steps = 3;
  configs.push_back({"local_steps_def", local_steps});
  protocol::RunConfig plain = protocol::testing::MeanConfig(kDim, kCodecId<RandKCodec>, kRounds);
  plain.feedback.kind = FeedbackKind::kNone;
  configs.push_back({"no_feedback", plain});
  configs.push_back(
      {"reg_top_k", protocol::testing::MeanConfig(kDim, kCodecId<RegTopKCodec>, kRounds)});
  protocol::RunConfig sampled = protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds);
  sampled.participation = 0.6f;
  configs.push_back({"sampled", sampled});
  protocol::RunConfig buffered = protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds);
  buffered.participation = 0.6f;
  buffered.async.buffer = 2;
  configs.push_back({"fedbuff", buffered});
  for (const protocol::testing::ComponentConfig& config : configs) {
    SCOPED_TRACE(config.component);
    const ServerSimulationSettings settings = ServerRun(config.config, initial, problems);
    ExpectSameRun(ServerRunByHand(settings, problems),
                  ServerRunByHand(settings, problems, 0, /*poison_idle=*/true));
  }
}

// Releasing the idle buffers' pages between rounds (a model large enough for them to span
// whole pages, devices sitting rounds out) gives the same run.
TEST(SimulationTest, ReleasingIdleMemoryChangesNothing) {
  constexpr std::size_t kLargeDim = 4096;
  const std::vector<float> initial(kLargeDim, 2.0f);
  std::vector<QuadraticProblem> problems(kWorkers);
  const std::vector<std::vector<float>> targets = protocol::testing::Targets(kWorkers, kLargeDim);
  for (std::size_t i = 0; i < kWorkers; ++i) problems[i].target = targets[i];
  protocol::RunConfig run = protocol::testing::MeanConfig(kLargeDim, kCodecId<TopKCodec>, kRounds);
  run.participation = 0.6f;
  ServerSimulationSettings settings = ServerRun(run, initial, problems);
  const Trace kept = ServerRunByLibrary(settings);
  settings.release_idle_memory = true;
  ExpectSameRun(kept, ServerRunByLibrary(settings));
}

TEST(SimulationTest, SignFlipAttackersOutvoteTheRest) {
  const std::vector<float> initial(kDim, 2.0f);
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  protocol::RunConfig majority = protocol::testing::MajorityConfig(kDim, kRounds);
  majority.downlink = protocol::DownlinkKind::kAggregate;
  ServerSimulationSettings settings = ServerRun(majority, initial, problems);
  const Trace honest = ServerRunByLibrary(settings);
  // Every target lies below the start, so honest votes move the model down. Devices 0-2 (workers
  // 1-3 of 5) negate their gradients through the oracle, as `simulate --attack sign_flip` does:
  // they outvote the rest and move it up.
  constexpr std::uint32_t kSignFlippers = 3;
  settings.gradient = [&problems](std::size_t device, std::span<const float> point,
                                  std::uint32_t round, std::uint32_t step,
                                  std::span<float> gradient) {
    return (device < kSignFlippers ? NegatedQuadraticGradient : QuadraticGradient)(
        &problems[device], point, round, step, gradient);
  };
  const Trace attacked = ServerRunByLibrary(settings);
  ExpectSameRun(ServerRunByHand(settings, problems, kSignFlippers), attacked);
  for (std::size_t i = 0; i < kDim; ++i) {
    EXPECT_LT(honest.final_model[i], initial[i]);
    EXPECT_GT(attacked.final_model[i], initial[i]);
  }
}

TEST(SimulationTest, DeaveragedModelSubtractsTheWorkersMeanResidual) {
  const std::vector<float> initial(kDim, 2.0f);
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  protocol::RunConfig def = protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds);
  def.feedback.kind = FeedbackKind::kDef;
  def.feedback.detach = 0.5f;
  ServerSimulation simulation;
  const HostResult<> init = simulation.Init(ServerRun(def, initial, problems));
  ASSERT_TRUE(init.ok()) << init.message();
  std::uint32_t checked = 0;
  simulation.OnRound([&](const protocol::RoundEvent&, std::span<const float> model) {
    const std::span<const float> readout = simulation.DeaveragedModel();
    bool differs = false;
    for (std::size_t i = 0; i < kDim; ++i) {
      float sum = 0.0f;
      for (std::size_t w = 0; w < kWorkers; ++w) {
        sum += simulation.worker(w).error_feedback().residual()[i];
      }
      EXPECT_EQ(readout[i], model[i] - sum / static_cast<float>(kWorkers));
      differs = differs || readout[i] != model[i];
    }
    checked += differs ? 1 : 0;
  });
  EXPECT_TRUE(simulation.Run().finished);
  EXPECT_GT(checked, 0u);  // top_k leaves residuals: the read-out is not the model
}

TEST(SimulationTest, GossipSimulationIsThePeersOnASimNetwork) {
  constexpr std::uint32_t kPeers = 6;
  const protocol::Topology ring{protocol::TopologyKind::kRing, kPeers};
  std::vector<QuadraticProblem> problems = Problems(kPeers);
  const std::vector<float> initial(kDim, 1.0f);
  GossipSimulationSettings settings;
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    protocol::GossipConfig config;
    config.algorithm = protocol::GossipAlgorithm::kGradientTracking;
    config.mixing =
        protocol::MakeMixingRow(ring, protocol::MixingRule::kMetropolisHastings, i + 1).value();
    config.layout = TensorLayout::Single(kDim).value();
    config.rounds = kRounds;
    config.learning_rate = 0.1f;
    config.neighbour_deadline_ns = 200 * kMs;
    settings.peers.push_back(config);
  }
  settings.initial_model = initial;
  settings.network = FaultyNetwork();
  settings.devices = UnevenDevices(kPeers);
  settings.gradient = GradientsOf(problems);

  // By hand: the peers on a network, nothing else.
  std::vector<std::vector<std::byte>> storages(kPeers);
  std::vector<std::unique_ptr<Arena>> arenas;
  std::vector<std::unique_ptr<protocol::GossipPeerSession>> peers;
  SimNetwork network(settings.network);
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    storages[i].resize(protocol::GossipPeerSession::ArenaBytes(settings.peers[i]) +
                       kArenaAlignment);
    arenas.push_back(std::make_unique<Arena>(std::span<std::byte>(storages[i])));
    peers.push_back(std::make_unique<protocol::GossipPeerSession>());
    protocol::GossipOptions options;
    options.gradient = &QuadraticGradient;
    options.user = &problems[i];
    options.samples_per_step = settings.devices[i].samples_per_step;
    options.initial_model = initial;
    ASSERT_TRUE(peers[i]->Init(*arenas[i], settings.peers[i], options).ok());
    network.AddSession(i + 1, *peers[i], settings.devices[i].profile);
  }
  network.Run();

  GossipSimulation simulation;
  const HostResult<> init = simulation.Init(settings);
  ASSERT_TRUE(init.ok()) << init.message();
  std::vector<std::uint32_t> rounds;
  protocol::TimeNs last_time = 0;
  simulation.OnRound([&](const GossipRound& round) {
    rounds.push_back(round.round);
    EXPECT_GE(round.time_ns, last_time);
    last_time = round.time_ns;
  });
  const SimulationResult result = simulation.Run();
  ASSERT_TRUE(result.finished);
  ASSERT_EQ(rounds.size(), kRounds);
  for (std::uint32_t r = 0; r < kRounds; ++r) EXPECT_EQ(rounds[r], r);
  EXPECT_EQ(result.network, network.TotalCounters());
  EXPECT_EQ(result.time_ns, network.now());
  std::vector<float> average(kDim, 0.0f);
  std::size_t largest_arena = 0;
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    const std::span<const float> model = simulation.peer(i).model();
    ASSERT_EQ(std::vector<float>(model.begin(), model.end()),
              std::vector<float>(peers[i]->model().begin(), peers[i]->model().end()));
    for (std::size_t k = 0; k < kDim; ++k) average[k] += model[k] / static_cast<float>(kPeers);
    largest_arena =
        std::max(largest_arena, protocol::GossipPeerSession::ArenaBytes(settings.peers[i]));
  }
  EXPECT_EQ(result.model, average);
  EXPECT_EQ(result.memory.device_arena_bytes, largest_arena);
  EXPECT_EQ(result.memory.server_arena_bytes, 0u);
}

// CHOCO and BEER on the simulated network (slow uneven links, duplicated frames): every peer
// finishes, every public copy (BEER: of the model and of the tracker) equals its owner's bit for
// bit, and a CHOCO peer sends fewer bytes than with dense D-PSGD.
TEST(SimulationTest, ChocoGossipKeepsPublicCopiesIdenticalAndSendsLess) {
  constexpr std::uint32_t kPeers = 6;
  const protocol::Topology ring{protocol::TopologyKind::kRing, kPeers};
  std::vector<QuadraticProblem> problems = Problems(kPeers);
  const std::vector<float> initial(kDim, 1.0f);
  const auto run = [&](protocol::GossipAlgorithm algorithm, const CodecParams& codec,
                       float gamma, GossipSimulation& simulation) {
    GossipSimulationSettings settings;
    for (std::uint32_t i = 0; i < kPeers; ++i) {
      protocol::GossipConfig config;
      config.algorithm = algorithm;
      config.codec = codec;
      config.consensus_step = gamma;
      config.mixing =
          protocol::MakeMixingRow(ring, protocol::MixingRule::kMetropolisHastings, i + 1).value();
      config.layout = TensorLayout::Single(kDim).value();
      config.rounds = kRounds;
      config.learning_rate = 0.1f;
      config.neighbour_deadline_ns = 10'000 * kMs;
      settings.peers.push_back(config);
    }
    settings.initial_model = initial;
    settings.network.seed = 5;
    settings.network.faults.duplication = 0.05;
    settings.devices = UnevenDevices(kPeers);
    settings.gradient = GradientsOf(problems);
    const HostResult<> init = simulation.Init(settings);
    EXPECT_TRUE(init.ok()) << init.message();
    std::uint64_t bytes_sent = 0;
    simulation.OnRound([&bytes_sent](const GossipRound& round) { bytes_sent = round.bytes_sent; });
    EXPECT_TRUE(simulation.Run().finished);
    return bytes_sent;
  };
  GossipSimulation choco;
  const std::uint64_t choco_bytes =
      run(protocol::GossipAlgorithm::kChoco, TopKParams{.k_ratio = 0.125f}, 0.2f, choco);
  GossipSimulation dense;
  const std::uint64_t dense_bytes =
      run(protocol::GossipAlgorithm::kDpsgd, IdentityParams{}, 1.0f, dense);
  EXPECT_LT(choco_bytes, dense_bytes);  // 3 of 24 coordinates (frame headers dominate here)

  // BEER: the same for the model's and the tracker's copies.
  GossipSimulation beer;
  const std::uint64_t beer_bytes =
      run(protocol::GossipAlgorithm::kBeer, TopKParams{.k_ratio = 0.125f}, 0.2f, beer);
  EXPECT_GT(beer_bytes, choco_bytes);  // two compressed vectors per round

  for (const GossipSimulation* simulation : {&choco, &beer}) {
    const std::size_t vectors = simulation == &beer ? 2 : 1;
    std::uint64_t duplicates = 0;
    for (std::uint32_t i = 0; i < kPeers; ++i) {
      const protocol::GossipPeerSession& holder = simulation->peer(i);
      duplicates += holder.counters().rejected_for(protocol::GossipRejectReason::kDuplicate);
      EXPECT_EQ(holder.counters().total_rejected(),
                holder.counters().rejected_for(protocol::GossipRejectReason::kDuplicate));
      for (const protocol::PeerId owner : holder.config().mixing.neighbour_ids()) {
        for (std::size_t vector = 0; vector < vectors; ++vector) {
          const std::span<const float> held = holder.public_copy(owner, vector);
          const std::span<const float> own =
              simulation->peer(owner - 1).public_copy(owner, vector);
          EXPECT_EQ(holder.public_copy_rounds(owner, vector), kRounds);
          ASSERT_EQ(held.size(), own.size());
          ASSERT_FALSE(held.empty());
          EXPECT_EQ(std::memcmp(held.data(), own.data(), held.size_bytes()), 0)
              << "peer " << i + 1 << "'s copy of " << owner << ", vector " << vector;
        }
      }
    }
    EXPECT_GT(duplicates, 0u);
  }
}

TEST(SimulationTest, InitNamesWhatItCouldNotSetUp) {
  std::vector<QuadraticProblem> problems = Problems(kWorkers);
  const std::vector<float> wrong_size(kDim + 1, 0.0f);
  {
    ServerSimulation simulation;
    const ServerSimulationSettings settings = ServerRun(
        protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds), wrong_size, problems);
    const HostResult<> init = simulation.Init(settings);
    EXPECT_EQ(init.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(init.message().rfind("server: ", 0), 0u) << init.message();
  }
  {
    ServerSimulation simulation;
    ServerSimulationSettings settings = ServerRun(
        protocol::testing::MeanConfig(kDim, kCodecId<TopKCodec>, kRounds), wrong_size, problems);
    settings.workers.pop_back();
    const HostResult<> init = simulation.Init(settings);
    EXPECT_EQ(init.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(init.message(), "one device per worker");
  }
  {
    GossipSimulation simulation;
    GossipSimulationSettings settings;
    settings.peers.resize(2);
    settings.devices.resize(2);
    settings.gradient = [](std::size_t, std::span<const float>, std::uint32_t, std::uint32_t,
                           std::span<float>) { return Status::Ok(); };
    const HostResult<> init = simulation.Init(settings);
    EXPECT_EQ(init.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(init.message().rfind("peer 1: ", 0), 0u) << init.message();
  }
}

}  // namespace
}  // namespace edgesgd::sim
