#include "update_stage.h"

namespace edgesgd::protocol::internal {

Status Compression::Run(UpdateRound& round) const {
  // The codec writes the payload straight into the frame.
  const CodecContext context{round.config.seed, round.round, round.id};
  const Result<PayloadShape> shape = round.feedback.Compress(context, round.payload);
  if (!shape.ok()) {
    ++round.counters.encode_errors;
    return shape.status();
  }
  round.shape = shape.value();
  return Status::Ok();
}

}  // namespace edgesgd::protocol::internal
