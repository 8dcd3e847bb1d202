#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace edgesgd::protocol {

// The last N events of a session (rejected frames, closed rounds) for its driver to drain: a
// fixed ring that overwrites its oldest entry when full and counts what it dropped. Does not
// allocate.
template <typename T, std::size_t N>
class EventLog {
 public:
  static constexpr std::size_t kCapacity = N;

  // Appends `value`; when the log is full the oldest entry is lost and `dropped` counts it.
  void Push(const T& value, std::uint64_t& dropped) {
    if (size_ == N) {
      ring_[head_] = value;
      head_ = (head_ + 1) % N;
      ++dropped;
      return;
    }
    ring_[(head_ + size_) % N] = value;
    ++size_;
  }

  // Removes the oldest entry into `out`; false when the log is empty.
  bool Pop(T& out) {
    if (size_ == 0) return false;
    out = ring_[head_];
    head_ = (head_ + 1) % N;
    --size_;
    return true;
  }

 private:
  std::array<T, N> ring_{};
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace edgesgd::protocol
