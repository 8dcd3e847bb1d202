#include "edgesgd/platform/clock.h"

#include <ctime>

namespace edgesgd::platform {

std::uint64_t MonotonicNanos() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(now.tv_nsec);
}

}  // namespace edgesgd::platform
