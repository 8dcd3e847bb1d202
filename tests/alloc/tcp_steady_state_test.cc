// Zero heap allocation in the TCP driver's steady state: a server and four workers, each with
// its own SessionDriver (its own io_context and thread; tcp::RunOnLoopback), train over
// loopback sockets. After a
// warm-up of 20 rounds (connections, receive buffers grown to the largest frame, send-queue
// slots sized, Asio's handler memory recycled), 100 more rounds — socket reads and writes,
// timers, frames built, decoded, aggregated — must not call operator new or malloc once, in any
// of the five threads. With frame authentication on too: hellos at connection time, then every
// frame sealed and opened as an HMAC-SHA256 record. The same holds for the library's
// tcp::Server and tcp::Workers sharing one caller-owned io_context, round callback included.

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc/allocation_counter.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/loopback.h"
#include "edgesgd/tcp/server.h"
#include "edgesgd/tcp/worker.h"
#include "protocol/protocol_harness.h"

namespace edgesgd {
namespace {

using protocol::testing::ArenaStorage;
using protocol::testing::QuadraticProblem;

constexpr std::uint32_t kWorkers = 4;
constexpr std::uint32_t kWarmupRounds = 20;
constexpr std::uint32_t kMeasuredRounds = 100;

// Runs `config` to the end; authenticated with `keys` when not null.
void RunCase(const char* name, const protocol::RunConfig& config,
             const auth::KeyRing* keys = nullptr) {
  protocol::ServerOptions options;
  options.workers = kWorkers;
  options.quorum = kWorkers;
  ArenaStorage server_storage(protocol::ServerSession::ArenaBytes(config, options));
  protocol::ServerSession server;
  ASSERT_TRUE(server
                  .Init(server_storage.arena, AllCodecs(), config, options,
                        std::vector<float>(config.layout.dimension(), 1.0f))
                  .ok());

  std::atomic<std::size_t> at_warmup{0};
  std::atomic<std::size_t> at_end{0};
  const auto hook = [&] {
    if (server.round() == kWarmupRounds && at_warmup == 0) {
      at_warmup = testing::HeapAllocationCount();
    }
    if (server.round() == kWarmupRounds + kMeasuredRounds && at_end == 0) {
      at_end = testing::HeapAllocationCount();
    }
    protocol::RoundEvent round;
    while (server.PollRoundEvent(round)) {
    }
  };

  std::vector<std::unique_ptr<QuadraticProblem>> problems;
  std::vector<std::unique_ptr<ArenaStorage>> storages;
  std::vector<std::unique_ptr<protocol::WorkerSession>> workers;
  std::vector<protocol::WorkerSession*> pointers;
  const std::vector<std::vector<float>> targets =
      protocol::testing::Targets(kWorkers, config.layout.dimension());
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    problems.push_back(std::make_unique<QuadraticProblem>());
    problems.back()->target = targets[w];
    storages.push_back(
        std::make_unique<ArenaStorage>(protocol::WorkerSession::ArenaBytes(config)));
    workers.push_back(std::make_unique<protocol::WorkerSession>());
    protocol::WorkerOptions worker_options;
    worker_options.device_id = w + 1;
    worker_options.gradient = &protocol::testing::QuadraticGradient;
    worker_options.codecs = &AllCodecs();
    worker_options.user = problems.back().get();
    worker_options.heartbeat_interval_ns = 5 * tcp::kNsPerMs;  // heartbeats in the window too
    ASSERT_TRUE(workers.back()->Init(storages.back()->arena, worker_options).ok());
    pointers.push_back(workers.back().get());
  }

  const HostResult<tcp::LoopbackResult> ran =
      tcp::RunOnLoopback(server, pointers, hook, {.keys = keys});
  ASSERT_TRUE(ran.ok()) << ran.message();
  const tcp::LoopbackResult& result = *ran;

  ASSERT_EQ(result.server_stop, tcp::DriverStop::kFinished) << name;
  ASSERT_TRUE(server.Finished()) << name;
  ASSERT_GT(at_warmup.load(), 0u) << name;
  ASSERT_GT(at_end.load(), 0u) << name;
  EXPECT_EQ(at_end - at_warmup, 0u)
      << name << ": " << (at_end - at_warmup) << " allocations in " << kMeasuredRounds
      << " rounds over TCP";
  for (const auto& worker : workers) EXPECT_TRUE(worker->Finished()) << name;
}

TEST(TcpSteadyStateTest, RoundsOverSocketsDoNotAllocate) {
  protocol::RunConfig top_k = protocol::testing::MeanConfig(2000, kCodecId<TopKCodec>,
                                                            kWarmupRounds + kMeasuredRounds + 10);
  top_k.feedback.learning_rate = 0.02f;
  RunCase("mean_top_k", top_k);
  protocol::RunConfig majority =
      protocol::testing::MajorityConfig(2000, kWarmupRounds + kMeasuredRounds + 10);
  majority.downlink = protocol::DownlinkKind::kAggregate;
  RunCase("majority_aggregate_downlink", majority);

  auth::FixedKeyRing<kWorkers> keys;
  for (std::uint32_t device = 1; device <= kWorkers; ++device) {
    std::array<std::byte, auth::kKeyBytes> key;
    for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::byte>(device + 3 * i);
    ASSERT_TRUE(keys.Add(device, key).ok());
  }
  RunCase("mean_top_k_authenticated", top_k, &keys);
}

TEST(TcpSteadyStateTest, LibraryNodesOnOneLoopDoNotAllocate) {
  protocol::RunConfig config =
      protocol::testing::MeanConfig(2000, kCodecId<TopKCodec>, kWarmupRounds + kMeasuredRounds + 10);
  config.feedback.learning_rate = 0.02f;
  const std::vector<float> initial(config.layout.dimension(), 1.0f);
  asio::io_context io;
  tcp::Server server(io);
  tcp::ServerSettings settings;
  settings.run = config;
  settings.server.workers = kWorkers;
  settings.server.quorum = kWorkers;
  settings.initial_model = initial;
  settings.listen = tcp::Endpoint{"127.0.0.1", 0};
  const HostResult<> opened = server.Open(settings);
  ASSERT_TRUE(opened.ok()) << opened.message();
  std::size_t at_warmup = 0;
  std::size_t at_end = 0;
  std::uint64_t rounds = 0;
  server.OnRound([&](const protocol::RoundEvent& round, std::span<const float>) {
    ++rounds;
    if (round.round + 1 == kWarmupRounds) at_warmup = testing::HeapAllocationCount();
    if (round.round + 1 == kWarmupRounds + kMeasuredRounds) {
      at_end = testing::HeapAllocationCount();
    }
  });
  std::vector<QuadraticProblem> problems(kWorkers);
  std::vector<std::unique_ptr<tcp::Worker>> workers;
  const std::vector<std::vector<float>> targets =
      protocol::testing::Targets(kWorkers, config.layout.dimension());
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    problems[w].target = targets[w];
    tcp::WorkerSettings worker_settings;
    worker_settings.server = tcp::Endpoint{"127.0.0.1", server.listen_port()};
    worker_settings.worker.device_id = w + 1;
    worker_settings.worker.gradient = &protocol::testing::QuadraticGradient;
    worker_settings.worker.user = &problems[w];
    worker_settings.worker.heartbeat_interval_ns = 5 * tcp::kNsPerMs;
    workers.push_back(std::make_unique<tcp::Worker>(io));
    const HostResult<> worker_opened = workers.back()->Open(worker_settings);
    ASSERT_TRUE(worker_opened.ok()) << worker_opened.message();
    workers.back()->Start([](tcp::DriverStop) {});
  }
  tcp::DriverStop stop = tcp::DriverStop::kStopped;
  server.Start([&stop](tcp::DriverStop reason) { stop = reason; });
  io.run();
  ASSERT_EQ(stop, tcp::DriverStop::kFinished);
  ASSERT_EQ(rounds, config.rounds);
  ASSERT_GT(at_warmup, 0u);
  EXPECT_EQ(at_end - at_warmup, 0u)
      << (at_end - at_warmup) << " allocations in " << kMeasuredRounds << " rounds";
}

}  // namespace
}  // namespace edgesgd
