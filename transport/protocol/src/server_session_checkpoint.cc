// ServerSession's checkpoint: its committed state as bytes, in checkpoint.h's format.

#include "edgesgd/protocol/server_session.h"

#include <array>
#include <cstring>

namespace edgesgd::protocol {

std::size_t ServerSession::StateBytes() const {
  if (aggregation_ == nullptr) return 0;
  return CheckpointBytes(config_, options_.workers, aggregation_->SavedState().size());
}

Result<std::size_t> ServerSession::SaveState(std::span<std::byte> out) const {
  if (phase_ == ServerPhase::kUninitialized) return Status::FailedPrecondition("not initialized");
  CheckpointState state;
  state.round = round_;
  state.rounds = config_.rounds;
  state.sequence = outbox_.sequence();
  state.counters = {counters_.bytes_received, counters_.bytes_sent, counters_.frames_received,
                    counters_.frames_sent, counters_.rounds_completed};
  state.model = std::as_bytes(model_);
  state.aggregation = aggregation_->SavedState();
  state.server_optimizer = std::as_bytes(server_optimizer_.state());
  if (IsPrivate(config_.privacy)) {
    state.privacy_rdp = std::as_bytes(privacy_ledger_.rdp());
    state.privacy_rounds = privacy_ledger_.rounds();
  }
  return WriteCheckpoint(out, config_, options_.workers, state);
}

Status ServerSession::RestoreState(std::span<const std::byte> bytes,
                                   std::string_view* differing_field) {
  if (phase_ != ServerPhase::kJoining || started_) {
    return Status::FailedPrecondition(
        "a checkpoint can only be restored after Init and before Start");
  }
  CheckpointState state;
  EDGESGD_TRY(ReadCheckpoint(bytes, config_, options_.workers, aggregation_->SavedState().size(),
                             state, differing_field));
  // Everything was checked before the live state changes: a failed restore changes nothing.
  EDGESGD_TRY(server_optimizer_.CheckSavedState(state.server_optimizer));
  std::array<double, kRdpOrders.size()> rdp{};
  std::memcpy(rdp.data(), state.privacy_rdp.data(), state.privacy_rdp.size());
  PrivacyLedger ledger;
  if (IsPrivate(config_.privacy)) EDGESGD_TRY(ledger.Restore(rdp, state.privacy_rounds));
  EDGESGD_TRY(aggregation_->RestoreState(state.aggregation));
  EDGESGD_TRY(server_optimizer_.RestoreState(state.server_optimizer));
  std::memcpy(model_.data(), state.model.data(), state.model.size());
  privacy_ledger_ = ledger;
  round_ = state.round;
  outbox_.set_sequence(state.sequence);
  counters_.bytes_received = state.counters.bytes_received;
  counters_.bytes_sent = state.counters.bytes_sent;
  counters_.frames_received = state.counters.frames_received;
  counters_.frames_sent = state.counters.frames_sent;
  counters_.rounds_completed = state.counters.rounds_completed;
  if (round_ >= config_.rounds) Finish(wire::LeaveReason::kDone, Status::Ok());
  return Status::Ok();
}

}  // namespace edgesgd::protocol
