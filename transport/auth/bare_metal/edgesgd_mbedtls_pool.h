#pragma once

// The static pool from which mbed TLS allocates in edgesgd's bare-metal builds
// (edgesgd_mbedtls_pool.cc; edgesgd_mbedtls_config.h routes mbed TLS's calloc and free to it).

#include <cstddef>

namespace edgesgd::mbedtls_pool {

// Room for the larger of what a device holds at once: five HMAC states (280 bytes each with the
// pool's headers, two per authenticated connection), or the bignums of one X25519 agreement of
// secure aggregation, which mbed TLS allocates and frees as it goes.
inline constexpr std::size_t kPoolBytes = 1536;

// The most bytes of the pool in use at once so far.
std::size_t PeakBytes();

}  // namespace edgesgd::mbedtls_pool
