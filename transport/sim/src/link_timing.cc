#include "edgesgd/sim/link_timing.h"

#include <cmath>
#include <limits>

#include "edgesgd/core/check.h"
#include "edgesgd/sim/device_profile.h"
#include "edgesgd/sim/sim_config.h"

namespace edgesgd::sim {
namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// ceil(remainder * kNsPerSecond / divisor) for remainder < divisor, without a 128-bit type
// (armhf has none): one multiplication when it cannot overflow, otherwise long division one
// decimal digit at a time (remainder * 10 < 10 * divisor <= 10^19 < 2^64).
std::uint64_t ScaledCeil(std::uint64_t remainder, std::uint64_t divisor) {
  if (remainder <= kU64Max / kNsPerSecond) {
    const std::uint64_t product = remainder * kNsPerSecond;
    return product / divisor + (product % divisor != 0 ? 1u : 0u);
  }
  std::uint64_t quotient = 0;
  for (int digit = 0; digit < 9; ++digit) {
    remainder *= 10;
    quotient = quotient * 10 + remainder / divisor;
    remainder %= divisor;
  }
  return quotient + (remainder != 0 ? 1u : 0u);
}

}  // namespace

protocol::TimeNs TransmitNs(std::uint64_t bytes, std::uint64_t bits_per_second) {
  EDGESGD_CHECK(bits_per_second <= kMaxBitsPerSecond);
  if (bits_per_second == 0 || bytes == 0) return 0;
  if (bytes > kU64Max / 8) return protocol::kNever;
  const std::uint64_t bits = bytes * 8;
  const std::uint64_t whole_seconds = bits / bits_per_second;
  if (whole_seconds > protocol::kNever / kNsPerSecond) return protocol::kNever;
  return SaturatingAdd(whole_seconds * kNsPerSecond,
                       ScaledCeil(bits % bits_per_second, bits_per_second));
}

protocol::TimeNs ComputeNs(std::uint64_t work_samples, protocol::TimeNs ns_per_sample,
                           double speed) {
  EDGESGD_CHECK(speed > 0.0 && std::isfinite(speed));
  if (work_samples == 0 || ns_per_sample == 0) return 0;
  const double ns =
      std::ceil(static_cast<double>(work_samples) * static_cast<double>(ns_per_sample) / speed);
  // 2^64 as a double; anything at or above it does not fit a TimeNs.
  constexpr double kLimit = 18446744073709551616.0;
  if (!(ns < kLimit)) return protocol::kNever;
  return static_cast<protocol::TimeNs>(ns);
}

}  // namespace edgesgd::sim
