#include "edgesgd/protocol/aggregation/recompressed_mean.h"

namespace edgesgd::protocol {

Status RecompressedMeanAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  codecs_ = setup.codecs;
  config_ = setup.config;
  const TensorLayout& layout = config_->layout;
  EDGESGD_TRY(mean_.Init(arena, *codecs_, layout, config_->codec));
  EDGESGD_TRY(feedback_.Init(arena, *codecs_, layout, config_->codec));
  EDGESGD_TRY_ASSIGN(decode_scratch_,
                     arena.AllocateBytes(CodecScratchBytes(config_->codec, layout)));
  return Status::Ok();
}

void RecompressedMeanAggregation::BeginRound(std::uint32_t) { mean_.Reset(); }

Status RecompressedMeanAggregation::Add(const CodecParams& params, const PayloadView& payload,
                                        const CodecContext& context, const wire::UpdateInfo&) {
  return mean_.AddWithParams(params, payload, context);
}

Status RecompressedMeanAggregation::FillBroadcast(const PayloadSpans& out,
                                                  const CodecContext& context) {
  // The dense mean joins the server's residual, whose compression is the broadcast.
  EDGESGD_TRY_ASSIGN(const std::span<const float> mean, mean_.Mean());
  return feedback_.Compress(mean, context, out).status();
}

Status RecompressedMeanAggregation::Apply(const PayloadView& broadcast, const CodecContext& context,
                                          std::span<float> model) {
  return codecs_->DecodeAdd(config_->codec, config_->layout, context, broadcast, -1.0f, model,
                            decode_scratch_);
}

Status RecompressedMeanAggregation::RestoreState(std::span<const std::byte> saved) {
  if (!feedback_.RestoreResidual(saved).ok()) {
    return Status::InvalidArgument("the checkpoint's downlink residual is not finite");
  }
  return Status::Ok();
}

}  // namespace edgesgd::protocol
