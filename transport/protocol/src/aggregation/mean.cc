#include "edgesgd/protocol/aggregation/mean.h"

namespace edgesgd::protocol {

Status MeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
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

Status MeanAggregation::Apply(const PayloadView&, const CodecContext&, std::span<float> model) {
  return mean_.AddScaledMean(-1.0f, model);
}

}  // namespace edgesgd::protocol
