#include "edgesgd/core/optimizer.h"
#include "update_stage.h"

namespace edgesgd::protocol::internal {

Status SignumVote::Run(UpdateRound& round) const {
  const RunConfig& config = round.config;
  const WorkerOptions& options = round.options;
  const Status gradient =
      options.gradient(options.user, round.model, round.round, 0, round.gradient);
  if (!gradient.ok()) {
    ++round.counters.gradient_errors;
    return gradient;
  }
  if (const Status updated =
          SignumMomentumUpdate(config.optimizer.momentum, round.gradient, round.momentum);
      !updated.ok()) {
    ++round.counters.gradient_errors;
    return updated;
  }
  const Result<PayloadSpans> spans =
      round.builder.BeginPayloadFrame(round.header, round.message, config.codec, config.layout);
  if (!spans.ok()) {
    ++round.counters.encode_errors;
    return spans.status();
  }
  round.payload = spans.value();
  const CodecContext context{config.seed, round.round, round.id};
  if (const Status encoded =
          options.codecs->Encode(config.codec, config.layout, context, round.momentum,
                                 round.payload, std::span<std::byte>());
      !encoded.ok()) {
    ++round.counters.encode_errors;
    return encoded;
  }
  return Status::Ok();
}

}  // namespace edgesgd::protocol::internal
