#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "edgesgd/core/result.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::wire {

// Storage to receive frames into, aligned as DecodeFrame requires. Size it with MaxFrameBytes()
// (constexpr, so a static buffer can be checked with static_assert). Runtime-sized receive
// buffers can come from an Arena instead (its allocations are 16-byte aligned).
template <std::size_t kCapacity>
struct alignas(kFrameAlignment) ReceiveBuffer {
  static_assert(kCapacity >= kMinFrameBytes);

  std::byte bytes[kCapacity];

  std::span<std::byte> span() { return std::span<std::byte>(bytes); }
  // The first `length` received bytes, as DecodeFrame takes them.
  std::span<const std::byte> frame(std::size_t length) const {
    return std::span<const std::byte>(bytes, length <= kCapacity ? length : kCapacity);
  }
  static constexpr std::size_t capacity() { return kCapacity; }
};

// True when `bytes` starts where DecodeFrame accepts a frame.
inline bool IsFrameAligned(std::span<const std::byte> bytes) {
  return reinterpret_cast<std::uintptr_t>(bytes.data()) % kFrameAlignment == 0;
}

// `frame` itself when it is aligned, else a copy of it at the start of `aligned_storage` — for
// frames that arrive at arbitrary offsets (e.g. several frames back to back in one read).
// Reads `frame`, may write `aligned_storage`; does not allocate.
// Errors: kInvalidArgument if a copy is needed and `aligned_storage` is not aligned;
// kResourceExhausted if it is shorter than `frame`.
inline Result<std::span<const std::byte>> AlignFrame(std::span<const std::byte> frame,
                                                     std::span<std::byte> aligned_storage) {
  if (IsFrameAligned(frame)) return frame;
  if (!IsFrameAligned(aligned_storage)) {
    return Status::InvalidArgument("the aligned storage is not 8-byte aligned");
  }
  if (aligned_storage.size() < frame.size()) {
    return Status::ResourceExhausted("the aligned storage is shorter than the frame");
  }
  std::memcpy(aligned_storage.data(), frame.data(), frame.size());
  return std::span<const std::byte>(aligned_storage.first(frame.size()));
}

}  // namespace edgesgd::wire
