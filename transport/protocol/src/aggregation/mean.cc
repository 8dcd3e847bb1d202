#include "edgesgd/protocol/aggregation/mean.h"

namespace edgesgd::protocol {

Status MeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  noise_.Init(*setup.config, setup.noise_key);
  return mean_.Init(arena, *setup.codecs, setup.config->layout, setup.config->codec);
}

void MeanAggregation::BeginRound() { mean_.Reset(); }

Status MeanAggregation::Add(const CodecParams& params, const PayloadView& payload,
                            const CodecContext& context) {
  return mean_.AddWithParams(params, payload, context);
}

Status MeanAggregation::FillBroadcast(const PayloadSpans&, const CodecContext&) {
  return Status::FailedPrecondition("mean aggregation broadcasts the model");
}

Status MeanAggregation::Apply(const PayloadView&, const CodecContext& context,
                              std::span<float> model) {
  EDGESGD_TRY(mean_.AddScaledMean(-1.0f, model));
  noise_.AddToMean(model, mean_.count(), context.round);
  return Status::Ok();
}

}  // namespace edgesgd::protocol
