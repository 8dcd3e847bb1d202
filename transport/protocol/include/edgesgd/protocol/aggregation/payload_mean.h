#pragma once

// Mean aggregation in payload space, with the aggregate downlink, for codecs whose payloads sum
// (identity, rand_k, random_block: every worker's payload lists the same coordinates). The
// mean of the payloads is again a payload of the codec: the broadcast costs what one update
// costs, and a worker that holds the previous model applies it as x -= decode(mean). Central
// differential privacy noises the mean's values, the coordinates the round released; adaptive
// clipping's bound is kept here (ServerPrivacy).

#include "edgesgd/core/aggregator.h"
#include "edgesgd/protocol/aggregation.h"
#include "edgesgd/protocol/aggregation/server_privacy.h"

namespace edgesgd::protocol {

class PayloadMeanAggregation final : public Aggregation {
 public:
  static constexpr bool Serves(const RunConfig& config) {
    return config.aggregation == AggregationKind::kMean &&
           config.downlink == DownlinkKind::kAggregate && TraitsOf(config.codec).payload_sum;
  }
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t) {
    const std::size_t sum = PayloadAggregator::StateBytes(config.layout, config.codec);
    if (sum == 0) return 0;
    return edgesgd::ArenaBytes(sizeof(PayloadMeanAggregation)) + sum +
           edgesgd::ArenaBytes(CodecScratchBytes(config.codec, config.layout));
  }

  static constexpr const char* kName = "payload_mean";
  static constexpr bool kAddsCentralNoise = true;
  static constexpr bool kAggregateIsPayload = true;

  EDGESGD_AGGREGATION_COMPONENT();
  float ClipBound() const override { return privacy_.bound(); }
  float NextClipBound(std::uint32_t round) const override { return privacy_.NextBound(round); }
  std::span<const std::byte> SavedState() const override { return privacy_.SavedState(); }
  Status RestoreState(std::span<const std::byte> saved) override {
    return privacy_.RestoreState(saved);
  }

 private:
  const CodecRegistry* codecs_ = nullptr;
  const RunConfig* config_ = nullptr;
  PayloadAggregator sum_;
  std::span<std::byte> decode_scratch_;
  ServerPrivacy privacy_;
};

}  // namespace edgesgd::protocol
