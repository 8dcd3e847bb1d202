#pragma once

// Mean aggregation with the model downlink: x_{r+1} = x_r - mean_i C(p_i). Every update is
// decoded into one dense sum (any codec); the workers get the new model each round. The step
// of error feedback (docs/algorithms.md). With buffered asynchronous aggregation a round is a
// model version: x_{v+1} = x_v - sum_i w(tau_i) C(p_i) / K (buffered_async.h). With differential privacy the new model gets central
// noise on every coordinate, and adaptive clipping's bound is kept here (ServerPrivacy).

#include "edgesgd/core/aggregator.h"
#include "edgesgd/protocol/aggregation.h"
#include "edgesgd/protocol/aggregation/server_privacy.h"

namespace edgesgd::protocol {

class MeanAggregation final : public Aggregation {
 public:
  static constexpr bool Serves(const RunConfig& config) {
    return config.aggregation == AggregationKind::kMean &&
           config.downlink == DownlinkKind::kModel && config.robust.rule == RobustRule::kNone &&
           !config.scaffold;
  }
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t) {
    const std::size_t mean = MeanAggregator::StateBytes(config.layout, config.codec);
    return mean == 0 ? 0 : edgesgd::ArenaBytes(sizeof(MeanAggregation)) + mean;
  }

  static constexpr const char* kName = "mean";
  static constexpr bool kAddsCentralNoise = true;
  static constexpr bool kAggregateIsPayload = false;

  EDGESGD_AGGREGATION_COMPONENT();
  Status AddSum(const CodecParams& params, const PayloadView& payload, const CodecContext& context,
                std::uint32_t contributions) override;
  float ClipBound() const override { return privacy_.bound(); }
  float NextClipBound(std::uint32_t round) const override { return privacy_.NextBound(round); }
  std::span<const std::byte> SavedState() const override { return privacy_.SavedState(); }
  Status RestoreState(std::span<const std::byte> saved) override {
    return privacy_.RestoreState(saved);
  }

 private:
  MeanAggregator mean_;
  ServerPrivacy privacy_;
  AsyncParams async_;
  std::uint32_t version_ = 0;
};

}  // namespace edgesgd::protocol
