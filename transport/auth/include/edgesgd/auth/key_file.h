#pragma once

// The key file: the pre-shared keys a node loads at start-up (Linux; reads a file and allocates
// while loading, before any connection exists).
//
// Format: UTF-8/ASCII text, one key per line, `DEVICE_ID HEX_KEY`:
//   # edgesgd keys: device id (decimal), 64 hex digits (32 random bytes)
//   1 8f3a...c2   (64 hex digits)
//   2 17b0...9e
// Blank lines and lines whose first non-blank character is '#' are ignored; fields are separated
// by spaces or tabs; a trailing '\r' is accepted. Strict otherwise: the device id is decimal
// (no sign, below 4294967295), the key exactly 64 hex digits and not all zero, nothing else on
// the line, no device twice. `edgesgd keygen --devices N --out FILE` writes one for a fleet (a
// server loads it whole, a worker its own line with LoadDeviceKey); `--per-device-dir DIR` also
// writes each device's line alone to DIR/device-ID.key.
// The file must be accessible by its owner only: one that group or others can read, write or
// execute is refused.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "edgesgd/auth/key_ring.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::auth {

// Largest key file read (about 10,000 keys).
inline constexpr std::size_t kMaxKeyFileBytes = 1 << 20;

// Each loader returns the number of keys it added, or a HostError: a status code and a one-line
// message naming the file and line, e.g. "keys.txt:3: key must be 64 hex digits, got 62".
// Codes: kNotFound (missing file), kUnavailable (other open/read failures), kFailedPrecondition
// (group or others have access to the file), kDataLoss (syntax), kAlreadyExists (a device
// twice), kResourceExhausted (more keys than the ring holds), kInvalidArgument (no key at all,
// or an all-zero key; LoadDeviceKey: no key for the device, e.g. "key file keys.txt has no key
// for device 7").

// Parses key-file `text` into `ring` (which keeps the keys it had); `name` prefixes messages.
// On error, the keys added from this text are still in the ring: discard it.
HostResult<std::size_t> ParseKeyFile(std::string_view text, std::string_view name, KeyRing& ring);

// Reads the file at `path` (at most kMaxKeyFileBytes) and parses it as above; refuses it,
// unread, when group or others have any access to it. The read buffer is zeroized before it is
// freed.
HostResult<std::size_t> LoadKeyFile(const std::string& path, KeyRing& ring);

// Adds the key of `device` alone from the key file at `path`, which may hold other devices'
// keys too (a worker's line of the file its server loads): read and checked as by LoadKeyFile,
// every line's syntax included, but the other devices' keys are dropped, not added: 1 key on
// success. Fails when no line, or more than one, is the device's.
HostResult<std::size_t> LoadDeviceKey(const std::string& path, std::uint32_t device, KeyRing& ring);

}  // namespace edgesgd::auth
