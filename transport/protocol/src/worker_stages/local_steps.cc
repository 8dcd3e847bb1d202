#include "update_stage.h"

namespace edgesgd::protocol::internal {
namespace {

// The round's local steps (H, or the device's limit), each with the callback's gradient corrected by the chain.
Status TakeSteps(const UpdateRound& round) {
  const WorkerOptions& options = round.options;
  ErrorFeedbackWorker& feedback = round.feedback;
  for (std::uint32_t step = 0; step < round.local_steps; ++step) {
    const Status gradient =
        options.gradient(options.user, feedback.GradientPoint(), round.round, step, round.gradient);
    if (!gradient.ok()) {
      ++round.counters.gradient_errors;
      return gradient;
    }
    for (const UpdateStage* stage : round.stages) {
      if (const Status corrected = stage->CorrectGradient(round, round.gradient); !corrected.ok()) {
        ++round.counters.gradient_errors;
        return corrected;
      }
    }
    if (const Status stepped = feedback.LocalStep(round.gradient); !stepped.ok()) {
      ++round.counters.gradient_errors;
      return stepped;
    }
  }
  return Status::Ok();
}

}  // namespace

Status LocalSteps::Run(UpdateRound& round) const {
  ErrorFeedbackWorker& feedback = round.feedback;
  // A round abandoned earlier (callback error) is folded into the residual by BeginRound, so
  // error feedback still delivers its progress later.
  // The model stays as it is until the round is compressed (all of it happens in this call),
  // so the gradient point may be the model itself.
  if (const Status begun =
          feedback.BeginRound(round.model, ErrorFeedbackWorker::PointSource::kBorrow);
      !begun.ok()) {
    ++round.counters.encode_errors;
    return begun;
  }
  // A dense update without a residual is its delta: the local steps write it straight into the
  // frame, and nothing is copied. Any other update is encoded into the frame after the steps.
  const bool in_place = feedback.CanAccumulateInPayload();
  if (!in_place) {
    EDGESGD_TRY(TakeSteps(round));
    // The codec's choice for the round (a quantization schedule's level count, from the round's
    // gradient); buffers were sized for the widest choice.
    const Result<CodecParams> round_params = round.options.codecs->RoundParams(
        round.config.codec, round.round, round.config.rounds, round.gradient);
    const Status set =
        round_params.ok() ? feedback.SetRoundParams(round_params.value()) : round_params.status();
    if (!set.ok()) {
      ++round.counters.encode_errors;
      return set;
    }
  }
  const Result<PayloadSpans> spans = round.builder.BeginPayloadFrame(
      round.header, round.message, feedback.codec(), round.config.layout);
  if (!spans.ok()) {
    ++round.counters.encode_errors;
    return spans.status();
  }
  round.payload = spans.value();
  if (!in_place) return Status::Ok();
  if (const Status lent = feedback.AccumulateInPayload(round.payload.values); !lent.ok()) {
    ++round.counters.encode_errors;
    return lent;
  }
  return TakeSteps(round);
}

}  // namespace edgesgd::protocol::internal
