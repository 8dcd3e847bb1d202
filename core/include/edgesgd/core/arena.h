#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>

#include "edgesgd/core/result.h"

namespace edgesgd {

// Every arena allocation starts on this boundary (enough for SSE/NEON loads and for
// FlatBuffers' 8-byte scalars), so a memory plan is the sum of rounded-up request sizes.
inline constexpr std::size_t kArenaAlignment = 16;

// Bytes an arena spends on a request of `bytes` bytes.
constexpr std::size_t ArenaBytes(std::size_t bytes) {
  return (bytes + (kArenaAlignment - 1)) & ~(kArenaAlignment - 1);
}

// Bytes an arena spends on `count` objects of type T.
template <typename T>
constexpr std::size_t ArenaBytesFor(std::size_t count) {
  return ArenaBytes(count * sizeof(T));
}

// A bump allocator over a caller-owned byte span. All buffers of a component are taken from it
// at init; after Seal() any further allocation fails, which is how "no allocation after init"
// is enforced rather than hoped for. Never touches the heap.
class Arena {
 public:
  constexpr Arena() = default;

  // Uses `storage` from its first kArenaAlignment-aligned byte on.
  explicit Arena(std::span<std::byte> storage) {
    const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    const std::size_t skip = (kArenaAlignment - (address % kArenaAlignment)) % kArenaAlignment;
    if (skip <= storage.size()) {
      base_ = storage.data() + skip;
      capacity_ = storage.size() - skip;
    }
  }

  // Over storage the caller knows to be all zero bytes (fresh pages from calloc or mmap): the
  // arena hands it out without writing it, so pages a component never writes are never backed
  // by memory — a simulator's thousands of idle devices cost address space, not RAM. Allocations
  // never reuse bytes, so they stay zero-initialised.
  struct StorageIsZeroed {};
  Arena(std::span<std::byte> storage, StorageIsZeroed) : Arena(storage) { zeroed_ = true; }

  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `count` zero-initialised objects of a trivial type T.
  // Errors: kFailedPrecondition after Seal(); kResourceExhausted when the arena is too small.
  template <typename T>
  Result<std::span<T>> Allocate(std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>,
                  "arena memory holds plain data only");
    static_assert(alignof(T) <= kArenaAlignment);
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      return Status::ResourceExhausted("the arena request's byte count overflows");
    }
    EDGESGD_TRY_ASSIGN(std::span<std::byte> bytes, AllocateBytes(count * sizeof(T)));
    // Through void*: AllocateBytes returns kArenaAlignment-aligned storage, which -Wcast-align
    // cannot see; a direct reinterpret_cast is an error on strict-alignment targets (ARM).
    return std::span<T>(static_cast<T*>(static_cast<void*>(bytes.data())), count);
  }

  // `bytes` zeroed bytes aligned to kArenaAlignment. Same errors as Allocate.
  Result<std::span<std::byte>> AllocateBytes(std::size_t bytes) {
    if (sealed_) return Status::FailedPrecondition("the arena is sealed");
    if (bytes > capacity_ - used_ || ArenaBytes(bytes) > capacity_ - used_) {
      return Status::ResourceExhausted("the arena has too few bytes left for the request");
    }
    std::byte* start = base_ + used_;
    used_ += ArenaBytes(bytes);
    if (bytes != 0 && !zeroed_) std::memset(start, 0, bytes);
    return std::span<std::byte>(start, bytes);
  }

  // Forbids further allocation. Buffers handed out so far stay valid.
  void Seal() { sealed_ = true; }
  bool sealed() const { return sealed_; }

  std::size_t used_bytes() const { return used_; }
  std::size_t capacity_bytes() const { return capacity_; }
  std::size_t remaining_bytes() const { return capacity_ - used_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  bool sealed_ = false;
  bool zeroed_ = false;
};

}  // namespace edgesgd
