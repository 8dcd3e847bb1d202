#pragma once

// The secret that keys differential privacy's noise on this machine (ServerOptions::noise_key,
// WorkerOptions::noise_key), from the operating system's entropy: unlike the run's shared seed,
// no other participant can reproduce it.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

#include "edgesgd/core/status.h"
#include "edgesgd/platform/random_bytes.h"

namespace edgesgd::tcp {

inline Status DrawNoiseKey(std::uint64_t& key, std::string& detail) {
  std::array<std::byte, sizeof(std::uint64_t)> bytes{};
  do {
    if (const Status drawn = platform::FillRandomBytes(bytes); !drawn.ok()) {
      detail = "no operating-system entropy for the noise key";
      return drawn;
    }
    key = std::bit_cast<std::uint64_t>(bytes);
  } while (key == 0);  // 0 means "no key"
  return Status::Ok();
}

}  // namespace edgesgd::tcp
