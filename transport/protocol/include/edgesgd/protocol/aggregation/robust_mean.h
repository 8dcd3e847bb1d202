#pragma once

// Byzantine-robust aggregation with the model downlink: x_{r+1} = x_r - R(C(p_1), ..., C(p_n)),
// R the run's robust rule (median, trimmed mean, multi-Krum, centered clipping; RobustAggregator).
// Every accepted update is decoded into its own row, so the component holds the round's cohort
// side by side: its memory is cohort x d floats plus the rule's scratch, all taken when the run
// starts (ArenaBytes). Centered clipping's centre is the state a checkpoint keeps.

#include "edgesgd/core/robust_aggregator.h"
#include "edgesgd/protocol/aggregation.h"

namespace edgesgd::protocol {

class RobustMeanAggregation final : public Aggregation {
 public:
  static constexpr bool Serves(const RunConfig& config) {
    return config.aggregation == AggregationKind::kMean &&
           config.downlink == DownlinkKind::kModel && config.robust.rule != RobustRule::kNone;
  }
  // A round accepts updates only from its sampled participants: at most the cohort of all
  // `workers` live.
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t workers) {
    const std::size_t rows =
        RobustAggregator::StateBytes(config.layout, config.codec, config.robust,
                                     SampledCount(config.participation, workers));
    return rows == 0 ? 0 : edgesgd::ArenaBytes(sizeof(RobustMeanAggregation)) + rows;
  }

  static constexpr const char* kName = "robust_mean";
  static constexpr bool kAddsCentralNoise = false;
  static constexpr bool kAggregateIsPayload = false;

  EDGESGD_AGGREGATION_COMPONENT();
  std::span<const std::byte> SavedState() const override {
    return std::as_bytes(robust_.center());
  }
  Status RestoreState(std::span<const std::byte> saved) override;

 private:
  RobustAggregator robust_;
};

}  // namespace edgesgd::protocol
