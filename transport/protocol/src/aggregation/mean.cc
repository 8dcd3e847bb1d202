#include "edgesgd/protocol/aggregation/mean.h"

namespace edgesgd::protocol {

Status MeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  async_ = setup.config->async;
  privacy_.Init(*setup.config, setup.workers, setup.noise_key);
  return mean_.Init(arena, *setup.codecs, setup.config->layout, setup.config->codec);
}

void MeanAggregation::BeginRound(std::uint32_t round) {
  version_ = round;
  mean_.Reset();
  privacy_.BeginRound();
}

Status MeanAggregation::Add(const CodecParams& params, const PayloadView& payload,
                            const CodecContext& context, const wire::UpdateInfo& update) {
  // The session admits no update from a later version; a synchronous round's are all tau = 0.
  const std::uint32_t tau = version_ - context.round;
  EDGESGD_TRY(privacy_.CheckBound(payload));
  EDGESGD_TRY(mean_.AddWithParams(params, payload, context, StalenessWeight(async_, tau)));
  privacy_.Count(update);
  return Status::Ok();
}

Status MeanAggregation::AddSum(const CodecParams& params, const PayloadView& payload,
                               const CodecContext& context, std::uint32_t contributions) {
  // Secure rounds are synchronous (no staleness) and keep the clipping bound fixed, so the
  // updates need nothing but their sum.
  return mean_.AddSumWithParams(params, payload, context, contributions);
}

Status MeanAggregation::FillBroadcast(const PayloadSpans&, const CodecContext&) {
  return Status::FailedPrecondition("mean aggregation broadcasts the model");
}

Status MeanAggregation::Apply(const PayloadView&, const CodecContext& context,
                              std::span<float> model) {
  if (mean_.count() == 0) return Status::FailedPrecondition("the round has no updates");
  // FedBuff divides the weighted sum by the update count K, not by the weights' total (which
  // equals K, and the scale -1 exactly, when every weight is 1).
  const float scale = -mean_.total_weight() / static_cast<float>(mean_.count());
  EDGESGD_TRY(mean_.AddScaledMean(scale, model));
  privacy_.AddNoiseToMean(model, mean_.count(), context.round);
  privacy_.FinishRound(context.round);
  return Status::Ok();
}

}  // namespace edgesgd::protocol
