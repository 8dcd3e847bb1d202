#pragma once

// Network-wide settings of a simulation: the seed of every random fault, the compute cost of
// one training sample, the fault probabilities and the limits that guarantee a run ends.

#include <cstdint>
#include <span>

#include "edgesgd/protocol/session.h"

namespace edgesgd::sim {

inline constexpr protocol::TimeNs kNsPerSecond = 1'000'000'000ull;

// A span of virtual time, [start_ns, end_ns), in which `device` is online (an availability
// trace's line).
struct OnlineInterval {
  protocol::PeerId device = 0;
  protocol::TimeNs start_ns = 0;
  protocol::TimeNs end_ns = 0;
};

// Random faults. Every draw comes from CounterRng(seed, ..., StreamId(kNetworkFaults, device))
// with a counter built from (sender's frame number) or (drop-out epoch) only, so the fate of a
// frame does not depend on what other devices do, and a run is reproducible from its seed.
struct FaultConfig {
  // Probability that a frame vanishes in the network (it still occupies the sender's uplink).
  double loss = 0.0;
  // Probability that a delivered frame has 1..max_corrupt_bits distinct bits flipped.
  double corruption = 0.0;
  // Probability that a delivered frame arrives twice (the copy follows the original through the
  // receiver's downlink).
  double duplication = 0.0;
  // Probability that a device (any peer except the server, peer 0) is offline for a whole
  // drop-out epoch. Offline devices send and receive nothing and are told nothing; the next
  // epoch is drawn afresh. Requires dropout_epoch_ns > 0 when dropout > 0.
  double dropout = 0.0;
  protocol::TimeNs dropout_epoch_ns = 0;
  // Upper bound on the bits flipped in one corrupted frame (>= 1; at most 64).
  std::uint32_t max_corrupt_bits = 3;
  // Availability, on top of drop-out. Diurnal: every device is online for a fraction
  // diurnal_online of each diurnal_period_ns, from a phase drawn per device from the seed (its
  // time zone); period 0 turns it off. A trace: a device with intervals here is online only
  // within them (sorted by device, then start, not overlapping; the caller keeps them alive);
  // devices without any are always online. The server (peer 0) is always online.
  protocol::TimeNs diurnal_period_ns = 0;
  double diurnal_online = 1.0;
  std::span<const OnlineInterval> availability = {};
};

struct SimConfig {
  std::uint64_t seed = 0;
  // Compute time of one training sample on a device of compute_speed 1.0.
  protocol::TimeNs ns_per_sample = 0;
  // Bytes added to every frame for link timing only (e.g. 40 for TCP/IP headers); counters
  // report the frame bytes the sessions produced.
  std::uint32_t frame_overhead_bytes = 0;
  FaultConfig faults;
  // The run stops before the first event later than this virtual time (kTimeLimit)...
  protocol::TimeNs time_limit_ns = 24ull * 3600ull * kNsPerSecond;
  // ...or after this many processed events (kEventLimit), so a session that keeps waking
  // itself at the same instant cannot hang the simulator.
  std::uint64_t max_events = 100'000'000ull;
  // Threads for the devices' work, in 1..kMaxDeviceThreads: frames delivered at one instant to
  // distinct peers other than peer 0 (the server) are handed to their sessions on up to this
  // many threads, then scheduled and reported one by one in event order, so the run is the same
  // byte for byte whatever the count. Sessions then run concurrently: each must touch only its
  // own state, and a shared gradient callback must keep per-thread scratch
  // (DeviceThreadIndex()). While peer 0 reports Finished(), or with 1, one thread.
  std::uint32_t device_threads = 1;
};

inline constexpr std::uint32_t kMaxDeviceThreads = 64;

// Which of SimConfig::device_threads runs the calling code: 0 on the thread driving the network
// (and everywhere else), 1.. on its helpers.
std::uint32_t DeviceThreadIndex();

}  // namespace edgesgd::sim
