// End to end: the real ServerSession and four WorkerSessions train a quadratic problem inside
// the simulator, over slow, uneven links and devices. The codec is identity (momentum SGD): the
// test is about the simulator driving the sessions to completion reproducibly, not about
// compression quality, which the protocol and core tests cover.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/sim/sim_network.h"

namespace edgesgd::sim {
namespace {

using protocol::TimeNs;

constexpr TimeNs kMs = 1'000'000;
constexpr std::size_t kDim = 32;
constexpr std::uint32_t kWorkers = 4;
constexpr std::uint32_t kRounds = 300;

// f_i(x) = |x - target_i|^2 / 2 on worker i; the optimum of the mean is the mean target.
struct Quadratic {
  std::vector<float> target;
};

Status QuadraticGradient(void* user, std::span<const float> point, std::uint32_t, std::uint32_t,
                         std::span<float> gradient) {
  const auto* problem = static_cast<const Quadratic*>(user);
  for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - problem->target[i];
  return Status::Ok();
}

// Deterministic targets in [-1, 1) from an LCG (integer arithmetic, identical everywhere).
std::vector<float> Target(std::uint32_t worker) {
  std::vector<float> values(kDim);
  std::uint32_t state = (worker + 99) * 2654435761u + 12345u;
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) * 0x1.0p-23f - 1.0f;
  }
  return values;
}

// Arena memory owned by the test (heap, tests only). The blocks are 16-byte aligned so the
// arena skips nothing: a Join advertises the arena bytes left, and with 8-byte aligned storage
// (armhf's operator new) that number, and so the trace, would vary from run to run.
struct ArenaStorage {
  struct alignas(kArenaAlignment) Block {
    std::byte bytes[kArenaAlignment];
  };
  explicit ArenaStorage(std::size_t bytes)
      : blocks(bytes / kArenaAlignment + 1), arena(std::as_writable_bytes(std::span(blocks))) {}
  std::vector<Block> blocks;
  Arena arena;
};

struct TrainingResult {
  StopReason reason;
  TimeNs end;
  std::uint64_t hash;
  std::uint64_t rounds_completed;
  std::vector<TimeNs> round_close_times;
  std::vector<float> model;
  float start_distance;
  float end_distance;
  bool workers_finished;
  DeviceCounters totals;
};

float Distance(std::span<const float> a, std::span<const float> b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    sum += diff * diff;
  }
  return static_cast<float>(std::sqrt(sum));
}

TrainingResult Train(std::uint64_t seed, const FaultConfig& faults,
                     TimeNs time_limit_ns = 3'600'000 * kMs) {
  protocol::RunConfig config;
  config.layout = TensorLayout::Single(kDim).value();
  config.codec = IdentityParams{};
  config.feedback.kind = FeedbackKind::kEf;
  config.feedback.learning_rate = 0.2f;
  config.feedback.momentum = 0.5f;
  config.feedback.local_steps = 1;
  config.rounds = kRounds;
  config.seed = 42;
  config.batch = 8;
  protocol::ServerOptions options;
  options.workers = kWorkers;
  options.quorum = kWorkers;
  options.round_deadline_ns = 2'000 * kMs;

  const std::vector<float> initial(kDim, 3.0f);
  ArenaStorage server_storage(protocol::ServerSession::ArenaBytes(config, options));
  protocol::ServerSession server;
  const Status server_init =
      server.Init(server_storage.arena, AllCodecs(), config, options, initial);
  EXPECT_TRUE(server_init.ok()) << server_init.reason();

  std::vector<std::unique_ptr<Quadratic>> problems;
  std::vector<std::unique_ptr<ArenaStorage>> storages;
  std::vector<std::unique_ptr<protocol::WorkerSession>> workers;
  std::vector<float> optimum(kDim, 0.0f);
  for (std::uint32_t id = 1; id <= kWorkers; ++id) {
    problems.push_back(std::make_unique<Quadratic>(Quadratic{Target(id)}));
    for (std::size_t i = 0; i < kDim; ++i) optimum[i] += problems.back()->target[i] / kWorkers;
    storages.push_back(std::make_unique<ArenaStorage>(protocol::WorkerSession::ArenaBytes(config)));
    workers.push_back(std::make_unique<protocol::WorkerSession>());
    protocol::WorkerOptions worker_options;
    worker_options.device_id = id;
    worker_options.gradient = &QuadraticGradient;
    worker_options.codecs = &AllCodecs();
    worker_options.user = problems.back().get();
    worker_options.join_retry_ns = 500 * kMs;
    worker_options.heartbeat_interval_ns = 5'000 * kMs;
    const Status worker_init =
        workers.back()->Init(storages.back()->arena, worker_options);
    EXPECT_TRUE(worker_init.ok()) << worker_init.reason();
  }

  SimConfig sim_config;
  sim_config.seed = seed;
  sim_config.ns_per_sample = 200'000;  // 16 samples = 3.2 ms on the reference device
  sim_config.frame_overhead_bytes = 40;
  sim_config.faults = faults;
  sim_config.time_limit_ns = time_limit_ns;
  SimNetwork network(sim_config);
  network.AddSession(protocol::kServerPeer, server,
                     {.uplink_bps = 100'000'000, .downlink_bps = 1'000'000});
  const double speeds[kWorkers] = {1.0, 0.5, 2.0, 1.5};
  for (std::uint32_t id = 1; id <= kWorkers; ++id) {
    network.AddSession(id, *workers[id - 1],
                       {.uplink_bps = 250'000,
                        .downlink_bps = 2'000'000,
                        .latency_ns = 10 * kMs * id,
                        .compute_speed = speeds[id - 1]});
  }

  // The driver's view of the run: drain the server's round log after every event, as a metrics
  // writer would (the log keeps only the last 32 rounds), and step until the server is done.
  TrainingResult result{};
  network.SetObserver([&](const SimEvent&) {
    protocol::RoundEvent round;
    while (server.PollRoundEvent(round)) {
      EXPECT_EQ(round.time_closed, network.now());
      result.round_close_times.push_back(round.time_closed);
    }
  });
  while (!server.Finished() && network.Step()) {
  }
  // Let the final Leaves arrive (they may be lost: the run then ends at the time limit).
  result.reason = network.Run();
  result.end = network.now();
  result.hash = network.trace_hash();
  result.rounds_completed = server.counters().rounds_completed;
  result.model.assign(server.model().begin(), server.model().end());
  result.start_distance = Distance(initial, optimum);
  result.end_distance = Distance(server.model(), optimum);
  result.workers_finished = true;
  for (const auto& worker : workers) result.workers_finished &= worker->Finished();
  result.totals = network.TotalCounters();
  return result;
}

TEST(SimTraining, ServerAndFourWorkersTrainToCompletionIdenticallyTwice) {
  const TrainingResult first = Train(7, FaultConfig{});
  EXPECT_EQ(first.reason, StopReason::kAllFinished);
  EXPECT_TRUE(first.workers_finished);
  EXPECT_EQ(first.rounds_completed, kRounds);
  ASSERT_EQ(first.round_close_times.size(), kRounds);
  EXPECT_LT(first.end_distance, 1e-3f * first.start_distance)
      << first.start_distance << " -> " << first.end_distance;
  // A round cannot close before worker 4 (40 ms access latency) has had the broadcast and its
  // update back: two latencies plus ~7 ms to push 224 bytes through a 250 kbit/s uplink.
  for (std::size_t r = 1; r < first.round_close_times.size(); ++r) {
    EXPECT_GT(first.round_close_times[r], first.round_close_times[r - 1] + 87 * kMs);
  }
  EXPECT_EQ(first.totals.frames_lost, 0u);

  const TrainingResult second = Train(7, FaultConfig{});
  EXPECT_EQ(second.hash, first.hash);
  EXPECT_EQ(second.end, first.end);
  EXPECT_EQ(second.round_close_times, first.round_close_times);
  EXPECT_EQ(second.totals, first.totals);
  ASSERT_EQ(second.model.size(), first.model.size());
  EXPECT_EQ(std::memcmp(second.model.data(), first.model.data(), first.model.size() * 4), 0);
}

TEST(SimTraining, TrainingSurvivesLossAndDuplication) {
  // Lost broadcasts and updates are recovered by the server's deadline re-sends, duplicates are
  // rejected; the final Leaves may be lost, so workers need not finish.
  const FaultConfig faults{.loss = 0.05, .duplication = 0.05};
  const TrainingResult first = Train(11, faults);
  EXPECT_EQ(first.rounds_completed, kRounds);
  EXPECT_LT(first.end_distance, 1e-3f * first.start_distance)
      << first.start_distance << " -> " << first.end_distance;
  EXPECT_GT(first.totals.frames_lost, 0u);
  EXPECT_GT(first.totals.frames_duplicated, 0u);
  const TrainingResult second = Train(11, faults);
  EXPECT_EQ(second.hash, first.hash);
  EXPECT_EQ(second.round_close_times, first.round_close_times);
}

TEST(SimTraining, CorruptedFramesEndTheRunDeterministically) {
  // Frames carry no checksum, so a flipped bit that leaves a frame verifiable is acted on (a
  // payload value, or a round number that wedges a worker). Whatever the protocol makes of it,
  // the simulator must stop, and identically every time.
  const FaultConfig faults{.loss = 0.02, .corruption = 0.05, .duplication = 0.02};
  const TrainingResult first = Train(14, faults, 600'000 * kMs);
  EXPECT_NE(first.reason, StopReason::kRunning);
  EXPECT_GT(first.totals.frames_corrupted, 0u);
  const TrainingResult second = Train(14, faults, 600'000 * kMs);
  EXPECT_EQ(second.reason, first.reason);
  EXPECT_EQ(second.hash, first.hash);
  EXPECT_EQ(second.end, first.end);
  EXPECT_EQ(second.totals, first.totals);
}

}  // namespace
}  // namespace edgesgd::sim
