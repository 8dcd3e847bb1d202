// SimNetwork's timing model, wake-ups, run control and observability, with fake sessions.

#include "edgesgd/sim/sim_network.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "sim/fake_sessions.h"

namespace edgesgd::sim {
namespace {

using protocol::kNever;
using protocol::PeerId;
using protocol::TimeNs;
using testing::PingPongSession;
using testing::RetrySession;
using testing::ScriptedSession;

constexpr TimeNs kUs = 1'000;
constexpr TimeNs kMs = 1'000'000;
constexpr std::uint64_t k8Mbps = 8'000'000;  // one byte per microsecond

std::vector<TimeNs> ArrivalTimes(const ScriptedSession& session) {
  std::vector<TimeNs> times;
  for (const auto& frame : session.received) times.push_back(frame.time);
  return times;
}

std::vector<PeerId> Senders(const ScriptedSession& session) {
  std::vector<PeerId> senders;
  for (const auto& frame : session.received) senders.push_back(frame.from);
  return senders;
}

TEST(SimNetworkTiming, ArrivalIsUplinkSerialisationPlusLatency) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession device;
  device.Send(protocol::kServerPeer, 1000);
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.uplink_bps = k8Mbps, .latency_ns = 5 * kMs});
  EXPECT_EQ(network.Run(), StopReason::kIdle);  // nobody finishes, nothing left to do
  ASSERT_EQ(server.received.size(), 1u);
  EXPECT_EQ(server.received[0].time, 6 * kMs);  // 8000 bits / 8 Mbit/s = 1 ms, + 5 ms
  EXPECT_EQ(server.received[0].from, 1u);
  EXPECT_EQ(server.received[0].bytes, testing::TaggedBytes(1000, 0));
  EXPECT_EQ(network.now(), 6 * kMs);
}

TEST(SimNetworkTiming, FramesQueueBehindEarlierFramesOnTheUplink) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession device;
  for (std::uint8_t tag = 0; tag < 3; ++tag) device.Send(0, 1000, tag);
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.uplink_bps = k8Mbps, .latency_ns = 5 * kMs});
  network.Run();
  EXPECT_EQ(ArrivalTimes(server), (std::vector<TimeNs>{6 * kMs, 7 * kMs, 8 * kMs}));
  ASSERT_EQ(server.received.size(), 3u);
  EXPECT_EQ(server.received[2].bytes, testing::TaggedBytes(1000, 2));
}

TEST(SimNetworkTiming, ServerDownlinkSerialisesSimultaneousUploads) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  std::vector<ScriptedSession> devices(4);
  network.AddSession(0, server, {.downlink_bps = k8Mbps});
  for (PeerId id = 1; id <= 4; ++id) {
    devices[id - 1].Send(0, 1000);
    network.AddSession(id, devices[id - 1], {.latency_ns = 1 * kMs});
  }
  network.Run();
  // All four reach the server's link at 1 ms and cross its 1 ms-per-frame downlink in turn.
  EXPECT_EQ(ArrivalTimes(server), (std::vector<TimeNs>{2 * kMs, 3 * kMs, 4 * kMs, 5 * kMs}));
  EXPECT_EQ(Senders(server), (std::vector<PeerId>{1, 2, 3, 4}));
}

TEST(SimNetworkTiming, DownlinkServesFramesInOrderOfArrival) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession far_device;
  ScriptedSession near_device;
  far_device.Send(0, 1000);
  near_device.Send(0, 1000);
  network.AddSession(0, server, {.downlink_bps = k8Mbps});
  network.AddSession(1, far_device, {.latency_ns = 10 * kMs});
  network.AddSession(2, near_device, {.latency_ns = 1 * kMs});
  network.Run();
  // The far device sent first but its frame reaches the server's link later: no queueing.
  EXPECT_EQ(ArrivalTimes(server), (std::vector<TimeNs>{2 * kMs, 11 * kMs}));
  EXPECT_EQ(Senders(server), (std::vector<PeerId>{2, 1}));
}

TEST(SimNetworkTiming, StoreAndForwardThroughUplinkAndDownlink) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession device;
  device.Send(0, 1000);
  network.AddSession(0, server, {.downlink_bps = 2 * k8Mbps, .latency_ns = 2 * kMs});
  network.AddSession(1, device, {.uplink_bps = k8Mbps, .latency_ns = 1 * kMs});
  network.Run();
  // 1 ms uplink + (1 + 2) ms latency + 0.5 ms downlink.
  EXPECT_EQ(ArrivalTimes(server), (std::vector<TimeNs>{4 * kMs + 500 * kUs}));
}

TEST(SimNetworkTiming, PeerToPeerCrossesBothAccessLinks) {
  SimNetwork network(SimConfig{});
  ScriptedSession a;
  ScriptedSession b;
  a.Send(2, 100);
  network.AddSession(1, a, {.latency_ns = 2 * kMs});
  network.AddSession(2, b, {.latency_ns = 3 * kMs});
  network.Run();
  EXPECT_EQ(ArrivalTimes(b), (std::vector<TimeNs>{5 * kMs}));
  EXPECT_EQ(b.received[0].from, 1u);
}

TEST(SimNetworkTiming, ComputeDelaysFramesAndKeepsTheDeviceBusy) {
  SimConfig config;
  config.ns_per_sample = 10 * kUs;
  SimNetwork network(config);
  ScriptedSession server;
  ScriptedSession fast;
  ScriptedSession slow;
  fast.Send(0, 10, 1, /*work_samples=*/100);  // 1 ms of reference compute / 2.0 = 0.5 ms
  fast.Send(0, 10, 2, /*work_samples=*/0);    // control frame: waits for the CPU
  fast.Send(0, 10, 3, /*work_samples=*/100);  // another 0.5 ms after the first
  slow.Send(0, 10, 4, /*work_samples=*/100);  // 1 ms / 0.5 = 2 ms
  network.AddSession(0, server, {});
  network.AddSession(1, fast, {.latency_ns = 1 * kMs, .compute_speed = 2.0});
  network.AddSession(2, slow, {.latency_ns = 1 * kMs, .compute_speed = 0.5});
  network.Run();
  EXPECT_EQ(ArrivalTimes(server), (std::vector<TimeNs>{1500 * kUs, 1500 * kUs, 2 * kMs, 3 * kMs}));
  EXPECT_EQ(Senders(server), (std::vector<PeerId>{1, 1, 1, 2}));
  EXPECT_EQ(server.received[1].bytes, testing::TaggedBytes(10, 2));
}

TEST(SimNetworkTiming, ReplyComputedWhileBusyQueuesBehindEarlierWork) {
  SimConfig config;
  config.ns_per_sample = 1 * kMs;
  SimNetwork network(config);
  ScriptedSession server;
  ScriptedSession device;
  server.Send(1, 10);                         // reaches the device at 1 ms
  device.Send(0, 10, 1, /*work_samples=*/5);  // CPU busy 0-5 ms
  device.on_frame = [](ScriptedSession& self, PeerId, std::span<const std::byte>, TimeNs) {
    self.Send(0, 10, 2, /*work_samples=*/2);  // starts at 5 ms, ready at 7 ms
  };
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  network.Run();
  EXPECT_EQ(ArrivalTimes(server), (std::vector<TimeNs>{6 * kMs, 8 * kMs}));
}

TEST(SimNetworkTiming, FrameOverheadCountsInTimingNotInCounters) {
  SimConfig config;
  config.frame_overhead_bytes = 250;
  SimNetwork network(config);
  ScriptedSession server;
  ScriptedSession device;
  device.Send(0, 750);
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.uplink_bps = k8Mbps});
  network.Run();
  EXPECT_EQ(ArrivalTimes(server), (std::vector<TimeNs>{1 * kMs}));
  EXPECT_EQ(network.counters(1).bytes_sent, 750u);
  EXPECT_EQ(network.counters(0).bytes_received, 750u);
}

TEST(SimNetworkTiming, PingPongRoundTripsAddUp) {
  SimNetwork network(SimConfig{});
  PingPongSession server(1, /*initiator=*/false, 10, 500);
  PingPongSession device(0, /*initiator=*/true, 10, 500);
  network.AddSession(0, server, {.uplink_bps = k8Mbps});
  network.AddSession(1, device, {.uplink_bps = k8Mbps, .latency_ns = 2 * kMs});
  EXPECT_EQ(network.Run(), StopReason::kAllFinished);
  // Each way: 0.5 ms serialisation + 2 ms latency.
  EXPECT_EQ(network.now(), 10 * 2 * (2500 * kUs));
  EXPECT_EQ(device.last_receive(), network.now());
  EXPECT_EQ(network.counters(1).frames_sent, 10u);
  EXPECT_EQ(network.counters(0).frames_received, 10u);
  EXPECT_EQ(network.counters(0).bytes_received, 5000u);
  EXPECT_EQ(network.session_calls(), 2u + 20u);
}

TEST(SimNetworkWakeups, LatestRequestWinsAndPastTimesFireNow) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession device;
  server.Send(1, 10);  // arrives at 2 ms
  device.wake = 10 * kMs;
  device.on_frame = [](ScriptedSession& self, PeerId, std::span<const std::byte>, TimeNs) {
    self.wake = 4 * kMs;  // earlier than the pending 10 ms: that one must not fire
  };
  device.on_timer = [](ScriptedSession& self, TimeNs now) {
    if (now == 4 * kMs) self.wake = 1 * kMs;  // already past: fires at once (4 ms)
    if (self.timer_times.size() == 2) self.wake = 7 * kMs;
    if (now == 7 * kMs) self.finished = true;
  };
  server.finished = true;
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 2 * kMs});
  EXPECT_EQ(network.Run(), StopReason::kAllFinished);
  EXPECT_EQ(device.timer_times, (std::vector<TimeNs>{4 * kMs, 4 * kMs, 7 * kMs}));
  EXPECT_EQ(network.counters(1).timer_calls, 3u);
}

TEST(SimNetworkWakeups, DeliveredInTimeThenSchedulingOrderAcrossSessions) {
  SimNetwork network(SimConfig{});
  std::vector<ScriptedSession> sessions(3);
  // Each session wakes at its own list of times.
  const std::vector<std::vector<TimeNs>> plans = {{5, 9, 30}, {3, 9, 12}, {1, 2, 9}};
  std::vector<std::size_t> next(3, 0);
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    sessions[i].wake = plans[i][0];
    sessions[i].on_timer = [&, i](ScriptedSession& self, TimeNs) {
      if (++next[i] < plans[i].size()) {
        self.wake = plans[i][next[i]];
      } else {
        self.finished = true;
      }
    };
    network.AddSession(static_cast<PeerId>(i + 1), sessions[i], {});
  }
  std::vector<std::pair<TimeNs, PeerId>> seen;
  network.SetObserver([&](const SimEvent& event) {
    EXPECT_EQ(event.time, network.now());
    if (event.kind == SimEventKind::kTimer) seen.emplace_back(event.time, event.peer);
  });
  EXPECT_EQ(network.Run(), StopReason::kAllFinished);
  // At 9 ms all three are due; they were scheduled at 5 (peer 1), 3 (peer 2) and 2 (peer 3),
  // so peer 3's request is oldest.
  const std::vector<std::pair<TimeNs, PeerId>> expected = {{1, 3}, {2, 3}, {3, 2},  {5, 1}, {9, 3},
                                                           {9, 2}, {9, 1}, {12, 2}, {30, 1}};
  EXPECT_EQ(seen, expected);
}

TEST(SimNetworkControl, RunUntilPausesBetweenEventsAndObserverSeesEveryCall) {
  SimNetwork network(SimConfig{});
  PingPongSession server(1, false, 5, 100);
  PingPongSession device(0, true, 5, 100);
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  std::vector<SimEvent> events;
  network.SetObserver([&](const SimEvent& event) { events.push_back(event); });
  EXPECT_EQ(network.RunUntil(3 * kMs + 500 * kUs), StopReason::kRunning);
  EXPECT_EQ(network.now(), 3 * kMs + 500 * kUs);
  EXPECT_EQ(server.received(), 2u);  // pings at 1 and 3 ms
  EXPECT_EQ(device.received(), 1u);  // pong at 2 ms
  EXPECT_EQ(network.RunUntil(20 * kMs), StopReason::kAllFinished);
  EXPECT_EQ(network.now(), 10 * kMs);
  EXPECT_FALSE(network.Step());
  ASSERT_EQ(events.size(), 2u + 10u);
  EXPECT_EQ(events[0].kind, SimEventKind::kStart);
  EXPECT_EQ(events[1].kind, SimEventKind::kStart);
  for (std::size_t i = 2; i < events.size(); ++i) {
    EXPECT_EQ(events[i].kind, SimEventKind::kFrameDelivered);
    EXPECT_EQ(events[i].time, static_cast<TimeNs>(i - 1) * kMs);
    EXPECT_EQ(events[i].bytes, 100u);
    EXPECT_EQ(events[i].peer, i % 2 == 0 ? 0u : 1u);
    EXPECT_EQ(events[i].from, i % 2 == 0 ? 1u : 0u);
  }
}

TEST(SimNetworkControl, StepProcessesOneEventAtATime) {
  SimNetwork network(SimConfig{});
  PingPongSession server(1, false, 2, 10);
  PingPongSession device(0, true, 2, 10);
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  std::vector<TimeNs> times;
  while (network.Step()) times.push_back(network.now());
  EXPECT_EQ(times, (std::vector<TimeNs>{0, 0, 1 * kMs, 2 * kMs, 3 * kMs, 4 * kMs}));
  EXPECT_EQ(network.stop_reason(), StopReason::kAllFinished);
  EXPECT_EQ(network.events_processed(), 6u);
}

TEST(SimNetworkControl, LateStartDropsEarlierFrames) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession late;
  server.Send(1, 10, 1);  // arrives at 0, before the device starts: dropped
  server.on_timer = [](ScriptedSession& self, TimeNs) { self.Send(1, 10, 2); };
  server.wake = 6 * kMs;
  network.AddSession(0, server, {});
  network.AddSession(1, late, {.start_ns = 5 * kMs});
  network.Run();
  EXPECT_EQ(late.start_time, 5 * kMs);
  ASSERT_EQ(late.received.size(), 1u);
  EXPECT_EQ(late.received[0].time, 6 * kMs);
  EXPECT_EQ(late.received[0].bytes, testing::TaggedBytes(10, 2));
  EXPECT_EQ(network.counters(1).frames_dropped_offline, 1u);
}

TEST(SimNetworkControl, CrashedPeerIsSilencedAndOthersAreTold) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession doomed;
  ScriptedSession survivor;
  doomed.wake = 10 * kMs;  // never fires: the crash comes first
  server.wake = 6 * kMs;
  server.on_timer = [](ScriptedSession& self, TimeNs now) {
    if (now == 6 * kMs) {
      self.Send(2, 10);  // to the crashed peer: dropped
      self.wake = 7 * kMs;
    } else {
      self.finished = true;
    }
  };
  survivor.on_start = [](ScriptedSession& self, TimeNs) { self.finished = true; };
  network.AddSession(0, server, {});
  network.AddSession(1, survivor, {});
  network.AddSession(2, doomed, {});
  network.ScheduleCrash(2, 5 * kMs);
  EXPECT_EQ(network.Run(), StopReason::kAllFinished);  // the crashed peer need not finish
  EXPECT_EQ(network.now(), 7 * kMs);
  EXPECT_TRUE(doomed.timer_times.empty());
  using Lost = std::vector<std::pair<PeerId, TimeNs>>;
  EXPECT_EQ(server.lost_peers, (Lost{{2, 5 * kMs}}));
  EXPECT_EQ(survivor.lost_peers, (Lost{{2, 5 * kMs}}));
  EXPECT_TRUE(doomed.lost_peers.empty());
  EXPECT_EQ(network.counters(2).frames_dropped_offline, 1u);
}

TEST(SimNetworkControl, FramesArriveEightByteAligned) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  ScriptedSession device;
  for (std::size_t size = 1; size <= 40; ++size) device.Send(0, size);
  int misaligned = 0;
  server.on_frame = [&misaligned](ScriptedSession&, PeerId, std::span<const std::byte> frame,
                                  TimeNs) {
    misaligned += reinterpret_cast<std::uintptr_t>(frame.data()) % 8 != 0;
  };
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  network.Run();
  EXPECT_EQ(server.received.size(), 40u);
  EXPECT_EQ(misaligned, 0);
}

TEST(SimNetworkControl, FramesToUnknownPeersAreCounted) {
  SimNetwork network(SimConfig{});
  ScriptedSession server;
  server.Send(99, 10);
  network.AddSession(0, server, {});
  EXPECT_EQ(network.Run(), StopReason::kIdle);
  EXPECT_EQ(network.counters(0).frames_unroutable, 1u);
  EXPECT_EQ(network.frames_in_flight(), 0u);
}

TEST(SimNetworkControl, RelayMayHandBackTheFrameItWasGiven) {
  // A session whose outgoing frame is a view of the frame it just received.
  class Relay : public testing::ScriptedSession {
   public:
    void OnFrame(PeerId, std::span<const std::byte> frame, TimeNs) override {
      held_ = frame;
      pending_ = true;
    }
    bool PollFrame(protocol::OutgoingFrame& out) override {
      if (!pending_) return false;
      pending_ = false;
      out.to = 2;
      out.bytes = held_;
      out.work_samples = 0;
      return true;
    }

   private:
    std::span<const std::byte> held_;
    bool pending_ = false;
  };
  SimNetwork network(SimConfig{});
  ScriptedSession source;
  Relay relay;
  ScriptedSession sink;
  source.Send(1, 300, 9);
  network.AddSession(0, source, {});
  network.AddSession(1, relay, {});
  network.AddSession(2, sink, {});
  network.Run();
  ASSERT_EQ(sink.received.size(), 1u);
  EXPECT_EQ(sink.received[0].bytes, testing::TaggedBytes(300, 9));
}

TEST(SimNetworkLimits, EverythingLostStopsAtTheTimeLimit) {
  SimConfig config;
  config.faults.loss = 1.0;
  config.time_limit_ns = 10 * 1'000 * kMs;
  SimNetwork network(config);
  RetrySession server(1, 100 * kMs);
  RetrySession device(0, 100 * kMs);
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  EXPECT_EQ(network.Run(), StopReason::kTimeLimit);
  EXPECT_STREQ(StopReasonName(network.stop_reason()), "time_limit");
  EXPECT_EQ(network.now(), config.time_limit_ns);
  EXPECT_EQ(device.attempts(), 101u);  // at 0, 100 ms, ..., 10 s
  EXPECT_EQ(network.counters(1).frames_lost, 101u);
  EXPECT_EQ(network.counters(0).frames_received, 0u);
  EXPECT_FALSE(network.Step());
}

TEST(SimNetworkLimits, NothingScheduledStopsAsIdle) {
  SimConfig config;
  config.faults.loss = 1.0;
  SimNetwork network(config);
  ScriptedSession server;
  ScriptedSession device;
  device.Send(0, 10);
  network.AddSession(0, server, {});
  network.AddSession(1, device, {.latency_ns = 1 * kMs});
  EXPECT_EQ(network.Run(), StopReason::kIdle);
  EXPECT_STREQ(StopReasonName(StopReason::kIdle), "idle");
  EXPECT_EQ(network.now(), 0u);
}

TEST(SimNetworkLimits, SessionWakingAtTheSameInstantHitsTheEventLimit) {
  SimConfig config;
  config.max_events = 1000;
  SimNetwork network(config);
  ScriptedSession stuck;
  stuck.wake = 5;
  stuck.on_timer = [](ScriptedSession& self, TimeNs now) { self.wake = now; };
  network.AddSession(0, stuck, {});
  EXPECT_EQ(network.Run(), StopReason::kEventLimit);
  EXPECT_EQ(network.events_processed(), 1000u);
  EXPECT_EQ(network.now(), 5u);
}

TEST(SimNetworkLimits, NoSessionsIsTriviallyFinished) {
  SimNetwork network(SimConfig{});
  EXPECT_EQ(network.Run(), StopReason::kAllFinished);
}

}  // namespace
}  // namespace edgesgd::sim
