#pragma once

// Mean aggregation with the aggregate downlink for codecs whose payloads do not sum but that
// declare downlink_recompress (top_k, sign, qsgd, natural, fp16): the server compresses the dense
// mean again with the workers' codec and keeps what that drops in its own residual (two-way error
// feedback, DownlinkFeedback):
//   e_s += mean_i C(p_i);   b = C(e_s);   e_s -= b;   x -= b   (server and every worker)
// The residual is the component's state across rounds, so it is part of the checkpoint.

#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/downlink_feedback.h"
#include "edgesgd/protocol/aggregation.h"

namespace edgesgd::protocol {

class RecompressedMeanAggregation final : public Aggregation {
 public:
  static constexpr bool Serves(const RunConfig& config) {
    return RecompressesDownlink(config) && TraitsOf(config.codec).downlink_recompress;
  }
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t) {
    const std::size_t mean = MeanAggregator::StateBytes(config.layout, config.codec);
    const std::size_t feedback = DownlinkFeedback::StateBytes(config.layout, config.codec);
    if (mean == 0 || feedback == 0) return 0;
    return edgesgd::ArenaBytes(sizeof(RecompressedMeanAggregation)) + mean + feedback +
           edgesgd::ArenaBytes(CodecScratchBytes(config.codec, config.layout));
  }

  static constexpr const char* kName = "recompressed_mean";
  static constexpr bool kAddsCentralNoise = false;
  static constexpr bool kAggregateIsPayload = true;

  EDGESGD_AGGREGATION_COMPONENT();

  std::span<const std::byte> SavedState() const override {
    return std::as_bytes(feedback_.residual());
  }
  Status RestoreState(std::span<const std::byte> saved) override;

  // What the downlink has not delivered yet (d floats).
  std::span<const float> residual() const { return feedback_.residual(); }

 private:
  const CodecRegistry* codecs_ = nullptr;
  const RunConfig* config_ = nullptr;
  MeanAggregator mean_;
  DownlinkFeedback feedback_;
  std::span<std::byte> decode_scratch_;
};

}  // namespace edgesgd::protocol
