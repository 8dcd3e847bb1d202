#include "edgesgd/protocol/aggregation/scaffold.h"

#include <algorithm>
#include <cstring>

#include "edgesgd/core/internal/codec_checks.h"

namespace edgesgd::protocol {

Status ScaffoldAggregation::Init(Arena& arena, const AggregationSetup& setup) {
  const RunConfig& config = *setup.config;
  codecs_ = setup.codecs;
  layout_ = config.layout;
  workers_ = setup.workers;
  EDGESGD_TRY(mean_.Init(arena, *setup.codecs, config.layout, config.codec));
  const std::size_t d = config.layout.dimension();
  EDGESGD_TRY_ASSIGN(control_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(change_sum_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(change_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(scratch_, arena.AllocateBytes(CodecScratchBytes(config.codec, config.layout)));
  std::fill(control_.begin(), control_.end(), 0.0f);
  std::fill(change_sum_.begin(), change_sum_.end(), 0.0f);
  return Status::Ok();
}

void ScaffoldAggregation::BeginRound(std::uint32_t) {
  mean_.Reset();
  std::fill(change_sum_.begin(), change_sum_.end(), 0.0f);
}

Status ScaffoldAggregation::Add(const CodecParams&, const PayloadView&, const CodecContext&,
                                const wire::UpdateInfo&) {
  return Status::InvalidArgument("a SCAFFOLD update carries the change of its control variate");
}

Status ScaffoldAggregation::AddWithControl(const CodecParams& params, const PayloadView& payload,
                                           const CodecParams& control_params,
                                           const PayloadView& control, const CodecContext& context,
                                           const wire::UpdateInfo&) {
  // The change is decoded and checked first: a bad one leaves the mean untouched, and a bad
  // update (the mean adds nothing then) leaves the change unkept.
  std::fill(change_.begin(), change_.end(), 0.0f);
  EDGESGD_TRY(
      codecs_->DecodeAdd(control_params, layout_, context, control, 1.0f, change_, scratch_));
  if (!edgesgd::internal::AllFinite(change_)) {
    return Status::DataLoss("the control variate's change is not finite");
  }
  EDGESGD_TRY(mean_.AddWithParams(params, payload, context));
  for (std::size_t i = 0; i < change_.size(); ++i) change_sum_[i] += change_[i];
  return Status::Ok();
}

Status ScaffoldAggregation::FillBroadcast(const PayloadSpans&, const CodecContext&) {
  return Status::FailedPrecondition("SCAFFOLD broadcasts the model");
}

Status ScaffoldAggregation::Apply(const PayloadView&, const CodecContext&, std::span<float> model) {
  if (mean_.count() == 0) return Status::FailedPrecondition("the round has no updates");
  EDGESGD_TRY(mean_.AddScaledMean(-1.0f, model));
  // c stays the mean of all N devices' c_i: only this round's devices changed theirs.
  const float share = 1.0f / static_cast<float>(workers_);
  for (std::size_t i = 0; i < control_.size(); ++i) control_[i] += share * change_sum_[i];
  return Status::Ok();
}

Status ScaffoldAggregation::RestoreState(std::span<const std::byte> saved) {
  if (saved.size() != control_.size_bytes()) {
    return Status::InvalidArgument("the saved control variate differs in size from the model");
  }
  // Checked in change_ (idle between rounds) so that a bad state changes nothing.
  std::memcpy(change_.data(), saved.data(), saved.size());
  if (!edgesgd::internal::AllFinite(change_)) {
    return Status::InvalidArgument("the saved control variate is not finite");
  }
  std::copy(change_.begin(), change_.end(), control_.begin());
  return Status::Ok();
}

}  // namespace edgesgd::protocol
