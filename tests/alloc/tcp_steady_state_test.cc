// Zero heap allocation in the TCP driver's steady state: a server and four workers, each with
// its own SessionDriver (its own io_context and thread; tcp::RunOnLoopback), train over
// loopback sockets. After a
// warm-up of 20 rounds (connections, receive buffers grown to the largest frame, send-queue
// slots sized, Asio's handler memory recycled), 100 more rounds — socket reads and writes,
// timers, frames built, decoded, aggregated — must not call operator new or malloc once, in any
// of the five threads. With frame authentication on too: hellos at connection time, then every
// frame sealed and opened as an HMAC-SHA256 record.

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc/allocation_counter.h"
#include "edgesgd/tcp/loopback.h"
#include "edgesgd/auth/key_ring.h"
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
                  .Init(server_storage.arena, config, options,
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
    worker_options.user = problems.back().get();
    worker_options.heartbeat_interval_ns = 5 * tcp::kNsPerMs;  // heartbeats in the window too
    ASSERT_TRUE(workers.back()->Init(storages.back()->arena, worker_options).ok());
    pointers.push_back(workers.back().get());
  }

  tcp::LoopbackResult result;
  std::string error;
  ASSERT_TRUE(tcp::RunOnLoopback(server, pointers, hook, result, error, keys).ok()) << error;

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
  protocol::RunConfig top_k =
      protocol::testing::MeanConfig(2000, CodecKind::kTopK, kWarmupRounds + kMeasuredRounds + 10);
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

}  // namespace
}  // namespace edgesgd
