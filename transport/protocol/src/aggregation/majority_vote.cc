#include "edgesgd/protocol/aggregation/majority_vote.h"

#include <algorithm>

#include "edgesgd/core/optimizer.h"

namespace edgesgd::protocol {

Status MajorityVoteAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  config_ = setup.config;
  return vote_.Init(arena, config_->layout, setup.workers, config_->tie_rule);
}

void MajorityVoteAggregation::BeginRound(std::uint32_t) { vote_.Reset(); }

Status MajorityVoteAggregation::Add(const CodecParams&, const PayloadView& payload,
                                    const CodecContext&, const wire::UpdateInfo&) {
  // A vote is plain signs: one unit scale per tensor and nothing else.
  if (payload.scales.size() != config_->layout.tensor_count() || !payload.indices.empty() ||
      !payload.values.empty()) {
    return Status::DataLoss("a vote carries sign words and one scale per tensor only");
  }
  for (const float scale : payload.scales) {
    if (scale != 1.0f) return Status::DataLoss("a vote's scales must be 1");
  }
  return vote_.AddVote(payload.words);
}

Status MajorityVoteAggregation::FillBroadcast(const PayloadSpans& out, const CodecContext&) {
  // V = sign(sum_i sign(m_i)) as plain signs: one unit scale per tensor.
  EDGESGD_TRY(vote_.Finish(out.words));
  std::fill(out.scales.begin(), out.scales.end(), 1.0f);
  return Status::Ok();
}

Status MajorityVoteAggregation::Apply(const PayloadView& broadcast, const CodecContext&,
                                      std::span<float> model) {
  return ApplySignVote(broadcast.words, config_->layout, config_->optimizer.learning_rate,
                       config_->optimizer.weight_decay, model);
}

}  // namespace edgesgd::protocol
