#pragma once

// signSGD with majority vote: every update is a vote of plain signs (sign codec, unit scales),
// the server counts them and broadcasts V = sign(sum_i sign(m_i)), again one bit per
// coordinate, which every participant applies as the Signum step x -= lr * (V + wd * x).

#include "edgesgd/core/majority_vote.h"
#include "edgesgd/protocol/aggregation.h"

namespace edgesgd::protocol {

class MajorityVoteAggregation final : public Aggregation {
 public:
  static constexpr bool Serves(const RunConfig& config) {
    return config.aggregation == AggregationKind::kMajority;
  }
  static constexpr std::size_t ArenaBytes(const RunConfig& config, std::uint32_t workers) {
    const std::size_t votes = MajorityVote::StateBytes(config.layout, workers);
    return votes == 0 ? 0 : edgesgd::ArenaBytes(sizeof(MajorityVoteAggregation)) + votes;
  }

  static constexpr const char* kName = "majority_vote";
  static constexpr bool kAddsCentralNoise = false;
  static constexpr bool kAggregateIsPayload = true;

  EDGESGD_AGGREGATION_COMPONENT();
  Status AddVoteCounts(std::span<const std::uint32_t> counts, std::uint32_t voters) override {
    return vote_.AddCounts(counts, voters);
  }

 private:
  const RunConfig* config_ = nullptr;
  MajorityVote vote_;
};

}  // namespace edgesgd::protocol
