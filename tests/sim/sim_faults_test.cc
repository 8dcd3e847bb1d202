// SimNetwork's random faults end to end (loss, corruption, duplication, drop-out epochs) and the
// determinism of whole runs.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "edgesgd/sim/sim_network.h"
#include "sim/fake_sessions.h"

namespace edgesgd::sim {
namespace {

using protocol::PeerId;
using protocol::TimeNs;
using testing::ScriptedSession;

constexpr TimeNs kMs = 1'000'000;

void ExpectRate(std::uint64_t count, std::uint64_t n, double p) {
  const double mean = static_cast<double>(n) * p;
  const double sigma = std::sqrt(mean * (1.0 - p));
  EXPECT_NEAR(static_cast<double>(count), mean, 5.0 * sigma) << "p=" << p << " n=" << n;
}

// A frame that survives a few flipped bits recognisably: its index, little-endian, 8 times.
constexpr std::size_t kCopies = 8;

std::vector<std::byte> IndexFrame(std::uint32_t index) {
  std::vector<std::byte> bytes(4 * kCopies);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::byte>((index >> (8 * (i % 4))) & 0xFFu);
  }
  return bytes;
}

struct DecodedFrame {
  std::uint32_t index;  // the majority of the copies (at most 3 of 8 can be damaged)
  bool intact;          // every copy agrees
};

DecodedFrame DecodeIndexFrame(std::span<const std::byte> bytes) {
  std::map<std::uint32_t, int> votes;
  for (std::size_t copy = 0; copy < kCopies; ++copy) {
    std::uint32_t value = 0;
    for (std::size_t b = 0; b < 4; ++b) {
      value |= static_cast<std::uint32_t>(bytes[copy * 4 + b]) << (8 * b);
    }
    ++votes[value];
  }
  std::uint32_t best = 0;
  int best_votes = 0;
  for (const auto& [value, count] : votes) {
    if (count > best_votes) {
      best = value;
      best_votes = count;
    }
  }
  return {best, votes.size() == 1};
}

TEST(SimNetworkFaults, LossCorruptionAndDuplicationMatchTheirProbabilities) {
  constexpr std::uint32_t kFrames = 20'000;
  SimConfig config;
  config.seed = 1234;
  config.faults.loss = 0.1;
  config.faults.corruption = 0.05;
  config.faults.duplication = 0.03;
  SimNetwork network(config);
  ScriptedSession server;
  ScriptedSession device;
  for (std::uint32_t i = 0; i < kFrames; ++i) device.Send(0, IndexFrame(i));
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.uplink_bps = 100'000'000, .latency_ns = 3 * kMs});
  EXPECT_EQ(network.Run(), StopReason::kIdle);

  std::map<std::uint32_t, int> copies;
  std::uint64_t damaged_indices = 0;
  std::uint32_t previous = 0;
  for (const auto& frame : server.received) {
    ASSERT_EQ(frame.bytes.size(), 4 * kCopies);
    const DecodedFrame decoded = DecodeIndexFrame(frame.bytes);
    ASSERT_LT(decoded.index, kFrames);
    ASSERT_GE(decoded.index, previous);  // one link, FIFO: never reordered
    previous = decoded.index;
    if (++copies[decoded.index] == 1 && !decoded.intact) ++damaged_indices;
  }
  std::uint64_t twice = 0;
  for (const auto& [index, count] : copies) {
    ASSERT_LE(count, 2);
    twice += count == 2 ? 1u : 0u;
  }

  const DeviceCounters& sent = network.counters(1);
  EXPECT_EQ(sent.frames_sent, kFrames);
  EXPECT_EQ(sent.frames_lost + copies.size(), kFrames);
  EXPECT_EQ(sent.frames_duplicated, twice);
  EXPECT_EQ(sent.frames_corrupted, damaged_indices);
  EXPECT_EQ(network.counters(0).frames_received, server.received.size());
  EXPECT_EQ(server.received.size(), copies.size() + twice);
  ExpectRate(sent.frames_lost, kFrames, 0.1);
  ExpectRate(sent.frames_corrupted, copies.size(), 0.05);
  ExpectRate(sent.frames_duplicated, copies.size(), 0.03);
  EXPECT_EQ(network.frames_in_flight(), 0u);
}

TEST(SimNetworkFaults, DuplicateFollowsTheOriginalThroughTheDownlink) {
  SimConfig config;
  config.faults.duplication = 1.0;
  SimNetwork network(config);
  ScriptedSession server;
  ScriptedSession device;
  device.Send(0, 1000, 5);
  network.AddSession(0, server, {.downlink_bps = 8'000'000});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  network.Run();
  ASSERT_EQ(server.received.size(), 2u);
  EXPECT_EQ(server.received[0].time, 2 * kMs);
  EXPECT_EQ(server.received[1].time, 3 * kMs);  // the copy crosses the 1 ms downlink too
  EXPECT_EQ(server.received[0].bytes, server.received[1].bytes);
  EXPECT_EQ(network.counters(1).frames_duplicated, 1u);
  EXPECT_EQ(network.counters(0).frames_received, 2u);
}

TEST(SimNetworkFaults, DropoutEpochsSilenceTheDeviceBothWays) {
  constexpr TimeNs kEpoch = 100 * kMs;
  constexpr TimeNs kPeriod = 10 * kMs;
  constexpr TimeNs kEnd = 100'000 * kMs;  // 1000 epochs, 10000 frames each way
  SimConfig config;
  config.seed = 99;
  config.faults.dropout = 0.3;
  config.faults.dropout_epoch_ns = kEpoch;
  config.time_limit_ns = kEnd - 1;
  SimNetwork network(config);

  // The device sends frame i at i * 10 ms; the server sends frame j at 5 ms + j * 10 ms.
  ScriptedSession server;
  ScriptedSession device;
  device.wake = 0;
  device.on_timer = [](ScriptedSession& self, TimeNs now) {
    self.Send(0, IndexFrame(static_cast<std::uint32_t>(now / kPeriod)));
    self.wake = now + kPeriod;
  };
  server.wake = 5 * kMs;
  server.on_timer = [](ScriptedSession& self, TimeNs now) {
    self.Send(1, IndexFrame(static_cast<std::uint32_t>(now / kPeriod)));
    self.wake = now + kPeriod;
  };
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  EXPECT_EQ(network.Run(), StopReason::kTimeLimit);

  std::vector<bool> server_got(kEnd / kPeriod, false);
  for (const auto& frame : server.received) server_got[DecodeIndexFrame(frame.bytes).index] = true;
  std::vector<bool> device_got(kEnd / kPeriod, false);
  for (const auto& frame : device.received) device_got[DecodeIndexFrame(frame.bytes).index] = true;

  std::uint64_t expected_dropped = 0;
  for (std::size_t i = 0; i < server_got.size(); ++i) {
    const TimeNs sent_at = i * kPeriod;
    // Uplink: lost iff the device is offline when it transmits. Downlink: lost iff it is
    // offline when the frame arrives (1 ms after the server sent it, same epoch here).
    const bool device_online_at_send = !network.IsDroppedOut(1, sent_at);
    ASSERT_EQ(server_got[i], device_online_at_send) << i;
    const TimeNs arrives_at = sent_at + 5 * kMs + 1 * kMs;
    const bool device_online_at_arrival = !network.IsDroppedOut(1, arrives_at);
    if (arrives_at < kEnd - 1) {
      ASSERT_EQ(device_got[i], device_online_at_arrival) << i;
    }
    expected_dropped += (device_online_at_send ? 0u : 1u) +
                        (arrives_at < kEnd - 1 && !device_online_at_arrival ? 1u : 0u);
  }
  EXPECT_EQ(network.counters(1).frames_dropped_offline, expected_dropped);
  EXPECT_EQ(network.counters(0).frames_dropped_offline, 0u);  // the server never drops out

  std::uint64_t offline_epochs = 0;
  for (TimeNs epoch = 0; epoch < kEnd / kEpoch; ++epoch) {
    offline_epochs += network.IsDroppedOut(1, epoch * kEpoch) ? 1u : 0u;
    // Offline for the whole epoch, then drawn afresh.
    ASSERT_EQ(network.IsDroppedOut(1, epoch * kEpoch),
              network.IsDroppedOut(1, epoch * kEpoch + kEpoch - 1));
  }
  ExpectRate(offline_epochs, kEnd / kEpoch, 0.3);
  // The device came back after its offline epochs: it heard from the server in the last one.
  EXPECT_GT(device.received.size(), 5000u);
}

// A small but busy network with every feature on: 4 devices with different links and speeds
// talk to a server that answers every frame, and to their ring neighbour.
struct ScenarioResult {
  std::uint64_t hash;
  DeviceCounters totals;
  TimeNs end;
  std::uint64_t events;
  StopReason reason;
};

ScenarioResult RunScenario(std::uint64_t seed) {
  SimConfig config;
  config.seed = seed;
  config.ns_per_sample = 20'000;
  config.frame_overhead_bytes = 40;
  config.faults = {.loss = 0.05,
                   .corruption = 0.05,
                   .duplication = 0.05,
                   .dropout = 0.1,
                   .dropout_epoch_ns = 500 * kMs,
                   .max_corrupt_bits = 3};
  config.time_limit_ns = 5'000 * kMs;
  SimNetwork network(config);
  ScriptedSession server;
  server.on_frame = [](ScriptedSession& self, PeerId from, std::span<const std::byte> frame,
                       TimeNs) { self.Send(from, 200 + frame.size(), 1); };
  network.AddSession(0, server, {.uplink_bps = 50'000'000, .downlink_bps = 20'000'000});
  std::vector<ScriptedSession> devices(4);
  for (PeerId id = 1; id <= 4; ++id) {
    ScriptedSession& device = devices[id - 1];
    device.wake = id * kMs;
    device.on_timer = [id](ScriptedSession& self, TimeNs now) {
      self.Send(0, 100 + id, static_cast<std::uint8_t>(now / kMs), /*work_samples=*/10 * id);
      self.Send(id % 4 + 1, 50, 3);
      self.wake = now + 20 * kMs;
    };
    network.AddSession(id, device,
                       {.uplink_bps = 1'000'000 * id,
                        .downlink_bps = 4'000'000 * id,
                        .latency_ns = 5 * kMs * id,
                        .compute_speed = 0.5 * id});
  }
  const StopReason reason = network.Run();
  return {network.trace_hash(), network.TotalCounters(), network.now(), network.events_processed(),
          reason};
}

TEST(SimNetworkDeterminism, SameSeedSameRunDifferentSeedDifferentRun) {
  const ScenarioResult first = RunScenario(2024);
  const ScenarioResult second = RunScenario(2024);
  const ScenarioResult other = RunScenario(2025);
  EXPECT_EQ(first.reason, StopReason::kTimeLimit);
  EXPECT_EQ(first.hash, second.hash);
  EXPECT_EQ(first.totals, second.totals);
  EXPECT_EQ(first.end, second.end);
  EXPECT_EQ(first.events, second.events);
  EXPECT_NE(first.hash, other.hash);
  EXPECT_NE(first.totals, other.totals);
  // Every fault actually happened in this run.
  EXPECT_GT(first.totals.frames_lost, 0u);
  EXPECT_GT(first.totals.frames_corrupted, 0u);
  EXPECT_GT(first.totals.frames_duplicated, 0u);
  EXPECT_GT(first.totals.frames_dropped_offline, 0u);
  EXPECT_GT(first.totals.frames_received, 1000u);
}

// The trace of RunScenario(2024) as computed on x86-64. The simulator uses integer arithmetic
// and correctly rounded double divisions only, so aarch64 and armhf (under qemu) must agree; a
// change here means the timing or fault model changed, which invalidates recorded experiments.
constexpr std::uint64_t kPinnedScenarioHash = 10404338334157826283ull;

TEST(SimNetworkDeterminism, ScenarioTraceIsPinnedAcrossArchitectures) {
  EXPECT_EQ(RunScenario(2024).hash, kPinnedScenarioHash);
}

}  // namespace
}  // namespace edgesgd::sim
