#pragma once

#include <cstdint>

namespace edgesgd::platform {

// Monotonic time in nanoseconds since an arbitrary start (CLOCK_MONOTONIC on Linux, the DWT
// cycle counter on Cortex-M). Only transport drivers and benchmarks read clocks; core and
// protocol are handed time by their callers.
std::uint64_t MonotonicNanos();

}  // namespace edgesgd::platform
