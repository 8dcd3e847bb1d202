#pragma once

// The simulator's time arithmetic: exact integer transmit times and the compute-time formula.
// Pure functions, shared by SimNetwork and its tests. None allocates.

#include <cstdint>

#include "edgesgd/protocol/session.h"

namespace edgesgd::sim {

// a + b, or kNever when the sum would overflow (times near kNever mean "never" anyway).
constexpr protocol::TimeNs SaturatingAdd(protocol::TimeNs a, protocol::TimeNs b) {
  return a > protocol::kNever - b ? protocol::kNever : a + b;
}

// Nanoseconds to serialise `bytes` at `bits_per_second`: ceil(bytes * 8e9 / bits_per_second),
// computed exactly in 64-bit integers (identical on x86-64, aarch64 and armhf). Returns 0 for an
// infinite link (bits_per_second == 0) and kNever if the result does not fit. Requires
// bits_per_second <= kMaxBitsPerSecond (CHECK).
protocol::TimeNs TransmitNs(std::uint64_t bytes, std::uint64_t bits_per_second);

// Compute time of `work_samples` samples at `ns_per_sample` on a device of relative `speed`:
// ceil(work_samples * ns_per_sample / speed), in IEEE double arithmetic (correctly rounded, no
// contraction, so identical on every architecture). 0 when there is no work; kNever if the
// result does not fit. Requires speed > 0 and finite (CHECK).
protocol::TimeNs ComputeNs(std::uint64_t work_samples, protocol::TimeNs ns_per_sample,
                           double speed);

}  // namespace edgesgd::sim
