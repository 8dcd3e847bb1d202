#pragma once

// Mean aggregation with the model downlink: x_{r+1} = x_r - mean_i C(p_i). Every update is
// decoded into one dense sum (any codec); the workers get the new model each round. The step
// of error feedback (docs/algorithms.md).

#include "edgesgd/core/aggregator.h"
#include "edgesgd/protocol/aggregation.h"

namespace edgesgd::protocol {

class MeanAggregation final : public Aggregation {
 public:
  static constexpr bool Serves(const RunConfig& config) {
    return config.aggregation == AggregationKind::kMean && config.downlink == DownlinkKind::kModel;
  }
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t) {
    const std::size_t mean = MeanAggregator::StateBytes(config.layout, config.codec);
    return mean == 0 ? 0 : edgesgd::ArenaBytes(sizeof(MeanAggregation)) + mean;
  }

  static constexpr bool kAggregateIsPayload = false;

  EDGESGD_AGGREGATION_COMPONENT();

 private:
  MeanAggregator mean_;
};

}  // namespace edgesgd::protocol
