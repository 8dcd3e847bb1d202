#pragma once

// Small helpers shared by the server and worker sessions (not part of the public API).

#include <cmath>
#include <span>

#include "edgesgd/core/codec_params.h"
#include "edgesgd/core/quant_schedule.h"
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

// Whether a received payload comes from the run's codec with the run's per-frame parameters. A
// qsgd payload carries its levels and bucket; receivers decode with the configured ones, so
// they must agree.
inline bool MatchesCodec(const CodecParams& codec, const wire::EncodedPayload& payload) {
  if (payload.codec != codec.kind) return false;
  if (payload.kind == wire::PayloadKind::kQuantized) {
    return payload.qsgd_levels == codec.qsgd_levels && payload.qsgd_bucket == codec.qsgd_bucket;
  }
  return true;
}

// MatchesCodec for uplink payloads, whose qsgd level count the run's quantization schedule may
// choose per frame: the count must be one the schedule produces (receivers then decode with the
// frame's own count, wire::DecodeParams).
inline bool MatchesScheduledCodec(const CodecParams& codec, const QuantSchedule& schedule,
                                  const wire::EncodedPayload& payload) {
  if (payload.codec != codec.kind) return false;
  if (payload.kind == wire::PayloadKind::kQuantized) {
    return schedule.Accepts(payload.qsgd_levels) && payload.qsgd_bucket == codec.qsgd_bucket;
  }
  return true;
}

// Bits of a payload's fields (every field element is 32 bits; the frame around it not counted).
inline std::uint64_t PayloadBits(const PayloadView& payload) {
  return 32u * (std::uint64_t{payload.indices.size()} + payload.values.size() +
                payload.words.size() + payload.scales.size());
}

}  // namespace edgesgd::protocol::internal
