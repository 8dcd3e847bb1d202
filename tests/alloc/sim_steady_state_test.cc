// After warm-up, SimNetwork processes frames without touching the heap: not one operator new or
// malloc.

#include <gtest/gtest.h>

#include <cstdint>

#include "alloc/allocation_counter.h"
#include "edgesgd/sim/sim_network.h"
#include "sim/fake_sessions.h"

namespace edgesgd::sim {
namespace {

using testing::PingPongSession;

constexpr protocol::TimeNs kMs = 1'000'000;

TEST(SimSteadyStateTest, FramesAndFaultsDoNotAllocate) {
  SimConfig config;
  config.ns_per_sample = 1'000;
  config.faults.corruption = 0.2;  // corruption copies and flips in place: still no allocation
  config.faults.dropout = 0.0;
  SimNetwork network(config);
  // Two independent ping-pong pairs over links with bandwidth, latency and compute.
  PingPongSession a1(2, true, 2000, 1500, 32);
  PingPongSession a2(1, false, 2000, 1500);
  PingPongSession b1(4, true, 2000, 300, 8);
  PingPongSession b2(3, false, 2000, 300);
  network.AddSession(1, a1,
                     {.uplink_bps = 10'000'000,
                      .downlink_bps = 20'000'000,
                      .latency_ns = 3 * kMs,
                      .compute_speed = 1.5});
  network.AddSession(2, a2, {.uplink_bps = 5'000'000, .latency_ns = 1 * kMs});
  network.AddSession(3, b1, {.downlink_bps = 1'000'000, .latency_ns = 2 * kMs});
  network.AddSession(4, b2, {.latency_ns = 1 * kMs, .compute_speed = 0.7});
  std::uint64_t observed = 0;
  network.SetObserver([&observed](const SimEvent&) { ++observed; });

  // Warm-up: pools and the event heap reach their peak size.
  ASSERT_EQ(network.RunUntil(100 * kMs), StopReason::kRunning);
  const std::uint64_t events_before = network.events_processed();
  const std::size_t allocations_before = edgesgd::testing::HeapAllocationCount();
  const StopReason reason = network.Run();
  const std::size_t allocations_after = edgesgd::testing::HeapAllocationCount();

  EXPECT_EQ(reason, StopReason::kAllFinished);
  EXPECT_GT(allocations_before, 0u);  // the counter sees the warm-up allocations
  EXPECT_EQ(allocations_after - allocations_before, 0u);
  EXPECT_GT(network.events_processed() - events_before, 7000u);
  EXPECT_EQ(a1.received(), 2000u);
  EXPECT_EQ(b1.received(), 2000u);
  EXPECT_GT(network.counters(1).frames_corrupted, 0u);
  EXPECT_EQ(observed, network.session_calls());
}

}  // namespace
}  // namespace edgesgd::sim
