#pragma once

#include <flatbuffers/allocator.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/check.h"

namespace edgesgd::wire::internal {

// A flatbuffers::Allocator over one caller-owned buffer. FlatBufferBuilder asks it for memory
// once per frame (its first write) and never again as long as the frame fits, so every pointer
// the builder hands out (CreateUninitializedVector) stays valid until the frame is finished.
// FrameBuilder checks a frame's worst-case size against capacity() before building it; growing
// is therefore a programmer error and fatal, never a silent reallocation.
class FixedAllocator final : public flatbuffers::Allocator {
 public:
  FixedAllocator() = default;
  FixedAllocator(std::uint8_t* base, std::size_t capacity) : base_(base), capacity_(capacity) {}

  FixedAllocator(const FixedAllocator&) = delete;
  FixedAllocator& operator=(const FixedAllocator&) = delete;

  std::uint8_t* allocate(std::size_t size) override {
    EDGESGD_CHECK(base_ != nullptr && size <= capacity_);
    return base_;
  }

  // The storage belongs to the caller; nothing to release.
  void deallocate(std::uint8_t*, std::size_t) override {}

  std::uint8_t* reallocate_downward(std::uint8_t*, std::size_t, std::size_t, std::size_t,
                                    std::size_t) override {
    EDGESGD_CHECK(false && "frame exceeds the FrameBuilder's checked capacity");
    return nullptr;
  }

  // Allocators are never deleted through a pointer (the builder does not own this one). A
  // class-level operator delete keeps the vtable's deleting destructor from referencing the
  // global operator delete, which would put a heap symbol into the bare-metal library.
  static void operator delete(void*, std::size_t) {
    EDGESGD_CHECK(false && "FixedAllocator is never heap-allocated");
  }

  std::size_t capacity() const { return capacity_; }

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace edgesgd::wire::internal
