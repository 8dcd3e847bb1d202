#include <new>
#include <type_traits>

#include "update_stage.h"

namespace edgesgd::protocol::internal {
namespace {

// The change of c_i into the frame's control payload. Before Compress folds the delta into the
// residual; the gradient is idle after the steps and holds q. A change the server then never
// receives leaves c_i ahead of its c.
Status CompressChange(const UpdateRound& round) {
  const RunConfig& config = round.config;
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans,
                     round.builder.ReserveControlPayload(config.codec, config.layout));
  return round.scaffold
      ->CompressChange({config.seed, round.round, round.id}, round.feedback.round_delta(),
                       round.local_steps, config.feedback.learning_rate, round.gradient,
                       spans)
      .status();
}

}  // namespace

Result<ScaffoldDevice*> ControlVariates::Configure(Arena& arena, const CodecRegistry& codecs,
                                                   const RunConfig& config) {
  // In the arena: a member would cost every worker image its constructor.
  static_assert(alignof(ScaffoldDevice) <= kArenaAlignment &&
                std::is_trivially_destructible_v<ScaffoldDevice>);
  EDGESGD_TRY_ASSIGN(const std::span<std::byte> storage,
                     arena.AllocateBytes(sizeof(ScaffoldDevice)));
  auto* scaffold = ::new (static_cast<void*>(storage.data())) ScaffoldDevice();
  EDGESGD_TRY(scaffold->Init(arena, codecs, config.layout, config.codec));
  return scaffold;
}

Status ControlVariates::CorrectGradient(const UpdateRound& round, std::span<float> gradient) const {
  return round.scaffold->Correct(gradient);
}

Status ControlVariates::Run(UpdateRound& round) const {
  if (const Status changed = CompressChange(round); !changed.ok()) {
    ++round.counters.encode_errors;
    return changed;
  }
  return Status::Ok();
}

}  // namespace edgesgd::protocol::internal
