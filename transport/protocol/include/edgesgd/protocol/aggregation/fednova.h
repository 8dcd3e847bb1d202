#pragma once

// FedNova, normalized averaging (Wang et al., NeurIPS 2020; docs/algorithms.md): devices that
// take different numbers of local steps tau_i (WorkerOptions::local_step_limit) count by their
// progress per step, so the slow ones are not outweighed by the fast ones' drift:
//   x_{r+1} = x_r - tau_eff * mean_i (C(p_i) / tau_i),   tau_eff = mean_i tau_i.
// With every tau_i equal it is the mean. Switched on by --fednova (kOption); the model downlink
// and synchronous rounds, no other aggregation feature (its run feature in fednova.cc).

#include "edgesgd/core/aggregator.h"
#include "edgesgd/protocol/aggregation.h"

namespace edgesgd::protocol {

extern const RunFeature kFedNovaFeature;

class FedNovaAggregation final : public Aggregation {
 public:
  static constexpr AggregationOption kOption{
      "--fednova",
      "FedNova: normalized averaging for workers that take different numbers of local steps "
      "(slow devices under --local-time-budget-ms): each update counts by its progress per "
      "step, so the mean does not lean towards the workers that did more. Equal steps: the "
      "mean",
      1u << 0, &kFedNovaFeature};

  static constexpr bool Serves(const RunConfig& config) {
    return config.aggregation == AggregationKind::kMean && config.downlink == DownlinkKind::kModel;
  }
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t) {
    const std::size_t mean = MeanAggregator::StateBytes(config.layout, config.codec);
    return mean == 0 ? 0 : edgesgd::ArenaBytes(sizeof(FedNovaAggregation)) + mean;
  }

  static constexpr const char* kName = "fednova";
  static constexpr bool kAddsCentralNoise = false;
  static constexpr bool kAggregateIsPayload = false;

  EDGESGD_AGGREGATION_COMPONENT();

 private:
  MeanAggregator normalized_;      // sum_i C(p_i) / tau_i, by weights 1 / tau_i
  std::uint32_t run_steps_ = 0;    // H: the steps of an Update that names none
  std::uint64_t steps_taken_ = 0;  // sum_i tau_i of the round
};

}  // namespace edgesgd::protocol
