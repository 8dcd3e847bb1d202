#pragma once

// The aggregation components a server can run, registered once: the first whose Serves()
// accepts a configuration runs it. A new component is its own files and one line here.

#include <array>

#include "edgesgd/protocol/aggregation.h"
#include "edgesgd/protocol/aggregation/majority_vote.h"
#include "edgesgd/protocol/aggregation/mean.h"
#include "edgesgd/protocol/aggregation/payload_mean.h"
#include "edgesgd/protocol/aggregation/recompressed_mean.h"
#include "edgesgd/protocol/aggregation/robust_mean.h"
#include "edgesgd/protocol/aggregation/scaffold.h"

namespace edgesgd::protocol {

namespace internal {
template <typename T>
constexpr AggregationDescriptor DescriptorOf() {
  return AggregationDescriptor{T::kName, T::kAggregateIsPayload, &T::Serves, &T::ArenaBytes,
                               &CreateInArena<T>};
}

template <typename... Components>
struct AggregationList {
  static constexpr std::array<AggregationDescriptor, sizeof...(Components)> kDescriptors{
      DescriptorOf<Components>()...};

  // Whether the first component that serves `config` adds central noise, read off the component
  // types alone: a caller (a worker validating its Welcome) links none of their code.
  static constexpr bool AddsCentralNoise(const RunConfig& config) {
    bool found = false;
    bool adds = false;
    ((!found && Components::Serves(config) ? (found = true, adds = Components::kAddsCentralNoise)
                                           : false),
     ...);
    return adds;
  }
};
}  // namespace internal

// The components, in order: the first whose Serves() accepts a configuration runs it.
using KnownAggregations =
    internal::AggregationList<MeanAggregation, PayloadMeanAggregation, RecompressedMeanAggregation,
                              MajorityVoteAggregation, RobustMeanAggregation, ScaffoldAggregation>;
inline constexpr const auto& kAggregations = KnownAggregations::kDescriptors;

// The component that runs `config`, or nullptr when none serves it (ValidateRunConfig refuses
// such a configuration with a reason).
constexpr const AggregationDescriptor* FindAggregation(const RunConfig& config) {
  for (const AggregationDescriptor& descriptor : kAggregations) {
    if (descriptor.serves(config)) return &descriptor;
  }
  return nullptr;
}

}  // namespace edgesgd::protocol
