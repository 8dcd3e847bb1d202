#pragma once

// The aggregation components a server can run, registered once: the first whose Serves()
// accepts a configuration runs it. A new component is its own files and one line here.

#include <array>

#include "edgesgd/protocol/aggregation.h"
#include "edgesgd/protocol/aggregation/fednova.h"
#include "edgesgd/protocol/aggregation/majority_vote.h"
#include "edgesgd/protocol/aggregation/mean.h"
#include "edgesgd/protocol/aggregation/payload_mean.h"
#include "edgesgd/protocol/aggregation/recompressed_mean.h"
#include "edgesgd/protocol/aggregation/robust_mean.h"
#include "edgesgd/protocol/aggregation/scaffold.h"

namespace edgesgd::protocol {

namespace internal {
template <typename T>
constexpr const AggregationOption* OptionOf() {
  if constexpr (requires { T::kOption; }) {
    return &T::kOption;
  } else {
    return nullptr;
  }
}

// Whether component T runs `config`: one with an option when the option is on (its own Serves
// says more), the others only when no option is, so exactly one component serves a run.
template <typename T>
constexpr bool ServesRun(const RunConfig& config) {
  if constexpr (requires { T::kOption; }) {
    return (config.aggregation_options & T::kOption.bit) != 0 && T::Serves(config);
  } else {
    return config.aggregation_options == 0 && T::Serves(config);
  }
}

template <typename T>
constexpr AggregationDescriptor DescriptorOf() {
  return AggregationDescriptor{T::kName,        T::kAggregateIsPayload, &ServesRun<T>,
                               &T::ArenaBytes,  &CreateInArena<T>,      OptionOf<T>()};
}

template <typename... Components>
struct AggregationList {
  static constexpr std::array<AggregationDescriptor, sizeof...(Components)> kDescriptors{
      DescriptorOf<Components>()...};

  // Whether each option has one bit, and no other option the same.
  static constexpr bool OptionBitsDistinct() {
    std::uint32_t bits = 0;
    for (const AggregationDescriptor& descriptor : kDescriptors) {
      if (descriptor.option == nullptr) continue;
      const std::uint32_t bit = descriptor.option->bit;
      if (bit == 0 || (bit & (bit - 1)) != 0 || (bits & bit) != 0) return false;
      bits |= bit;
    }
    return true;
  }

  static constexpr std::uint32_t OptionBits() {
    std::uint32_t bits = 0;
    for (const AggregationDescriptor& descriptor : kDescriptors) {
      if (descriptor.option != nullptr) bits |= descriptor.option->bit;
    }
    return bits;
  }

  // Whether the first component that serves `config` adds central noise, read off the component
  // types alone: a caller (a worker validating its Welcome) links none of their code.
  static constexpr bool AddsCentralNoise(const RunConfig& config) {
    bool found = false;
    bool adds = false;
    ((!found && ServesRun<Components>(config) ? (found = true, adds = Components::kAddsCentralNoise)
                                           : false),
     ...);
    return adds;
  }
};
}  // namespace internal

// The components, in order: the first whose Serves() accepts a configuration runs it.
// One line per component, so that registering one is one line.
// clang-format off
using KnownAggregations = internal::AggregationList<
    MeanAggregation,
    PayloadMeanAggregation,
    RecompressedMeanAggregation,
    MajorityVoteAggregation,
    RobustMeanAggregation,
    FedNovaAggregation,
    ScaffoldAggregation>;
// clang-format on
inline constexpr const auto& kAggregations = KnownAggregations::kDescriptors;
// The bits of RunConfig::aggregation_options some component declares.
inline constexpr std::uint32_t kAggregationOptionBits = KnownAggregations::OptionBits();
static_assert(KnownAggregations::OptionBitsDistinct(),
              "each aggregation option needs one bit of its own");

// The component that runs `config`, or nullptr when none serves it (ValidateRunConfig refuses
// such a configuration with a reason).
constexpr const AggregationDescriptor* FindAggregation(const RunConfig& config) {
  for (const AggregationDescriptor& descriptor : kAggregations) {
    if (descriptor.serves(config)) return &descriptor;
  }
  return nullptr;
}

}  // namespace edgesgd::protocol
