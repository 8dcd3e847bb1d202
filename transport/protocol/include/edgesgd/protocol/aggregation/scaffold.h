#pragma once

// Mean aggregation with SCAFFOLD's control variates (core/scaffold.h), model downlink only:
// x_{r+1} = x_r - mean_i C(p_i) as for the plain mean, and c += (1 / N) * sum_i C(q_i) over the
// round's devices, N the federation's workers. Every update carries its change C(q_i); an update
// and its change are accepted together or not at all, so c stays the mean of the c_i the
// devices keep. c travels in every model broadcast and is the state a checkpoint keeps.
//
// Memory: the mean's accumulator and scratch, c, the sum of the round's changes and one
// decoded change (d floats each), and the codec's scratch.

#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/aggregation.h"

namespace edgesgd::protocol {

class ScaffoldAggregation final : public Aggregation {
 public:
  static constexpr bool Serves(const RunConfig& config) {
    return config.scaffold && config.aggregation == AggregationKind::kMean &&
           config.downlink == DownlinkKind::kModel && config.robust.rule == RobustRule::kNone;
  }
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t) {
    const std::size_t mean = MeanAggregator::StateBytes(config.layout, config.codec);
    if (mean == 0) return 0;
    return edgesgd::ArenaBytes(sizeof(ScaffoldAggregation)) + mean +
           3 * ArenaBytesFor<float>(config.layout.dimension()) +
           edgesgd::ArenaBytes(CodecScratchBytes(config.codec, config.layout));
  }

  static constexpr const char* kName = "scaffold";
  static constexpr bool kAddsCentralNoise = false;
  static constexpr bool kAggregateIsPayload = false;

  EDGESGD_AGGREGATION_COMPONENT();
  Status AddWithControl(const CodecParams& params, const PayloadView& payload,
                        const CodecParams& control_params, const PayloadView& control,
                        const CodecContext& context, const wire::UpdateInfo& update) override;
  std::span<const float> ServerControl() const override { return control_; }
  std::span<const std::byte> SavedState() const override { return std::as_bytes(control_); }
  Status RestoreState(std::span<const std::byte> saved) override;

 private:
  const CodecRegistry* codecs_ = nullptr;
  TensorLayout layout_;
  std::uint32_t workers_ = 0;
  MeanAggregator mean_;
  std::span<float> control_;     // c
  std::span<float> change_sum_;  // sum of the round's accepted C(q_i)
  std::span<float> change_;      // the change being added, decoded before anything is kept
  std::span<std::byte> scratch_;
};

}  // namespace edgesgd::protocol
