// After warm-up, SimNetwork processes frames without touching the heap. This file replaces the
// global operator new of the sim_tests binary with a counting one (operator new only: the
// simulator's containers allocate through it).

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "edgesgd/sim/sim_network.h"
#include "sim/fake_sessions.h"

namespace {

std::atomic<std::uint64_t> g_news{0};

void* CountedNew(std::size_t size) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* pointer = std::malloc(size == 0 ? 1 : size)) return pointer;
  throw std::bad_alloc();
}

void* CountedAlignedNew(std::size_t size, std::align_val_t alignment) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(alignment);
  if (void* pointer = std::aligned_alloc(align, (size + align - 1) / align * align)) {
    return pointer;
  }
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) { return CountedNew(size); }
void* operator new[](std::size_t size) { return CountedNew(size); }
void* operator new(std::size_t size, std::align_val_t alignment) {
  return CountedAlignedNew(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return CountedAlignedNew(size, alignment);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete[](void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::align_val_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::align_val_t) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t, std::align_val_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::size_t, std::align_val_t) noexcept {
  std::free(pointer);
}

namespace edgesgd::sim {
namespace {

using testing::PingPongSession;

constexpr protocol::TimeNs kMs = 1'000'000;

TEST(SimAllocation, SteadyStateProcessesFramesWithoutHeapAllocations) {
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
  const std::uint64_t news_before = g_news.load();
  const StopReason reason = network.Run();
  const std::uint64_t news_after = g_news.load();

  EXPECT_EQ(reason, StopReason::kAllFinished);
  EXPECT_GT(news_before, 0u);  // the counter sees the warm-up allocations
  EXPECT_EQ(news_after - news_before, 0u);
  EXPECT_GT(network.events_processed() - events_before, 7000u);
  EXPECT_EQ(a1.received(), 2000u);
  EXPECT_EQ(b1.received(), 2000u);
  EXPECT_GT(network.counters(1).frames_corrupted, 0u);
  EXPECT_EQ(observed, network.session_calls());
}

}  // namespace
}  // namespace edgesgd::sim
