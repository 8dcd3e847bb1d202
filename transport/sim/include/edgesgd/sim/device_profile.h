#pragma once

// What the simulator knows about one device (the server included): its access link and how fast
// it computes. Plain data; SimNetwork::AddSession checks the values.

#include <cstdint>

#include "edgesgd/protocol/session.h"

namespace edgesgd::sim {

// Largest bandwidth the timing arithmetic accepts (1 Ebit/s): keeps every intermediate product
// of the exact integer transmit-time computation inside 64 bits.
inline constexpr std::uint64_t kMaxBitsPerSecond = 1'000'000'000'000'000'000ull;

struct DeviceProfile {
  // Rate at which the device's frames leave it, in bits per second; 0 = infinite. Frames are
  // serialised one after another (a frame waits for the previous one to finish).
  std::uint64_t uplink_bps = 0;
  // Rate at which frames addressed to the device are received, in bits per second; 0 =
  // infinite. Also serialised, in order of arrival at the device's access link, so a server with
  // a slow downlink receiving n uploads at once delivers them one by one.
  std::uint64_t downlink_bps = 0;
  // One-way latency of the device's access link. A frame from A to B propagates for
  // latency(A) + latency(B): every device hangs off a shared core, so device-to-device (gossip)
  // traffic crosses two access links while a server with latency 0 adds nothing.
  protocol::TimeNs latency_ns = 0;
  // Compute speed relative to the reference device (1.0). A frame carrying work_samples = w
  // leaves the device's CPU after w * SimConfig::ns_per_sample / compute_speed; must be > 0.
  double compute_speed = 1.0;
  // When the device's session is started (Session::Start). Before that the device is offline:
  // frames addressed to it are dropped and counted as frames_dropped_offline.
  protocol::TimeNs start_ns = 0;
};

}  // namespace edgesgd::sim
