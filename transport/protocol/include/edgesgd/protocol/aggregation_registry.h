#pragma once

// The aggregation components a server can run, registered once: the first whose Serves()
// accepts a configuration runs it. A new component is its own files and one line here.

#include <array>

#include "edgesgd/protocol/aggregation.h"
#include "edgesgd/protocol/aggregation/majority_vote.h"
#include "edgesgd/protocol/aggregation/mean.h"
#include "edgesgd/protocol/aggregation/payload_mean.h"
#include "edgesgd/protocol/aggregation/recompressed_mean.h"

namespace edgesgd::protocol {

namespace internal {
template <typename T>
constexpr AggregationDescriptor DescriptorOf(const char* name) {
  return AggregationDescriptor{name,       T::kAggregateIsPayload, T::kAddsCentralNoise,
                               &T::Serves, &T::ArenaBytes,         &CreateInArena<T>};
}
}  // namespace internal

inline constexpr std::array<AggregationDescriptor, 4> kAggregations{
    internal::DescriptorOf<MeanAggregation>("mean"),
    internal::DescriptorOf<PayloadMeanAggregation>("payload_mean"),
    internal::DescriptorOf<RecompressedMeanAggregation>("recompressed_mean"),
    internal::DescriptorOf<MajorityVoteAggregation>("majority_vote"),
};

// The component that runs `config`, or nullptr when none serves it (ValidateRunConfig refuses
// such a configuration with a reason).
constexpr const AggregationDescriptor* FindAggregation(const RunConfig& config) {
  for (const AggregationDescriptor& descriptor : kAggregations) {
    if (descriptor.serves(config)) return &descriptor;
  }
  return nullptr;
}

}  // namespace edgesgd::protocol
