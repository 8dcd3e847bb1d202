#include "edgesgd/protocol/aggregation/payload_mean.h"

#include <algorithm>

namespace edgesgd::protocol {

Status PayloadMeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  codecs_ = setup.codecs;
  config_ = setup.config;
  noise_.Init(*config_, setup.noise_key);
  EDGESGD_TRY(sum_.Init(arena, config_->layout, config_->codec));
  EDGESGD_TRY_ASSIGN(decode_scratch_,
                     arena.AllocateBytes(CodecScratchBytes(config_->codec, config_->layout)));
  return Status::Ok();
}

void PayloadMeanAggregation::BeginRound() { sum_.Reset(); }

Status PayloadMeanAggregation::Add(const CodecParams&, const PayloadView& payload,
                                   const CodecContext&) {
  return sum_.Add(payload, 1.0f);
}

Status PayloadMeanAggregation::FillBroadcast(const PayloadSpans& out, const CodecContext& context) {
  EDGESGD_TRY_ASSIGN(const PayloadView mean, sum_.Mean());
  std::copy(mean.indices.begin(), mean.indices.end(), out.indices.begin());
  std::copy(mean.values.begin(), mean.values.end(), out.values.begin());
  noise_.AddToMean(out.values.first(mean.values.size()), sum_.count(), context.round);
  return Status::Ok();
}

Status PayloadMeanAggregation::Apply(const PayloadView& broadcast, const CodecContext& context,
                                     std::span<float> model) {
  return codecs_->DecodeAdd(config_->codec, config_->layout, context, broadcast, -1.0f, model,
                            decode_scratch_);
}

}  // namespace edgesgd::protocol
