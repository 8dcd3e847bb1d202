#pragma once

// The secret that keys differential privacy's noise on this machine (ServerOptions::noise_key,
// WorkerOptions::noise_key), from the operating system's entropy: unlike the run's shared seed,
// no other participant can reproduce it.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "edgesgd/core/random.h"
#include "edgesgd/platform/random_bytes.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::tcp {

inline HostResult<SecretKey> DrawNoiseKey() {
  std::array<std::byte, sizeof(SecretKey)> bytes{};
  SecretKey key;
  do {
    if (const Status drawn = platform::FillRandomBytes(bytes); !drawn.ok()) {
      return HostError(drawn, "no operating-system entropy for the noise key");
    }
    key = std::bit_cast<SecretKey>(bytes);
  } while (key.empty());  // all zero means "no key"
  return key;
}

}  // namespace edgesgd::tcp
