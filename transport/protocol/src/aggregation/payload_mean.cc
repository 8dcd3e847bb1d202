#include "edgesgd/protocol/aggregation/payload_mean.h"

#include <algorithm>

namespace edgesgd::protocol {

Status PayloadMeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  codecs_ = setup.codecs;
  config_ = setup.config;
  privacy_.Init(*config_, setup.workers, setup.noise_key);
  EDGESGD_TRY(sum_.Init(arena, config_->layout, config_->codec));
  EDGESGD_TRY_ASSIGN(decode_scratch_,
                     arena.AllocateBytes(CodecScratchBytes(config_->codec, config_->layout)));
  return Status::Ok();
}

void PayloadMeanAggregation::BeginRound(std::uint32_t) {
  sum_.Reset();
  privacy_.BeginRound();
}

Status PayloadMeanAggregation::Add(const CodecParams&, const PayloadView& payload,
                                   const CodecContext&, const wire::UpdateInfo& update) {
  EDGESGD_TRY(privacy_.CheckBound(payload));
  EDGESGD_TRY(sum_.Add(payload, 1.0f));
  privacy_.Count(update);
  return Status::Ok();
}

Status PayloadMeanAggregation::FillBroadcast(const PayloadSpans& out, const CodecContext& context) {
  EDGESGD_TRY_ASSIGN(const PayloadView mean, sum_.Mean());
  std::copy(mean.indices.begin(), mean.indices.end(), out.indices.begin());
  std::copy(mean.values.begin(), mean.values.end(), out.values.begin());
  privacy_.AddNoiseToMean(out.values.first(mean.values.size()), sum_.count(), context.round);
  return Status::Ok();
}

Status PayloadMeanAggregation::Apply(const PayloadView& broadcast, const CodecContext& context,
                                     std::span<float> model) {
  EDGESGD_TRY(codecs_->DecodeAdd(config_->codec, config_->layout, context, broadcast, -1.0f, model,
                                 decode_scratch_));
  privacy_.FinishRound(context.round);
  return Status::Ok();
}

}  // namespace edgesgd::protocol
