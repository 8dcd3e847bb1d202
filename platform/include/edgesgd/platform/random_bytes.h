#pragma once

// Cryptographically secure random bytes from the operating system (Linux backend: getrandom(2),
// which blocks only until the kernel's pool is first seeded at boot). For nonces and keys — never
// for training randomness, which is Philox with shared seeds (see core/random.h).

#include <cstddef>
#include <span>

#include "edgesgd/core/status.h"

namespace edgesgd::platform {

// Fills `out` completely. Does not allocate.
// Errors: kUnavailable if the kernel has no getrandom or it fails (the message is in errno).
Status FillRandomBytes(std::span<std::byte> out);

}  // namespace edgesgd::platform
