// The worker's model: a broadcast applied to it (a model copied, an aggregate decoded into the
// previous round's model), and what a full-model broadcast reveals of the last update's
// aggregate. worker_session.cc's HandleBroadcast hands over here.

#include <algorithm>

#include "edgesgd/core/optimizer.h"
#include "edgesgd/protocol/worker_session.h"
#include "session_util.h"

namespace edgesgd::protocol {

using internal::AllFinite;

Result<std::span<const float>> WorkerSession::ApplyBroadcast(const wire::FrameView& view) {
  const PayloadView& payload = view.payload.view;
  const TensorLayout& layout = config_.layout;
  if (view.message.broadcast.content == wire::BroadcastContent::kModel) {
    if (view.payload.codec != CodecIdOf(ModelCodec()) ||
        view.payload.layout != PayloadLayout::kDense ||
        payload.values.size() != layout.dimension() || !AllFinite(payload.values)) {
      return Status::DataLoss("a model broadcast must be the dense model");
    }
    if (Scaffold()) {
      // The round's control variate comes with its model, or the broadcast is refused whole.
      if (!view.has_control) return Status::DataLoss("a SCAFFOLD model broadcast lacks c");
      EDGESGD_TRY(scaffold_->SetServerControl(view.control.view.values));
    }
    // Without a copy the round reads the model in the frame (KeepsModelCopy), and there is no
    // selector to learn the aggregate.
    if (model_.empty()) return payload.values;
    if (config_.aggregation == AggregationKind::kMean) LearnAggregate(view);
    // A copy, not a decode-add into zeros: 0 + (-0) would turn -0 into +0 and the worker's
    // model would no longer be the server's bit for bit.
    std::copy(payload.values.begin(), payload.values.end(), model_.begin());
    return std::span<const float>(model_);
  }
  if (config_.downlink != DownlinkKind::kAggregate) {
    return Status::DataLoss("an aggregate broadcast in a run with the model downlink");
  }
  const Result<CodecParams> params =
      ParamsForPayload(config_.codec, view.payload.codec, view.payload.layout, view.payload.header);
  if (!params.ok()) return params.status();
  const std::uint32_t round = view.header.round;
  if (model_round_ == kNoRound || model_round_ + 1 != round) {
    return Status::FailedPrecondition("the aggregate's round does not follow the worker's model");
  }
  Status status;
  if (config_.aggregation == AggregationKind::kMajority) {
    status = ApplySignVote(payload.words, layout, config_.optimizer.learning_rate,
                           config_.optimizer.weight_decay, model_);
  } else {
    const CodecContext context{config_.seed, round - 1, 0};
    status = options_.codecs->DecodeAdd(params.value(), layout, context, payload, -1.0f, model_,
                                        scratch_);
  }
  // Every failure here is the payload's (both functions leave the model untouched on error).
  if (!status.ok()) return Status::DataLoss("the aggregate broadcast's payload does not decode");
  return std::span<const float>(model_);
}

void WorkerSession::LearnAggregate(const wire::FrameView& view) {
  // The model of round r is x_r = x_{r-1} - ghat_{r-1} (mean aggregation, lr and weight decay
  // applied on the workers), so a worker still holding x_{r-1}, whose update of round r-1 was
  // computed from it, reads ghat off the model change; the broadcast says how many updates the
  // server aggregated. A worker that sat the round out, or holds another model, cannot know
  // the aggregate of its last update. (A worker whose update arrived too late to count cannot
  // tell either: its selector then takes the others' sum for the full one, for one round.)
  const std::uint32_t round = view.header.round;
  const bool holds_previous =
      update_round_ != kNoRound && update_round_ + 1 == round && model_round_ == update_round_;
  if (!holds_previous) {
    feedback_.ForgetAggregate();
    return;
  }
  if (!feedback_
           .ObserveModelChange(model_, view.payload.view.values,
                               view.message.broadcast.participants)
           .ok()) {
    feedback_.ForgetAggregate();
  }
}

}  // namespace edgesgd::protocol
