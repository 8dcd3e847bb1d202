#pragma once

// Small helpers shared by the server and worker sessions (not part of the public API).

#include <algorithm>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/random.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol::internal {

// a + b, or kNever when that would overflow: deadlines of kNever stay kNever.
constexpr TimeNs SaturatingAdd(TimeNs a, TimeNs b) { return a > kNever - b ? kNever : a + b; }

// A one-bit mask for a neighbour's (or a slot's) index in a 64-bit set.
constexpr std::uint64_t Bit(std::size_t index) { return std::uint64_t{1} << index; }

using edgesgd::internal::AllFinite;

// A frame's secure aggregation message, or nullptr in a build without them (whose FrameView
// holds an empty stand-in): the sessions' secure code compiles everywhere and runs where it can.
template <typename View>
const wire::SecureView* SecureMessageOf(const View& secure) {
  if constexpr (std::is_same_v<View, wire::SecureView>) {
    return &secure;
  } else {
    return nullptr;
  }
}

// The participants of a round: round(P * n) of the n `candidates` (at least one, none of none),
// by a partial Fisher-Yates shuffle driven by the shared participation stream, so that the
// same seed, round and candidates give the same participants on every machine. Shuffles
// `candidates` in place and returns its first part. Does not allocate.
inline std::span<std::uint32_t> SampleParticipants(std::span<std::uint32_t> candidates,
                                                   float participation, std::uint64_t seed,
                                                   std::uint32_t round) {
  const auto count = static_cast<std::uint32_t>(candidates.size());
  if (count == 0) return candidates;
  const std::uint32_t take = SampledCount(participation, count);
  if (take < count) {
    CounterRng rng(seed, round, 0, StreamId(RandomPurpose::kParticipation));
    for (std::uint32_t i = 0; i < take; ++i) {
      const std::uint32_t j = i + rng.NextBelow(count - i);
      std::swap(candidates[i], candidates[j]);
    }
  }
  return candidates.first(take);
}

// The participants of a private round: each of `candidates` independently with probability q,
// the Poisson sampling differential privacy's accountant assumes. The draw is keyed by the
// server's secret, not the run's seed, which every worker holds: amplification by sampling
// needs a cohort nobody else can predict. Keeps the sampled ones at the front of `candidates`,
// in order, and returns them (possibly none). Does not allocate.
inline std::span<std::uint32_t> SamplePoisson(std::span<std::uint32_t> candidates,
                                              float participation, const SecretKey& secret,
                                              std::uint32_t round) {
  if (participation >= 1.0f) return candidates;
  SecretRng rng(secret, round, 0, StreamId(RandomPurpose::kParticipation));
  std::size_t kept = 0;
  for (const std::uint32_t candidate : candidates) {
    // A fresh draw for every candidate, kept or not: the inclusions are independent.
    if (static_cast<double>(rng.NextU32()) < static_cast<double>(participation) * 4294967296.0) {
      candidates[kept++] = candidate;
    }
  }
  return candidates.first(kept);
}

// The sum of squares of `values`, in double.
inline double SquaredNorm(std::span<const float> values) {
  double sum = 0;
  for (const float v : values) sum += static_cast<double>(v) * static_cast<double>(v);
  return sum;
}

// Bits of a payload's fields (every field element is 32 bits; the frame around it not counted).
inline std::uint64_t PayloadBits(const PayloadView& payload) {
  return 32u * (std::uint64_t{payload.indices.size()} + payload.values.size() +
                payload.words.size() + payload.scales.size());
}

}  // namespace edgesgd::protocol::internal
