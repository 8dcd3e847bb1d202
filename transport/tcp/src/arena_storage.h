#pragma once

// Heap memory for one session's arena, sized by the session's own plan (or a device's budget).

#include <cstddef>
#include <memory>
#include <span>

#include "edgesgd/core/arena.h"

namespace edgesgd::tcp::internal {

// `bytes` usable arena bytes. The storage is not initialised, so pages the arena never hands
// out are never touched: a generous worker budget costs only what the run takes.
class ArenaStorage {
 public:
  explicit ArenaStorage(std::size_t bytes)
      : storage_(new std::byte[bytes + kArenaAlignment]),
        arena_(std::span<std::byte>(storage_.get(), bytes + kArenaAlignment)) {}
  ArenaStorage(const ArenaStorage&) = delete;
  ArenaStorage& operator=(const ArenaStorage&) = delete;

  Arena& arena() { return arena_; }

 private:
  std::unique_ptr<std::byte[]> storage_;
  Arena arena_;
};

}  // namespace edgesgd::tcp::internal
