#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "edgesgd/protocol/session.h"

namespace edgesgd::protocol {

// A frame a session dropped, for its driver's log: who sent it, why (`Reason`, the session's
// enum), its round when it could be decoded (else the session's), and when.
template <typename Reason>
struct RejectEventOf {
  PeerId peer = 0;
  Reason reason{};
  std::uint32_t round = 0;
  TimeNs time = 0;
};

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
