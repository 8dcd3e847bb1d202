#include "edgesgd/protocol/round_policy/secure.h"

#include <algorithm>

#include "../session_util.h"

namespace edgesgd::protocol {

using internal::SaturatingAdd;

Status SecureRoundPolicy::Check(const RunConfig& config, const ServerOptions& options) const {
  if (options.noise_key.empty()) {
    return Status::InvalidArgument(
        "secure aggregation draws its neighbour graph from a secret ServerOptions::noise_key");
  }
  if (options.workers < 2) {
    return Status::InvalidArgument("secure aggregation needs at least two workers");
  }
  if (config.secure.signed_rounds && options.secure_verifier == nullptr) {
    return Status::InvalidArgument(
        "signed secure aggregation needs the devices' verifying keys "
        "(ServerOptions::secure_verifier)");
  }
  return CheckSecureCohort(config, options.workers);
}

Status SecureRoundPolicy::Init(Arena& arena, const CodecRegistry& codecs) {
  EDGESGD_TRY(
      secure_.Init(arena, codecs, config(), options().workers, options().secure_verifier));
  cohort_ = arena.Allocate<std::uint32_t>(options().workers).value();
  return Status::Ok();
}

void SecureRoundPolicy::StartRound(TimeNs now) {
  SelectSampledParticipants(now);
  deadline_ = SaturatingAdd(now, options().round_deadline_ns);
  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    if (SlotOf(peer).selected) cohort_[count++] = peer;
  }
  // The ring's order is the server's secret: no device can foresee its neighbours.
  SecretRng graph(options().noise_key, current_round(), 0,
                  StreamId(RandomPurpose::kSecureAggregationGraph));
  const std::uint64_t high = graph.NextU32();
  const std::uint64_t graph_seed = (high << 32) | graph.NextU32();
  // A round that cannot begin (fewer than two participants) stays closed; Advance aborts it at
  // its deadline.
  if (const Status begun = secure_.Begin(current_round(), cohort_.first(count), graph_seed);
      !begun.ok()) {
    abort_reason_ = begun;
  }
  resend_at_ = ResendTime(now);
}

std::optional<RejectReason> SecureRoundPolicy::RefuseUpdate(ServerWorkerSlot& slot,
                                                            std::uint32_t round) {
  if (const std::optional<RejectReason> refused = RefuseOutsideCurrentRound(slot, round)) {
    return refused;
  }
  // Updates travel masked, in the round's phases; a plain one would reveal its device's.
  return RejectReason::kUnexpectedMessage;
}

std::optional<RejectReason> SecureRoundPolicy::TakeSecureMessage(ServerWorkerSlot& slot,
                                                                 const wire::FrameView& view) {
  const std::uint32_t round = view.header.round;
  if (!secure_.open()) return RejectReason::kUnexpectedMessage;
  if (round != current_round()) {
    return round > current_round() ? RejectReason::kFuture : RejectReason::kLate;
  }
  if (!slot.selected) return RejectReason::kNotSelected;
  const wire::SecureView* message = internal::SecureMessageOf(view.secure);
  if (message == nullptr) return RejectReason::kUnexpectedMessage;
  const PeerId peer = PeerOf(slot);
  const std::optional<RejectReason> refused = secure_.Add(peer, *message);
  counters().secure_restarts_left = secure_.restarts_left();
  if (refused) return refused;
  // The keys answer the broadcast: a broadcast queued by a revival is no longer needed.
  outbox().Forgive(peer, ServerOutbox::kBroadcast);
  return std::nullopt;
}

void SecureRoundPolicy::Advance(TimeNs now) {
  // A round that could not be secured (too few participants) waits for its deadline.
  if (secure_.open()) {
    AdvancePhase(now);
  } else if (now >= deadline_) {
    Abort(now, abort_reason_);
  }
}

TimeNs SecureRoundPolicy::NextWakeup() const {
  return secure_.open() ? std::min(deadline_, resend_at_) : deadline_;
}

void SecureRoundPolicy::AdvancePhase(TimeNs now) {
  bool waiting = false;
  for (PeerId peer = 1; peer <= options().workers && !waiting; ++peer) {
    waiting = SlotOf(peer).live && secure_.Awaits(peer);
  }
  if (!waiting || now >= deadline_) {
    ClosePhase(now);
    return;
  }
  if (now < resend_at_) return;
  // Halfway through the phase: a lost frame either way would otherwise drop the device from
  // the round. A device that already answered answers the same message again.
  resend_at_ = kNever;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    ServerWorkerSlot& slot = SlotOf(peer);
    if (!slot.live || !secure_.Awaits(peer)) continue;
    if (secure_.phase() == SecureRound::kKeys) {
      Resend(slot, now);  // the keys answer the model broadcast
    } else {
      outbox().Owe(peer, ServerOutbox::kSecure);
    }
    ++counters().secure_messages_resent;
  }
}

TimeNs SecureRoundPolicy::ResendTime(TimeNs phase_start) const {
  return options().round_deadline_ns == kNever
             ? kNever
             : SaturatingAdd(phase_start, options().round_deadline_ns / 2);
}

void SecureRoundPolicy::ClosePhase(TimeNs now) {
  const Result<bool> closed = secure_.Close();
  if (!closed.ok()) {
    Abort(now, closed.status());
    return;
  }
  set_payload_bits(secure_.masked_bits());
  if (closed.value()) {
    const Result<std::uint32_t> summed = secure_.AddSum(aggregation(), model());
    if (!summed.ok()) {
      Abort(now, summed.status());
      return;
    }
    for (PeerId peer = 1; peer <= options().workers; ++peer) {
      ServerWorkerSlot& slot = SlotOf(peer);
      if (slot.selected && secure_.Survived(peer)) AcceptUpdate(slot, current_round());
    }
    set_reported(summed.value());
    CloseRound(now);
    return;
  }
  // The next phase: its own deadline, and its message to every device still in the round.
  deadline_ = SaturatingAdd(now, options().round_deadline_ns);
  resend_at_ = ResendTime(now);
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    outbox().Forgive(peer, ServerOutbox::kSecure);
    if (SlotOf(peer).live && secure_.Awaits(peer)) outbox().Owe(peer, ServerOutbox::kSecure);
  }
}

void SecureRoundPolicy::Abort(TimeNs now, Status why) {
  secure_.Abort();
  abort_reason_ = why;
  ++counters().secure_rounds_aborted;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    outbox().Forgive(peer, ServerOutbox::kSecure);
  }
  AbortRound(now, why);
}

}  // namespace edgesgd::protocol
