#pragma once

// Buffers a component does not need between its rounds: it writes them before it reads them
// again. A driver short of memory may give their pages back to the system while the component
// waits for its next round (the simulator does for devices that sit rounds out): whatever they
// hold afterwards, the component's results do not change.

#include <array>
#include <cstddef>
#include <span>

namespace edgesgd {

class IdleMemory {
 public:
  static constexpr std::size_t kMaxRegions = 8;

  // Adds `buffer` (nothing for an empty one). Beyond kMaxRegions a buffer is not listed, which
  // only means that it is kept.
  template <typename T>
  void Add(std::span<T> buffer) {
    if (buffer.empty() || count_ == kMaxRegions) return;
    regions_[count_++] = std::as_writable_bytes(buffer);
  }
  void Add(const IdleMemory& other) {
    for (const std::span<std::byte> region : other) Add(region);
  }

  // The regions, iterated over the object itself (so that `for (region : session.IdleBuffers())`
  // keeps the temporary alive for the loop).
  const std::span<std::byte>* begin() const { return regions_.data(); }
  const std::span<std::byte>* end() const { return regions_.data() + count_; }

 private:
  std::array<std::span<std::byte>, kMaxRegions> regions_{};
  std::size_t count_ = 0;
};

}  // namespace edgesgd
