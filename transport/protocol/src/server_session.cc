#include "edgesgd/protocol/server_session.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "edgesgd/wire/frame_decoder.h"
#include "session_util.h"

namespace edgesgd::protocol {

using internal::AllFinite;
using internal::PayloadBits;
using internal::SaturatingAdd;

namespace {

double SquaredNorm(std::span<const float> values) {
  double sum = 0;
  for (const float v : values) sum += static_cast<double>(v) * static_cast<double>(v);
  return sum;
}

}  // namespace

Status ServerSession::Init(Arena& arena, const CodecRegistry& codecs, const RunConfig& config,
                           const ServerOptions& options, std::span<const float> initial_model) {
  if (phase_ != ServerPhase::kUninitialized) {
    return Status::FailedPrecondition("the server is already initialized");
  }
  if (const Status check = ValidateRunConfig(config); !check.ok()) return check;
  if (const Status check = ValidateServerChoices(config); !check.ok()) return check;
  if (const Status check = ValidateServerOptions(options); !check.ok()) return check;
  if (config.async.buffer > options.workers) {
    return Status::InvalidArgument(
        "the asynchronous buffer K is larger than the worker count: a version takes one update "
        "from each of K different workers");
  }
  if (config.privacy.mode == PrivacyMode::kCentral && options.noise_key == 0) {
    return Status::InvalidArgument("central noise needs a secret ServerOptions::noise_key");
  }
  if (config.secure.enabled) {
    if (options.noise_key == 0) {
      return Status::InvalidArgument(
          "secure aggregation draws its neighbour graph from a secret ServerOptions::noise_key");
    }
    if (options.workers < 2) {
      return Status::InvalidArgument("secure aggregation needs at least two workers");
    }
    EDGESGD_TRY(CheckSecureCohort(config, options.workers));
  }
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
  aggregation_kind_ = FindAggregation(config_);
  // The arena holds ArenaBytes: none of these fails.
  model_ = arena.Allocate<float>(config_.layout.dimension()).value();
  slots_ = arena.Allocate<WorkerSlot>(std::size_t{options_.workers} + 1).value();
  candidates_ = arena.Allocate<std::uint32_t>(options_.workers).value();
  if (ChangesFedAvg(config_.server_optimizer)) {
    EDGESGD_TRY(server_optimizer_.Init(arena, model_.size(), config_.server_optimizer));
    change_ = arena.Allocate<float>(model_.size()).value();
  }
  if (config_.secure.enabled) {
    EDGESGD_TRY(secure_.Init(arena, codecs, config_, options_.workers));
    cohort_ = arena.Allocate<std::uint32_t>(options_.workers).value();
  }
  EDGESGD_TRY(outbox_.Init(arena, config_, options_.workers,
                           aggregation_kind_->aggregate_is_payload,
                           config_.secure.enabled ? &secure_ : nullptr));
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
    next = deadline_;
    if (config_.secure.enabled && secure_.open()) next = std::min(next, secure_resend_at_);
    if (asynchronous() && options_.round_deadline_ns != kNever) {
      for (const WorkerSlot& slot : slots_) {
        if (slot.live && InFlight(slot)) {
          next = std::min(next, SaturatingAdd(slot.dispatched_at, options_.round_deadline_ns));
        }
      }
    }
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
  if (phase_ == ServerPhase::kTraining && InFlight(*slot)) Resend(*slot, now);
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
  // Synchronous rounds take updates of the current round only; asynchronous aggregation takes
  // them up to max_staleness versions old, and drops (and counts) older ones.
  const std::uint32_t max_age = asynchronous() ? config_.async.max_staleness : 0;
  if (round_ - round > max_age) {
    const bool late = !asynchronous() && round + 1 == round_;
    // An asynchronous worker that answered, too late, is free to train again.
    if (asynchronous() && slot->selected && slot->dispatched_round == round) slot->reported = true;
    Reject(from, late ? RejectReason::kLate : RejectReason::kStale, round, now);
    return;
  }
  if (!slot->selected || slot->dispatched_round != round) {
    Reject(from, RejectReason::kNotSelected, round, now);
    return;
  }
  if (config_.secure.enabled) {
    // Updates travel masked, in the round's phases; a plain one would reveal its device's.
    Reject(from, RejectReason::kUnexpectedMessage, round, now);
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
  slot->reported = true;
  slot->held_round = round;
  payload_bits_this_round_ += PayloadBits(view.payload.view);
  if (view.has_control) payload_bits_this_round_ += PayloadBits(view.control.view);
  // A broadcast queued by a revival is no longer needed: the worker has answered.
  outbox_.Forgive(from, ServerOutbox::kBroadcast);
  ++reported_;
  ++counters_.updates_accepted;
  ++slot->updates_accepted;
}

void ServerSession::HandleSecure(PeerId from, const wire::FrameView& view, TimeNs now) {
  const std::uint32_t round = view.header.round;
  WorkerSlot* slot = KnownSender(from, view.header.sender);
  if (slot == nullptr) {
    Reject(from, RejectReason::kUnknownSender, round, now);
    return;
  }
  MarkHeard(*slot, now);
  if (phase_ != ServerPhase::kTraining || !secure_.open()) {
    Reject(from, RejectReason::kUnexpectedMessage, round, now);
    return;
  }
  if (round != round_) {
    Reject(from, round > round_ ? RejectReason::kFuture : RejectReason::kLate, round, now);
    return;
  }
  if (!slot->selected) {
    Reject(from, RejectReason::kNotSelected, round, now);
    return;
  }
  const wire::SecureView* message = internal::SecureMessageOf(view.secure);
  if (message == nullptr) {
    Reject(from, RejectReason::kUnexpectedMessage, round, now);
    return;
  }
  if (const std::optional<RejectReason> refused = secure_.Add(from, *message)) {
    Reject(from, *refused, round, now);
    return;
  }
  // The keys answer the broadcast: a broadcast queued by a revival is no longer needed.
  outbox_.Forgive(from, ServerOutbox::kBroadcast);
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

void ServerSession::MarkHeard(WorkerSlot& slot, TimeNs now) {
  slot.last_heard = now;
  if (slot.live) return;
  // Heard from a worker the server had given up on (a liveness timeout that was too short, a
  // link that came back): it counts again. Its model is unknown, so if it is a participant
  // still owing an update it gets the full model (if it already has the round, it re-sends
  // its update, which is then accepted or a harmless duplicate).
  slot.live = true;
  ++counters_.revivals;
  if (phase_ == ServerPhase::kTraining && InFlight(slot)) Resend(slot, now);
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
  if (phase_ != ServerPhase::kTraining) return;
  if (asynchronous()) {
    AdvanceAsync(now);
    return;
  }
  if (config_.secure.enabled) {
    // A round that could not be secured (too few participants) waits for its deadline.
    if (secure_.open()) {
      AdvanceSecure(now);
    } else if (now >= deadline_) {
      AbortSecureRound(now, secure_abort_);
    }
    return;
  }

  // Participants that can still report: sampled, alive, not reported yet.
  const std::uint32_t waiting = LiveCount(true, true);
  if (reported_ >= 1 && waiting == 0) {
    CloseRound(now);
    return;
  }
  if (now >= deadline_) {
    std::uint32_t reachable = 0;
    for (const WorkerSlot& slot : slots_) {
      reachable += (slot.selected && (slot.live || slot.reported)) ? 1u : 0u;
    }
    const std::uint32_t quorum =
        std::max<std::uint32_t>(1, std::min<std::uint32_t>(options_.quorum, reachable));
    if (reported_ >= quorum) {
      CloseRound(now);
    } else {
      ExtendRound(now);
    }
    return;
  }
  // Nobody sampled can report (all of them vanished): sample everyone else who is alive
  // rather than wait for the deadline.
  if (reported_ == 0 && waiting == 0) TopUp(now);
}

void ServerSession::StartRound(TimeNs now) {
  // Asynchronous workers keep training across versions.
  if (!asynchronous()) {
    for (WorkerSlot& slot : slots_) {
      slot.selected = false;
      slot.reported = false;
      outbox_.Forgive(PeerOf(slot), ServerOutbox::kBroadcast);
    }
  }
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
  if (asynchronous()) {
    // A broadcast still owed goes out as the new version's frame.
    for (WorkerSlot& slot : slots_) {
      if (InFlight(slot) && outbox_.Owes(PeerOf(slot), ServerOutbox::kBroadcast)) {
        slot.dispatched_round = round_;
      }
    }
    dispatch_rng_ = CounterRng(config_.seed, round_, 1, StreamId(RandomPurpose::kParticipation));
    Dispatch(now);
    return;
  }

  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    if (slots_[peer].joined && slots_[peer].live) candidates_[count++] = peer;
  }
  const std::span<const std::uint32_t> participants = internal::SampleParticipants(
      candidates_.first(count), config_.participation, config_.seed, round_);
  for (const std::uint32_t peer : participants) Select(slots_[peer], now);
  deadline_ = SaturatingAdd(now, options_.round_deadline_ns);
  if (config_.secure.enabled) BeginSecureRound(now);
}

void ServerSession::BeginSecureRound(TimeNs now) {
  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    if (slots_[peer].selected) cohort_[count++] = peer;
  }
  // The ring's order is the server's secret: no device can foresee its neighbours.
  CounterRng graph(options_.noise_key, round_, 0, StreamId(RandomPurpose::kSecureAggregationGraph));
  const std::uint64_t high = graph.NextU32();
  const std::uint64_t graph_seed = (high << 32) | graph.NextU32();
  // A round that cannot begin (fewer than two participants) stays closed; Advance aborts it at
  // its deadline.
  if (const Status begun = secure_.Begin(round_, cohort_.first(count), graph_seed); !begun.ok()) {
    secure_abort_ = begun;
  }
  secure_resend_at_ = SecureResendTime(now);
}

void ServerSession::AdvanceSecure(TimeNs now) {
  bool waiting = false;
  for (PeerId peer = 1; peer <= options_.workers && !waiting; ++peer) {
    waiting = slots_[peer].live && secure_.Awaits(peer);
  }
  if (!waiting || now >= deadline_) {
    CloseSecurePhase(now);
    return;
  }
  if (now < secure_resend_at_) return;
  // Halfway through the phase: a lost frame either way would otherwise drop the device from
  // the round. A device that already answered answers the same message again.
  secure_resend_at_ = kNever;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    if (!slot.live || !secure_.Awaits(peer)) continue;
    if (secure_.phase() == SecureRound::kKeys) {
      Resend(slot, now);  // the keys answer the model broadcast
    } else {
      outbox_.Owe(peer, ServerOutbox::kSecure);
    }
    ++counters_.secure_messages_resent;
  }
}

TimeNs ServerSession::SecureResendTime(TimeNs phase_start) const {
  return options_.round_deadline_ns == kNever
             ? kNever
             : SaturatingAdd(phase_start, options_.round_deadline_ns / 2);
}

void ServerSession::CloseSecurePhase(TimeNs now) {
  const Result<bool> closed = secure_.Close();
  if (!closed.ok()) {
    AbortSecureRound(now, closed.status());
    return;
  }
  payload_bits_this_round_ = secure_.masked_bits();
  if (closed.value()) {
    const Result<std::uint32_t> summed = secure_.AddSum(*aggregation_, model_);
    if (!summed.ok()) {
      AbortSecureRound(now, summed.status());
      return;
    }
    for (PeerId peer = 1; peer <= options_.workers; ++peer) {
      WorkerSlot& slot = slots_[peer];
      if (!slot.selected || !secure_.Survived(peer)) continue;
      slot.reported = true;
      slot.held_round = round_;
      ++slot.updates_accepted;
      ++counters_.updates_accepted;
      outbox_.Forgive(peer, ServerOutbox::kBroadcast);
    }
    reported_ = summed.value();
    CloseRound(now);
    return;
  }
  // The next phase: its own deadline, and its message to every device still in the round.
  deadline_ = SaturatingAdd(now, options_.round_deadline_ns);
  secure_resend_at_ = SecureResendTime(now);
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    outbox_.Forgive(peer, ServerOutbox::kSecure);
    if (slots_[peer].live && secure_.Awaits(peer)) outbox_.Owe(peer, ServerOutbox::kSecure);
  }
}

void ServerSession::AbortSecureRound(TimeNs now, Status why) {
  secure_.Abort();
  secure_abort_ = why;
  ++counters_.secure_rounds_aborted;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    outbox_.Forgive(peer, ServerOutbox::kSecure);
  }
  reported_ = 0;
  CloseRound(now);
}

void ServerSession::AdvanceAsync(TimeNs now) {
  bool more_can_report = false;
  for (WorkerSlot& slot : slots_) {
    if (!slot.live || !InFlight(slot)) {
      more_can_report = more_can_report || Dispatchable(slot);
      continue;
    }
    if (options_.round_deadline_ns != kNever &&
        SaturatingAdd(slot.dispatched_at, options_.round_deadline_ns) <= now) {
      // No answer within the deadline (offline, or the frames were lost): another worker takes
      // its place; an update it still sends is refused as not selected.
      slot.selected = false;
      outbox_.Forgive(PeerOf(slot), ServerOutbox::kBroadcast);
      ++counters_.deadline_extensions;
      ++extensions_this_round_;
      more_can_report = more_can_report || Dispatchable(slot);
      continue;
    }
    more_can_report = true;
  }
  if (reported_ >= config_.async.buffer || (reported_ >= 1 && !more_can_report)) {
    CloseRound(now);  // and starts the next version, dispatching to idle workers
    return;
  }
  Dispatch(now);
}

void ServerSession::Dispatch(TimeNs now) {
  const std::uint32_t target = SampledCount(config_.participation, LiveCount(false, false));
  std::uint32_t training = 0;
  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    const WorkerSlot& slot = slots_[peer];
    if (slot.live && InFlight(slot)) ++training;
    if (Dispatchable(slot)) candidates_[count++] = peer;
  }
  // A partial Fisher-Yates shuffle draws the idle workers that start training.
  for (std::uint32_t i = 0; training < target && i < count; ++i, ++training) {
    std::swap(candidates_[i], candidates_[i + dispatch_rng_.NextBelow(count - i)]);
    Select(slots_[candidates_[i]], now);
  }
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

void ServerSession::ExtendRound(TimeNs now) {
  ++counters_.deadline_extensions;
  ++extensions_this_round_;
  bool resent = false;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    if (slot.selected && slot.live && !slot.reported) {
      outbox_.Owe(peer, ServerOutbox::kBroadcast);
      resent = true;
    }
  }
  if (!resent) TopUp(now);
  deadline_ = SaturatingAdd(now, options_.round_deadline_ns);
}

void ServerSession::TopUp(TimeNs now) {
  std::uint32_t added = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    if (slot.joined && slot.live && !slot.selected) {
      Select(slot, now);
      ++added;
    }
  }
  if (added > 0) ++counters_.top_ups;
}

void ServerSession::CloseRound(TimeNs now) {
  // An aborted secure round has nothing to apply: the model stays as it was.
  const bool aborted = config_.secure.enabled && reported_ == 0;
  const Status applied = aborted ? Status::Ok() : ApplyRound();
  const RoundEvent event{round_,
                         now,
                         selected_,
                         reported_,
                         rejected_this_round_,
                         extensions_this_round_,
                         counters_.bytes_received,
                         counters_.bytes_sent,
                         payload_bits_this_round_};
  round_log_.Push(event, counters_.round_events_dropped);
  last_reported_ = reported_;
  if (!applied.ok()) {
    Finish(wire::LeaveReason::kFailure, applied);
    return;
  }
  if (!aborted) ++counters_.rounds_completed;
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
  deadline_ = kNever;
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
  EDGESGD_TRY(aggregation_->RestoreState(state.aggregation));
  EDGESGD_TRY(server_optimizer_.RestoreState(state.server_optimizer));
  std::memcpy(model_.data(), state.model.data(), state.model.size());
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
