#pragma once

// Arena storage for secure aggregation's own structures, whose default member initialisers make
// them more than the plain data Arena::Allocate hands out.

#include <cstddef>
#include <limits>
#include <new>
#include <span>
#include <type_traits>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/result.h"

namespace edgesgd::secagg::internal {

// `count` default-constructed objects of T from `arena` (placement: no allocation). The arena
// never destroys them, hence T must be trivially destructible. Errors: the arena's.
template <typename T>
Result<std::span<T>> ConstructInArena(Arena& arena, std::size_t count) {
  static_assert(std::is_trivially_destructible_v<T> && alignof(T) <= kArenaAlignment);
  if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
    return Status::ResourceExhausted("the arena request's byte count overflows");
  }
  EDGESGD_TRY_ASSIGN(const std::span<std::byte> bytes, arena.AllocateBytes(count * sizeof(T)));
  T* first = static_cast<T*>(static_cast<void*>(bytes.data()));
  for (std::size_t i = 0; i < count; ++i) ::new (static_cast<void*>(first + i)) T();
  return std::span<T>(first, count);
}

}  // namespace edgesgd::secagg::internal
