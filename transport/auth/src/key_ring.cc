#include "edgesgd/auth/key_ring.h"

#include <algorithm>

#include "edgesgd/auth/hmac_sha256.h"

namespace edgesgd::auth {
namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

bool DecodeHex(std::string_view hex, std::span<std::byte> out) {
  bool valid = hex.size() == 2 * out.size();
  for (std::size_t i = 0; valid && i < out.size(); ++i) {
    const int high = HexValue(hex[2 * i]);
    const int low = HexValue(hex[2 * i + 1]);
    valid = high >= 0 && low >= 0;
    out[i] = static_cast<std::byte>(valid ? high * 16 + low : 0);
  }
  if (!valid) Zeroize(out);
  return valid;
}

Status KeyRing::Add(std::uint32_t device, std::span<const std::byte, kKeyBytes> key) {
  const bool all_zero =
      std::all_of(key.begin(), key.end(), [](std::byte b) { return b == std::byte{0}; });
  if (device == kNoDevice || all_zero) {
    return Status::InvalidArgument("the device id is kNoDevice or the key is all zero");
  }
  if (Find(device) != nullptr) {
    return Status(StatusCode::kAlreadyExists, "the ring already holds a key for the device");
  }
  if (size_ == storage_.size()) return Status::ResourceExhausted("the key ring's storage is full");
  DeviceKey& entry = storage_[size_++];
  entry.device = device;
  std::copy(key.begin(), key.end(), entry.key.begin());
  return Status::Ok();
}

const DeviceKey* KeyRing::Find(std::uint32_t device) const {
  for (std::size_t i = 0; i < size_; ++i) {
    if (storage_[i].device == device) return &storage_[i];
  }
  return nullptr;
}

void KeyRing::Clear() {
  for (DeviceKey& entry : storage_.first(size_)) {
    Zeroize(entry.key);
    entry.device = kNoDevice;
  }
  size_ = 0;
}

}  // namespace edgesgd::auth
