#include "edgesgd/protocol/server_session.h"

#include <algorithm>
#include <cmath>

#include "edgesgd/wire/frame_decoder.h"
#include "session_util.h"

namespace edgesgd::protocol {

using internal::AllFinite;
using internal::PayloadBits;
using internal::SaturatingAdd;
using internal::SquaredNorm;

Status ServerSession::Init(Arena& arena, const CodecRegistry& codecs, const RunConfig& config,
                           const ServerOptions& options, std::span<const float> initial_model) {
  if (phase_ != ServerPhase::kUninitialized) {
    return Status::FailedPrecondition("the server is already initialized");
  }
  if (const Status check = ValidateRunConfig(config); !check.ok()) return check;
  if (const Status check = ValidateServerChoices(config); !check.ok()) return check;
  if (const Status check = ValidateServerOptions(options); !check.ok()) return check;
  if (IsPrivate(config.privacy) && options.noise_key.empty()) {
    return Status::InvalidArgument(
        "a private run draws its cohorts (and central noise) from a secret "
        "ServerOptions::noise_key");
  }
  RoundPolicy& rounds = RoundPolicyFor(config);
  EDGESGD_TRY(rounds.Check(config, options));
  if (initial_model.size() != config.layout.dimension()) {
    return Status::InvalidArgument("the initial model's size is not the layout's dimension");
  }
  if (!AllFinite(initial_model)) return Status::InvalidArgument("the initial model is not finite");
  EDGESGD_TRY(codecs.For(config.codec).status());
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  const std::size_t needed = ArenaBytes(config, options);
  if (needed == 0) return Status::InvalidArgument("the configuration cannot be sized");
  if (arena.remaining_bytes() < needed) {
    return Status::ResourceExhausted("the arena is smaller than ServerSession::ArenaBytes");
  }
  config_ = config;
  options_ = options;
  codecs_ = &codecs;
  rounds_ = &rounds;
  aggregation_kind_ = FindAggregation(config_);
  // The arena holds ArenaBytes: none of these fails.
  model_ = arena.Allocate<float>(config_.layout.dimension()).value();
  slots_ = arena.Allocate<WorkerSlot>(std::size_t{options_.workers} + 1).value();
  candidates_ = arena.Allocate<std::uint32_t>(options_.workers).value();
  if (ChangesFedAvg(config_.server_optimizer)) {
    EDGESGD_TRY(server_optimizer_.Init(arena, model_.size(), config_.server_optimizer));
    change_ = arena.Allocate<float>(model_.size()).value();
  }
  EDGESGD_TRY(rounds_->Init(arena, codecs));
  EDGESGD_TRY(outbox_.Init(arena, config_, options_.workers,
                           aggregation_kind_->aggregate_is_payload, rounds_->secure_round()));
  EDGESGD_TRY_ASSIGN(
      aggregation_,
      aggregation_kind_->create(arena, {codecs_, &config_, options_.workers, options_.noise_key}));
  std::copy(initial_model.begin(), initial_model.end(), model_.begin());
  for (WorkerSlot& slot : slots_) {
    slot.held_round = kNoRound;
    slot.dispatched_round = kNoRound;
  }
  max_receive_bytes_ = ServerReceiveFrameBytes(config_, options_.workers);
  phase_ = ServerPhase::kJoining;
  return Status::Ok();
}

RoundPolicy& ServerSession::RoundPolicyFor(const RunConfig& config) {
  if (config.secure.enabled) return secure_rounds_;
  if (IsAsynchronous(config.async)) return buffered_async_rounds_;
  return synchronous_rounds_;
}

void ServerSession::DoStart(TimeNs now) {
  if (phase_ != ServerPhase::kJoining) return;
  started_ = true;
  join_deadline_ = SaturatingAdd(now, options_.join_timeout_ns);
  Advance(now);
}

void ServerSession::DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) {
  ++counters_.frames_received;
  counters_.bytes_received += frame.size();
  if (phase_ == ServerPhase::kUninitialized) return;

  const Result<wire::FrameView> decoded = wire::DecodeFrame(frame, max_receive_bytes_);
  if (!decoded.ok()) {
    Reject(from, RejectReason::kMalformed, round_, now);
    return;
  }
  const wire::FrameView& view = decoded.value();
  switch (view.kind) {
    case wire::MessageKind::kJoin:
      HandleJoin(from, view, now);
      break;
    case wire::MessageKind::kUpdate:
      HandleUpdate(from, view, now);
      break;
    case wire::MessageKind::kSecureAggregation:
      HandleSecure(from, view, now);
      break;
    default: {
      WorkerSlot* slot = KnownSender(from, view.header.sender);
      const bool control =
          view.kind == wire::MessageKind::kHeartbeat || view.kind == wire::MessageKind::kLeave;
      if (slot == nullptr) {
        if (control) Reject(from, RejectReason::kUnknownSender, view.header.round, now);
      } else if (view.kind == wire::MessageKind::kLeave) {
        if (view.leave.reason == wire::LeaveReason::kRefusedRun) ++counters_.refused_runs;
        MarkGone(*slot);  // leaving on its own (shutdown, failure, low power) until it rejoins
      } else {
        MarkHeard(*slot, now);
      }
      if (!control) Reject(from, RejectReason::kUnexpectedMessage, view.header.round, now);
      break;
    }
  }
  Advance(now);
}

void ServerSession::DoPeerLost(PeerId peer, TimeNs now) {
  if (WorkerSlot* slot = Slot(peer); slot != nullptr && slot->joined) MarkGone(*slot);
  Advance(now);
}

void ServerSession::DoTimer(TimeNs now) {
  if (phase_ != ServerPhase::kJoining && phase_ != ServerPhase::kTraining) return;
  if (options_.liveness_timeout_ns != kNever) {
    for (WorkerSlot& slot : slots_) {
      if (slot.joined && slot.live &&
          SaturatingAdd(slot.last_heard, options_.liveness_timeout_ns) <= now) {
        MarkGone(slot);
      }
    }
  }
  if (phase_ == ServerPhase::kJoining && now >= join_deadline_) join_deadline_passed_ = true;
  Advance(now);
}

bool ServerSession::DoPollFrame(OutgoingFrame& out) {
  if (phase_ == ServerPhase::kUninitialized || !outbox_.PollFrame(round_, out)) return false;
  ++counters_.frames_sent;
  counters_.bytes_sent += out.bytes.size();
  return true;
}

TimeNs ServerSession::DoNextWakeup() const {
  TimeNs next = kNever;
  if (phase_ == ServerPhase::kJoining) {
    if (!join_deadline_passed_) next = join_deadline_;
  } else if (phase_ == ServerPhase::kTraining) {
    next = rounds_->NextWakeup();
  } else {
    return kNever;
  }
  if (options_.liveness_timeout_ns != kNever) {
    for (const WorkerSlot& slot : slots_) {
      if (slot.joined && slot.live) {
        next = std::min(next, SaturatingAdd(slot.last_heard, options_.liveness_timeout_ns));
      }
    }
  }
  return next;
}

bool ServerSession::PollRejectEvent(RejectEvent& out) { return reject_log_.Pop(out); }

bool ServerSession::PollRoundEvent(RoundEvent& out) { return round_log_.Pop(out); }

std::uint32_t ServerSession::joined_workers() const {
  std::uint32_t count = 0;
  for (const WorkerSlot& slot : slots_) count += slot.joined ? 1u : 0u;
  return count;
}

std::uint32_t ServerSession::live_workers() const { return LiveCount(false, false); }

// ---- Frames from workers ----

ServerSession::WorkerSlot* ServerSession::Slot(PeerId peer) const {
  if (peer == kServerPeer || peer > options_.workers || slots_.empty()) return nullptr;
  return &slots_[peer];
}

ServerSession::WorkerSlot* ServerSession::KnownSender(PeerId from, std::uint32_t sender) {
  WorkerSlot* slot = Slot(from);
  if (slot == nullptr || !slot->joined || sender != from) return nullptr;
  return slot;
}

void ServerSession::HandleJoin(PeerId from, const wire::FrameView& view, TimeNs now) {
  WorkerSlot* slot = Slot(from);
  if (slot == nullptr ||
      (view.header.sender != from && view.header.sender != wire::kUnassignedDevice)) {
    Reject(from, RejectReason::kUnknownSender, view.header.round, now);
    return;
  }
  if (phase_ == ServerPhase::kDone) {
    // The run is over: tell a latecomer (or a worker that missed its Leave) so.
    if (outbox_.has_leave()) outbox_.Owe(from, ServerOutbox::kLeave);
    return;
  }
  if (const Status refused = CheckWorkerCanRun(config_, view.join, options_.workers);
      !refused.ok()) {
    Reject(from, RejectReason::kIncompatible, view.header.round, now);
    outbox_.OweRefusal(from, refused.code(), refused.reason());
    return;
  }
  if (slot->joined) {
    ++counters_.rejoins;
  } else {
    slot->joined = true;
    ++counters_.joins;
  }
  slot->live = true;
  slot->last_heard = now;
  // A (re)joining worker may hold any model or none: it gets the full model next.
  slot->held_round = kNoRound;
  outbox_.Owe(from, ServerOutbox::kWelcome);
  if (phase_ == ServerPhase::kTraining && slot->in_flight()) Resend(*slot, now);
}

void ServerSession::HandleUpdate(PeerId from, const wire::FrameView& view, TimeNs now) {
  const std::uint32_t round = view.header.round;
  WorkerSlot* slot = KnownSender(from, view.header.sender);
  if (slot == nullptr || view.message.update.worker != from) {
    Reject(from, RejectReason::kUnknownSender, round, now);
    return;
  }
  MarkHeard(*slot, now);
  if (phase_ == ServerPhase::kJoining) {
    Reject(from, RejectReason::kUnexpectedMessage, round, now);
    return;
  }
  if (round > round_ || (phase_ == ServerPhase::kDone && round == round_)) {
    Reject(from, RejectReason::kFuture, round, now);
    return;
  }
  if (const std::optional<RejectReason> refused = rounds_->RefuseUpdate(*slot, round)) {
    Reject(from, *refused, round, now);
    return;
  }
  if (slot->reported) {
    Reject(from, RejectReason::kDuplicate, round, now);
    return;
  }
  const wire::EncodedPayload& payload = view.payload;
  const Result<CodecParams> params =
      ParamsForPayload(config_.codec, payload.codec, payload.layout, payload.header);
  if (!params.ok()) {
    Reject(from, RejectReason::kWrongCodec, round, now);
    return;
  }
  const CodecContext context{config_.seed, round, from};
  if (!codecs_->CheckShared(params.value(), config_.layout, context, payload.view).ok() ||
      !AddUpdate(view, params.value(), context).ok()) {
    Reject(from, RejectReason::kBadPayload, round, now);
    return;
  }
  AcceptUpdate(*slot, round);
  payload_bits_this_round_ += PayloadBits(view.payload.view);
  if (view.has_control) payload_bits_this_round_ += PayloadBits(view.control.view);
  ++reported_;
}

void ServerSession::HandleSecure(PeerId from, const wire::FrameView& view, TimeNs now) {
  const std::uint32_t round = view.header.round;
  WorkerSlot* slot = KnownSender(from, view.header.sender);
  if (slot == nullptr) {
    Reject(from, RejectReason::kUnknownSender, round, now);
    return;
  }
  MarkHeard(*slot, now);
  const std::optional<RejectReason> refused = phase_ == ServerPhase::kTraining
                                                  ? rounds_->TakeSecureMessage(*slot, view)
                                                  : RejectReason::kUnexpectedMessage;
  if (refused) Reject(from, *refused, round, now);
}

Status ServerSession::AddUpdate(const wire::FrameView& view, const CodecParams& params,
                                const CodecContext& context) {
  // The component decides whether it takes control variates: each refuses the other kind.
  if (!view.has_control) {
    return aggregation_->Add(params, view.payload.view, context, view.message.update);
  }
  const wire::EncodedPayload& control = view.control;
  EDGESGD_TRY_ASSIGN(
      const CodecParams control_params,
      ParamsForPayload(config_.codec, control.codec, control.layout, control.header));
  EDGESGD_TRY(codecs_->CheckShared(control_params, config_.layout, context, control.view));
  return aggregation_->AddWithControl(params, view.payload.view, control_params, control.view,
                                      context, view.message.update);
}

void ServerSession::AcceptUpdate(WorkerSlot& slot, std::uint32_t round) {
  slot.reported = true;
  slot.held_round = round;
  ++slot.updates_accepted;
  ++counters_.updates_accepted;
  // A broadcast queued by a revival is no longer needed: the worker has answered.
  outbox_.Forgive(PeerOf(slot), ServerOutbox::kBroadcast);
}

void ServerSession::MarkHeard(WorkerSlot& slot, TimeNs now) {
  slot.last_heard = now;
  if (slot.live) return;
  // Heard from a worker the server had given up on (a liveness timeout that was too short, a
  // link that came back): it counts again. Its model is unknown, so if it is a participant
  // still owing an update it gets the full model (if it already has the round, it re-sends
  // its update, which is then accepted or a harmless duplicate).
  slot.live = true;
  ++counters_.revivals;
  if (phase_ == ServerPhase::kTraining && slot.in_flight()) Resend(slot, now);
}

void ServerSession::Resend(WorkerSlot& slot, TimeNs now) {
  // A synchronous participant was sent this round already; an asynchronous one may hold an
  // older version, and now trains from the current one.
  slot.dispatched_round = round_;
  slot.dispatched_at = now;
  outbox_.OweBroadcast(PeerOf(slot), false);
}

void ServerSession::MarkGone(WorkerSlot& slot) {
  if (slot.live) {
    slot.live = false;
    ++counters_.workers_lost;
  }
  slot.held_round = kNoRound;
  outbox_.Forgive(PeerOf(slot),
                  ServerOutbox::kWelcome | ServerOutbox::kRefusal | ServerOutbox::kBroadcast);
}

void ServerSession::Reject(PeerId peer, RejectReason reason, std::uint32_t round, TimeNs now) {
  ++counters_.rejected[static_cast<std::size_t>(reason)];
  ++rejected_this_round_;
  const RejectEvent event{peer, reason, round, now};
  reject_log_.Push(event, counters_.reject_events_dropped);
}

void ServerSession::Advance(TimeNs now) {
  if (phase_ == ServerPhase::kJoining) {
    const std::uint32_t live = LiveCount(false, false);
    const bool timed_out = join_deadline_passed_ || now >= join_deadline_;
    const std::uint32_t enough = std::max<std::uint32_t>(1, options_.quorum);
    if (live >= options_.workers || (timed_out && live >= enough)) {
      phase_ = ServerPhase::kTraining;
      StartRound(now);  // round 0, or the round RestoreState resumed at
    }
    return;
  }
  if (phase_ == ServerPhase::kTraining) rounds_->Advance(now);
}

void ServerSession::StartRound(TimeNs now) {
  selected_ = 0;
  reported_ = 0;
  payload_bits_this_round_ = 0;
  rejected_this_round_ = 0;
  extensions_this_round_ = 0;
  aggregation_->BeginRound(round_);
  if (const Status built = outbox_.BuildModel(
          round_, last_reported_, model_, aggregation_->ClipBound(), aggregation_->ServerControl());
      !built.ok()) {
    Finish(wire::LeaveReason::kFailure,
           Status::Internal("the model broadcast frame could not be built"));
    return;
  }
  rounds_->StartRound(now);
}

void ServerSession::Select(WorkerSlot& slot, TimeNs now) {
  slot.selected = true;
  slot.reported = false;
  slot.dispatched_round = round_;
  slot.dispatched_at = now;
  ++selected_;
  // The aggregate of the previous round is only useful to a worker known to hold that round's
  // start model: one whose update for it was accepted.
  const bool holds_previous = round_ > 0 && slot.held_round == round_ - 1;
  outbox_.OweBroadcast(PeerOf(slot), config_.downlink == DownlinkKind::kAggregate &&
                                         aggregate_valid_ && holds_previous);
}

void ServerSession::CloseRound(TimeNs now, bool apply) {
  const Status applied = apply ? ApplyRound() : Status::Ok();
  if (applied.ok() && apply) ChargePrivacy();
  const RoundEvent event{
      round_,
      now,
      selected_,
      reported_,
      rejected_this_round_,
      extensions_this_round_,
      counters_.bytes_received,
      counters_.bytes_sent,
      payload_bits_this_round_,
      IsPrivate(config_.privacy)
          ? privacy_ledger_.Epsilon(static_cast<double>(config_.privacy.delta)).value().epsilon
          : 0.0,
      abort_reason_this_round_};
  abort_reason_this_round_ = Status::Ok();
  round_log_.Push(event, counters_.round_events_dropped);
  last_reported_ = reported_;
  if (!applied.ok()) {
    Finish(wire::LeaveReason::kFailure, applied);
    return;
  }
  if (apply) ++counters_.rounds_completed;
  ++round_;
  if (round_ >= config_.rounds) {
    Finish(wire::LeaveReason::kDone, Status::Ok());
    return;
  }
  StartRound(now);
}

Status ServerSession::ApplyRound() {
  if (aggregation_kind_->aggregate_is_payload) {
    EDGESGD_TRY(BroadcastAndApplyAggregate());
  } else if (change_.empty()) {
    EDGESGD_TRY(aggregation_->Apply({}, CodecContext{config_.seed, round_, 0}, model_));
  } else {
    // The component applies the round to a zero model: what it leaves there is the change the
    // server optimizer moves the real model by.
    std::fill(change_.begin(), change_.end(), 0.0f);
    EDGESGD_TRY(aggregation_->Apply({}, CodecContext{config_.seed, round_, 0}, change_));
    EDGESGD_TRY(server_optimizer_.Step(model_, change_));
  }
  // A diverged run would broadcast NaN, or ever larger values, forever; stop it instead, loudly.
  if (!AllFinite(model_)) {
    return Status::DataLoss("the model diverged: it holds a NaN or an infinity");
  }
  const auto bound = static_cast<double>(options_.max_model_norm);
  if (bound > 0 && SquaredNorm(model_) > bound * bound) {
    return Status::DataLoss("the model diverged: its norm exceeds ServerOptions::max_model_norm");
  }
  return Status::Ok();
}

Status ServerSession::BroadcastAndApplyAggregate() {
  EDGESGD_TRY_ASSIGN(
      const PayloadSpans spans,
      outbox_.BeginAggregate(round_ + 1, reported_, aggregation_->NextClipBound(round_)));
  const CodecContext context{config_.seed, round_, 0};
  if (const Status filled = aggregation_->FillBroadcast(spans, context); !filled.ok()) {
    outbox_.AbandonAggregate();
    return filled;
  }
  EDGESGD_TRY_ASSIGN(const std::span<const std::byte> frame, outbox_.FinishAggregate());
  const Result<wire::FrameView> view = wire::DecodeFrame(frame);
  if (!view.ok()) return Status::Internal("the aggregate frame does not decode");
  // The server applies the frame's own bytes, exactly as every worker will: their models stay
  // bit-identical to this one.
  EDGESGD_TRY(aggregation_->Apply(view.value().payload.view, context, model_));
  aggregate_valid_ = true;
  return Status::Ok();
}

void ServerSession::Finish(wire::LeaveReason reason, Status status) {
  status_ = status;
  const bool leave = outbox_.BuildLeave(round_, reason);
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    outbox_.Forgive(peer, ServerOutbox::kBroadcast);
    if (slots_[peer].joined && leave) outbox_.Owe(peer, ServerOutbox::kLeave);
  }
  phase_ = ServerPhase::kDone;
}

std::uint32_t ServerSession::LiveCount(bool selected_only, bool non_reporters_only) const {
  std::uint32_t count = 0;
  for (const WorkerSlot& slot : slots_) {
    if (!slot.joined || !slot.live) continue;
    if (selected_only && !slot.selected) continue;
    if (non_reporters_only && slot.reported) continue;
    ++count;
  }
  return count;
}

}  // namespace edgesgd::protocol
