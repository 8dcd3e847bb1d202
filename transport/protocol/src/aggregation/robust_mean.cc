#include "edgesgd/protocol/aggregation/robust_mean.h"

namespace edgesgd::protocol {

Status RobustMeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  const RunConfig& config = *setup.config;
  return robust_.Init(arena, *setup.codecs, config.layout, config.codec, config.robust,
                      SampledCount(config.participation, setup.workers));
}

void RobustMeanAggregation::BeginRound(std::uint32_t) { robust_.Reset(); }

Status RobustMeanAggregation::Add(const CodecParams& params, const PayloadView& payload,
                                  const CodecContext& context, const wire::UpdateInfo&) {
  return robust_.Add(params, payload, context);
}

Status RobustMeanAggregation::FillBroadcast(const PayloadSpans&, const CodecContext&) {
  return Status::FailedPrecondition("robust aggregation broadcasts the model");
}

Status RobustMeanAggregation::Apply(const PayloadView&, const CodecContext&,
                                    std::span<float> model) {
  EDGESGD_TRY_ASSIGN(const std::span<const float> aggregate, robust_.Aggregate());
  if (aggregate.size() != model.size()) {
    return Status::InvalidArgument("the model's size differs from the layout's dimension");
  }
  for (std::size_t i = 0; i < model.size(); ++i) model[i] -= aggregate[i];
  return Status::Ok();
}

Status RobustMeanAggregation::RestoreState(std::span<const std::byte> saved) {
  return robust_.RestoreCenter(saved);
}

}  // namespace edgesgd::protocol
