// edgesgd's heap-free stand-in for FlatBuffers 2.0.8's flatbuffers/default_allocator.h.
//
// cmake/EdgesgdFlatbuffers.cmake builds the FlatBuffers include folder every edgesgd target sees
// from links to Debian's headers, with this file in place of the original. Same declarations,
// same include guard; the difference is what happens without a custom allocator. Upstream falls
// back to new[]/delete[] when a builder has no allocator; that fallback is dead code for edgesgd
// (FrameBuilder always passes its FixedAllocator), yet it made every translation unit using a
// FlatBufferBuilder reference operator new[] and delete[] — symbols the bare-metal libraries must
// not contain. Here a missing allocator is a programmer error and reaches FLATBUFFERS_ASSERT,
// which edgesgd maps to its fatal handler.
//
// Keep in step with the FlatBuffers version CMake pins (the configure step checks the version).

#ifndef FLATBUFFERS_DEFAULT_ALLOCATOR_H_
#define FLATBUFFERS_DEFAULT_ALLOCATOR_H_

#include "flatbuffers/allocator.h"
#include "flatbuffers/base.h"

namespace flatbuffers {

// Kept for the headers that name it (grpc.h); any use is fatal.
class DefaultAllocator : public Allocator {
 public:
  uint8_t *allocate(size_t) FLATBUFFERS_OVERRIDE {
    FLATBUFFERS_ASSERT(false && "edgesgd: FlatBuffers default allocator used");
    return nullptr;
  }

  void deallocate(uint8_t *, size_t) FLATBUFFERS_OVERRIDE {
    FLATBUFFERS_ASSERT(false && "edgesgd: FlatBuffers default allocator used");
  }

  static void dealloc(void *, size_t) {
    FLATBUFFERS_ASSERT(false && "edgesgd: FlatBuffers default allocator used");
  }

  // Never heap-allocated; keeps the deleting destructor off the global operator delete.
  static void operator delete(void *, size_t) {
    FLATBUFFERS_ASSERT(false && "edgesgd: FlatBuffers default allocator deleted");
  }
};

// Upstream: a null allocator means "use DefaultAllocator". Here it must never be null.
inline uint8_t *Allocate(Allocator *allocator, size_t size) {
  FLATBUFFERS_ASSERT(allocator != nullptr);
  return allocator->allocate(size);
}

inline void Deallocate(Allocator *allocator, uint8_t *p, size_t size) {
  FLATBUFFERS_ASSERT(allocator != nullptr);
  allocator->deallocate(p, size);
}

inline uint8_t *ReallocateDownward(Allocator *allocator, uint8_t *old_p,
                                   size_t old_size, size_t new_size,
                                   size_t in_use_back, size_t in_use_front) {
  FLATBUFFERS_ASSERT(allocator != nullptr);
  return allocator->reallocate_downward(old_p, old_size, new_size, in_use_back,
                                        in_use_front);
}

}  // namespace flatbuffers

#endif  // FLATBUFFERS_DEFAULT_ALLOCATOR_H_
