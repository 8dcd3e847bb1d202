#include "edgesgd/protocol/aggregation/mean.h"

namespace edgesgd::protocol {

Status MeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  privacy_.Init(*setup.config, setup.workers, setup.noise_key);
  return mean_.Init(arena, *setup.codecs, setup.config->layout, setup.config->codec);
}

void MeanAggregation::BeginRound() {
  mean_.Reset();
  privacy_.BeginRound();
}

Status MeanAggregation::Add(const CodecParams& params, const PayloadView& payload,
                            const CodecContext& context, const wire::UpdateInfo& update) {
  EDGESGD_TRY(mean_.AddWithParams(params, payload, context));
  privacy_.Count(update);
  return Status::Ok();
}

Status MeanAggregation::FillBroadcast(const PayloadSpans&, const CodecContext&) {
  return Status::FailedPrecondition("mean aggregation broadcasts the model");
}

Status MeanAggregation::Apply(const PayloadView&, const CodecContext& context,
                              std::span<float> model) {
  EDGESGD_TRY(mean_.AddScaledMean(-1.0f, model));
  privacy_.AddNoiseToMean(model, mean_.count(), context.round);
  privacy_.FinishRound(context.round);
  return Status::Ok();
}

}  // namespace edgesgd::protocol
