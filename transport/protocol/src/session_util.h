#pragma once

// Small helpers shared by the server and worker sessions (not part of the public API).

#include <cmath>
#include <span>

#include "edgesgd/core/payload.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol::internal {

// a + b, or kNever when that would overflow: deadlines of kNever stay kNever.
constexpr TimeNs SaturatingAdd(TimeNs a, TimeNs b) { return a > kNever - b ? kNever : a + b; }

inline bool AllFinite(std::span<const float> values) {
  for (const float value : values) {
    if (!std::isfinite(value)) return false;
  }
  return true;
}

// Bits of a payload's fields (every field element is 32 bits; the frame around it not counted).
inline std::uint64_t PayloadBits(const PayloadView& payload) {
  return 32u * (std::uint64_t{payload.indices.size()} + payload.values.size() +
                payload.words.size() + payload.scales.size());
}

}  // namespace edgesgd::protocol::internal
