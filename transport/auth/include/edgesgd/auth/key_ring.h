#pragma once

// Pre-shared keys by device id, in caller-owned fixed storage: a server or gossip peer holds the
// keys of every device that may connect to it, a worker at least its own.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "edgesgd/auth/auth_format.h"
#include "edgesgd/core/status.h"

namespace edgesgd::auth {

// Device id that never has a key (the wire format's "not yet assigned" id).
inline constexpr std::uint32_t kNoDevice = 0xFFFFFFFFu;

struct DeviceKey {
  std::uint32_t device = kNoDevice;
  std::array<std::byte, kKeyBytes> key{};
};

// A set of device keys over storage the caller owns (a static array, an arena, or FixedKeyRing
// below); its capacity is the storage's size. Lookups scan linearly: they happen once per
// connection, and edge deployments have hundreds of devices, not millions. Not copyable (keys
// are not to be duplicated by accident); the destructor zeroizes every entry.
class KeyRing {
 public:
  explicit KeyRing(std::span<DeviceKey> storage) : storage_(storage) {}
  ~KeyRing() { Clear(); }
  KeyRing(const KeyRing&) = delete;
  KeyRing& operator=(const KeyRing&) = delete;

  // Adds `key` for `device`. Reads `key`; does not allocate.
  // Errors: kInvalidArgument for device kNoDevice or an all-zero key (an unset key, never a
  // real one); kAlreadyExists if the device has a key; kResourceExhausted when full.
  Status Add(std::uint32_t device, std::span<const std::byte, kKeyBytes> key);

  // The key of `device`, or null when it has none. Valid until Clear() or destruction.
  const DeviceKey* Find(std::uint32_t device) const;

  // Zeroizes and forgets every key.
  void Clear();

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return storage_.size(); }

 private:
  std::span<DeviceKey> storage_;
  std::size_t size_ = 0;
};

// Decodes 2 * out.size() hex digits of either case into `out`. False, with `out` zeroized, for
// anything else. Does not allocate.
bool DecodeHex(std::string_view hex, std::span<std::byte> out);

// Decodes a key written as 2 * kKeyBytes hex digits, as key files and a device's provisioning
// hold it (DecodeHex).
inline bool DecodeKeyHex(std::string_view hex, std::span<std::byte, kKeyBytes> key) {
  return DecodeHex(hex, key);
}

namespace internal {
template <std::size_t kCapacity>
struct KeyRingStorage {
  std::array<DeviceKey, kCapacity> entries{};
};
}  // namespace internal

// A KeyRing with its own storage for kCapacity keys (36 bytes each).
template <std::size_t kCapacity>
class FixedKeyRing : private internal::KeyRingStorage<kCapacity>, public KeyRing {
 public:
  // The storage base is constructed before KeyRing, so the span below points at live entries.
  FixedKeyRing() : KeyRing(std::span<DeviceKey>(this->entries)) {}
};

}  // namespace edgesgd::auth
