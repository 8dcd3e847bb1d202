#pragma once

// Per-device traffic counters kept by the simulator.

#include <cstdint>

namespace edgesgd::sim {

// Frames and bytes are counted as the sessions see them (no per-frame overhead). A frame's
// random faults (lost, corrupted, duplicated) are charged to its sender; frames dropped because
// a device was offline (drop-out epoch, not started yet, crashed) are charged to the offline
// device.
struct DeviceCounters {
  std::uint64_t frames_sent = 0;  // frames the session emitted (PollFrame), whatever their fate
  std::uint64_t bytes_sent = 0;
  std::uint64_t frames_received = 0;  // frames handed to OnFrame, copies and corrupted included
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_lost = 0;             // sent frames the network lost
  std::uint64_t frames_corrupted = 0;        // sent frames given flipped bits in transit
  std::uint64_t frames_duplicated = 0;       // sent frames the network copied
  std::uint64_t frames_dropped_offline = 0;  // sent or addressed while this device was offline
  std::uint64_t frames_unroutable = 0;       // sent to a peer id with no session
  std::uint64_t timer_calls = 0;             // OnTimer calls

  // Adds `other` field by field (for network totals).
  DeviceCounters& operator+=(const DeviceCounters& other) {
    frames_sent += other.frames_sent;
    bytes_sent += other.bytes_sent;
    frames_received += other.frames_received;
    bytes_received += other.bytes_received;
    frames_lost += other.frames_lost;
    frames_corrupted += other.frames_corrupted;
    frames_duplicated += other.frames_duplicated;
    frames_dropped_offline += other.frames_dropped_offline;
    frames_unroutable += other.frames_unroutable;
    timer_calls += other.timer_calls;
    return *this;
  }

  friend bool operator==(const DeviceCounters&, const DeviceCounters&) = default;
};

}  // namespace edgesgd::sim
