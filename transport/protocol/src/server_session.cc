#include "edgesgd/protocol/server_session.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "edgesgd/core/random.h"
#include "edgesgd/wire/frame_decoder.h"
#include "session_util.h"

namespace edgesgd::protocol {
namespace {

using internal::AllFinite;
using internal::PayloadBits;
using internal::SaturatingAdd;

// Why a Join is refused; sent back in an Error frame (WorkerSlot::error_reason indexes this).
struct JoinRefusal {
  StatusCode code;
  const char* text;
};
constexpr std::array<JoinRefusal, 3> kJoinRefusals = {{
    {StatusCode::kFailedPrecondition, "worker does not implement this run's codec"},
    {StatusCode::kResourceExhausted, "worker memory is too small for this run"},
    {StatusCode::kResourceExhausted, "worker cannot receive this run's largest frame"},
}};

}  // namespace

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kMalformed:
      return "malformed";
    case RejectReason::kUnknownSender:
      return "unknown_sender";
    case RejectReason::kLate:
      return "late";
    case RejectReason::kStale:
      return "stale";
    case RejectReason::kFuture:
      return "future";
    case RejectReason::kDuplicate:
      return "duplicate";
    case RejectReason::kNotSelected:
      return "not_selected";
    case RejectReason::kWrongCodec:
      return "wrong_codec";
    case RejectReason::kBadPayload:
      return "bad_payload";
    case RejectReason::kUnexpectedMessage:
      return "unexpected_message";
    case RejectReason::kIncompatible:
      return "incompatible";
  }
  return "unknown";
}

Status ValidateServerOptions(const ServerOptions& options) {
  if (options.workers < 1 || options.workers > kMaxWorkers) {
    return Status::InvalidArgument("workers must be in 1..256");
  }
  if (options.quorum < 1 || options.quorum > options.workers) {
    return Status::InvalidArgument("quorum must be in 1..workers");
  }
  if (options.round_deadline_ns == 0) return Status::InvalidArgument("round deadline must be > 0");
  if (options.liveness_timeout_ns == 0) {
    return Status::InvalidArgument("liveness timeout must be > 0");
  }
  if (options.join_timeout_ns == 0) return Status::InvalidArgument("join timeout must be > 0");
  return Status::Ok();
}

// ---- Init ----

Status ServerSession::Init(Arena& arena, const CodecRegistry& codecs, const RunConfig& config,
                           const ServerOptions& options, std::span<const float> initial_model) {
  if (phase_ != ServerPhase::kUninitialized) {
    return Status::FailedPrecondition("the server is already initialized");
  }
  if (const Status check = ValidateRunConfig(config); !check.ok()) return check;
  if (const Status check = ValidateServerOptions(options); !check.ok()) return check;
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
  if (!TakeBuffers(arena).ok()) {
    return Status::Internal("arena accounting disagrees with ArenaBytes");
  }
  std::copy(initial_model.begin(), initial_model.end(), model_.begin());
  for (WorkerSlot& slot : slots_) slot.held_round = kNoRound;
  max_receive_bytes_ = UpdateFrameBytes(config_);
  phase_ = ServerPhase::kJoining;
  return Status::Ok();
}

Status ServerSession::TakeBuffers(Arena& arena) {
  const TensorLayout& layout = config_.layout;
  const std::size_t d = layout.dimension();
  EDGESGD_TRY_ASSIGN(model_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(slots_, arena.Allocate<WorkerSlot>(std::size_t{options_.workers} + 1));
  EDGESGD_TRY_ASSIGN(candidates_, arena.Allocate<std::uint32_t>(options_.workers));
  EDGESGD_TRY_ASSIGN(std::span<std::byte> model_buffer,
                     arena.AllocateBytes(wire::FrameBuilderBytes(ModelCodec(), layout)));
  model_builder_.emplace(model_buffer);
  for (std::optional<wire::FrameBuilder>& builder : control_builders_) {
    EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer, arena.AllocateBytes(kControlBuilderBytes));
    builder.emplace(buffer);
  }
  EDGESGD_TRY_ASSIGN(std::span<std::byte> leave_buffer, arena.AllocateBytes(kControlBuilderBytes));
  leave_builder_.emplace(leave_buffer);

  if (aggregation_kind_->aggregate_is_payload) {
    EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer,
                       arena.AllocateBytes(wire::FrameBuilderBytes(config_.codec, layout)));
    aggregate_builder_.emplace(buffer);
  }
  const AggregationSetup setup{codecs_, &config_, options_.workers};
  EDGESGD_TRY_ASSIGN(aggregation_, aggregation_kind_->create(arena, setup));
  return Status::Ok();
}

// ---- Session ----

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
    case wire::MessageKind::kHeartbeat:
      if (WorkerSlot* slot = KnownSender(from, view.header.sender); slot != nullptr) {
        MarkHeard(*slot, now);
      } else {
        Reject(from, RejectReason::kUnknownSender, view.header.round, now);
      }
      break;
    case wire::MessageKind::kLeave:
      // A worker leaving on its own (shutdown, failure, low power) is gone until it joins again.
      if (WorkerSlot* slot = KnownSender(from, view.header.sender); slot != nullptr) {
        MarkGone(*slot);
      } else {
        Reject(from, RejectReason::kUnknownSender, view.header.round, now);
      }
      break;
    default:
      if (WorkerSlot* slot = KnownSender(from, view.header.sender); slot != nullptr) {
        MarkHeard(*slot, now);
      }
      Reject(from, RejectReason::kUnexpectedMessage, view.header.round, now);
      break;
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
  const std::uint32_t n = options_.workers;
  std::uint32_t visited = 0;
  while (pending_workers_ > 0 && visited < n) {
    const PeerId peer = (poll_cursor_ - 1 + visited) % n + 1;
    WorkerSlot& slot = slots_[peer];
    if (slot.pending == 0) {
      ++visited;
      continue;
    }
    // Per worker, frames go out in protocol order: Welcome (or Error), broadcast, Leave.
    std::span<const std::byte> bytes;
    if ((slot.pending & kPendingWelcome) != 0) {
      const Result<std::span<const std::byte>> frame = BuildControlFrame(peer, kPendingWelcome);
      ClearPending(slot, kPendingWelcome);
      if (frame.ok()) bytes = frame.value();
    } else if ((slot.pending & kPendingError) != 0) {
      const Result<std::span<const std::byte>> frame = BuildControlFrame(peer, kPendingError);
      ClearPending(slot, kPendingError);
      if (frame.ok()) bytes = frame.value();
    } else if ((slot.pending & kPendingBroadcast) != 0) {
      bytes = slot.broadcast == kBroadcastAggregate ? aggregate_frame_ : model_frame_;
      ClearPending(slot, kPendingBroadcast);
    } else if ((slot.pending & kPendingLeave) != 0) {
      bytes = leave_frame_;
      ClearPending(slot, kPendingLeave);
    } else {
      ClearPending(slot, slot.pending);
    }
    if (bytes.empty()) continue;  // nothing could be built; look at this worker's next frame
    poll_cursor_ = peer;
    out.to = peer;
    out.bytes = bytes;
    out.work_samples = 0;
    ++counters_.frames_sent;
    counters_.bytes_sent += bytes.size();
    return true;
  }
  // Drained: the next batch goes out in peer order again (deterministic runs, and updates then
  // tend to arrive in peer order, which fixes the order of the float sums).
  poll_cursor_ = 1;
  return false;
}

TimeNs ServerSession::DoNextWakeup() const {
  TimeNs next = kNever;
  if (phase_ == ServerPhase::kJoining) {
    if (!join_deadline_passed_) next = join_deadline_;
  } else if (phase_ == ServerPhase::kTraining) {
    next = deadline_;
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

bool ServerSession::PollRejectEvent(RejectEvent& out) {
  return reject_log_.Pop(out);
}

bool ServerSession::PollRoundEvent(RoundEvent& out) {
  return round_log_.Pop(out);
}

std::uint32_t ServerSession::joined_workers() const {
  std::uint32_t count = 0;
  for (const WorkerSlot& slot : slots_) count += slot.joined ? 1u : 0u;
  return count;
}

std::uint32_t ServerSession::live_workers() const { return LiveCount(false, false); }

// ---- Frames from workers ----

const ServerSession::WorkerSlot* ServerSession::Slot(PeerId peer) const {
  if (peer == kServerPeer || peer > options_.workers || slots_.empty()) return nullptr;
  return &slots_[peer];
}

ServerSession::WorkerSlot* ServerSession::Slot(PeerId peer) {
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
    if (!leave_frame_.empty()) SetPending(*slot, kPendingLeave);
    return;
  }
  if (const int reason = Incompatibility(view.join); reason >= 0) {
    Reject(from, RejectReason::kIncompatible, view.header.round, now);
    slot->error_reason = static_cast<std::uint8_t>(reason);
    SetPending(*slot, kPendingError);
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
  SetPending(*slot, kPendingWelcome);
  if (phase_ == ServerPhase::kTraining && slot->selected && !slot->reported) {
    slot->broadcast = kBroadcastModel;
    SetPending(*slot, kPendingBroadcast);
  }
}

int ServerSession::Incompatibility(const wire::JoinInfo& join) const {
  // Zero fields mean "not stated" and are not checked.
  if (join.codecs != 0) {
    const std::uint32_t required =
        wire::CodecBit(CodecIdOf(config_.codec)) | wire::CodecBit(CodecIdOf(ModelCodec()));
    if ((join.codecs & required) != required) return 0;
  }
  // A device with 4 GiB or more reports the u32 maximum, which is not a limit.
  if (join.memory_bytes != 0 && join.memory_bytes != 0xFFFFFFFFu &&
      join.memory_bytes < WorkerSession::WelcomeArenaBytes(config_)) {
    return 1;
  }
  if (join.max_frame_bytes != 0 && join.max_frame_bytes < BroadcastFrameBytes(config_)) return 2;
  return -1;
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
  if (round < round_) {
    Reject(from, round + 1 == round_ ? RejectReason::kLate : RejectReason::kStale, round, now);
    return;
  }
  if (!slot->selected) {
    Reject(from, RejectReason::kNotSelected, round, now);
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
      !aggregation_->Add(params.value(), payload.view, context).ok()) {
    Reject(from, RejectReason::kBadPayload, round, now);
    return;
  }
  slot->reported = true;
  slot->held_round = round;
  payload_bits_this_round_ += PayloadBits(view.payload.view);
  // A broadcast queued by a revival is no longer needed: the worker has answered.
  ClearPending(*slot, kPendingBroadcast);
  ++reported_;
  ++counters_.updates_accepted;
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
  if (phase_ == ServerPhase::kTraining && slot.selected && !slot.reported) {
    slot.broadcast = kBroadcastModel;
    SetPending(slot, kPendingBroadcast);
  }
}

void ServerSession::MarkGone(WorkerSlot& slot) {
  if (slot.live) {
    slot.live = false;
    ++counters_.workers_lost;
  }
  slot.held_round = kNoRound;
  ClearPending(slot, kPendingWelcome | kPendingError | kPendingBroadcast);
}

void ServerSession::Reject(PeerId peer, RejectReason reason, std::uint32_t round, TimeNs now) {
  ++counters_.rejected[static_cast<std::size_t>(reason)];
  ++rejected_this_round_;
  const RejectEvent event{peer, reason, round, now};
  reject_log_.Push(event, counters_.reject_events_dropped);
}

// ---- Rounds ----

void ServerSession::Advance(TimeNs now) {
  if (phase_ == ServerPhase::kJoining) {
    const std::uint32_t live = LiveCount(false, false);
    const bool timed_out = join_deadline_passed_ || now >= join_deadline_;
    const std::uint32_t enough = std::max<std::uint32_t>(1, options_.quorum);
    if (live >= options_.workers || (timed_out && live >= enough)) StartTraining(now);
    return;
  }
  if (phase_ != ServerPhase::kTraining) return;

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
  if (reported_ == 0 && waiting == 0) TopUp();
}

void ServerSession::StartTraining(TimeNs now) {
  phase_ = ServerPhase::kTraining;
  // round_ is 0, or the round RestoreState resumed at.
  StartRound(now);
}

void ServerSession::StartRound(TimeNs now) {
  for (WorkerSlot& slot : slots_) {
    slot.selected = false;
    slot.reported = false;
    ClearPending(slot, kPendingBroadcast);
  }
  selected_ = 0;
  reported_ = 0;
  payload_bits_this_round_ = 0;
  rejected_this_round_ = 0;
  extensions_this_round_ = 0;
  aggregation_->BeginRound();
  if (const Status built = BuildModelFrame(); !built.ok()) {
    Finish(wire::LeaveReason::kFailure, Status::Internal());
    return;
  }

  // Sample round(P * live) of the live workers (at least one), by a partial Fisher-Yates
  // shuffle driven by the shared participation stream: the same workers for the same seed,
  // round and set of live workers, on every machine.
  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    if (slots_[peer].joined && slots_[peer].live) candidates_[count++] = peer;
  }
  if (count > 0) {
    const double exact = static_cast<double>(config_.participation) * count + 0.5;
    std::uint32_t take = static_cast<std::uint32_t>(exact);
    take = std::clamp<std::uint32_t>(take, 1, count);
    if (take < count) {
      CounterRng rng(config_.seed, round_, 0, StreamId(RandomPurpose::kParticipation));
      for (std::uint32_t i = 0; i < take; ++i) {
        const std::uint32_t j = i + rng.NextBelow(count - i);
        std::swap(candidates_[i], candidates_[j]);
      }
    }
    for (std::uint32_t i = 0; i < take; ++i) Select(slots_[candidates_[i]]);
  }
  deadline_ = SaturatingAdd(now, options_.round_deadline_ns);
}

void ServerSession::Select(WorkerSlot& slot) {
  slot.selected = true;
  ++selected_;
  // The aggregate of the previous round is only useful to a worker known to hold that round's
  // start model: one whose update for it was accepted.
  const bool holds_previous = round_ > 0 && slot.held_round == round_ - 1;
  slot.broadcast =
      config_.downlink == DownlinkKind::kAggregate && aggregate_valid_ && holds_previous
          ? kBroadcastAggregate
          : kBroadcastModel;
  SetPending(slot, kPendingBroadcast);
}

void ServerSession::ExtendRound(TimeNs now) {
  ++counters_.deadline_extensions;
  ++extensions_this_round_;
  bool resent = false;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    if (slot.selected && slot.live && !slot.reported) {
      SetPending(slot, kPendingBroadcast);
      resent = true;
    }
  }
  if (!resent) TopUp();
  deadline_ = SaturatingAdd(now, options_.round_deadline_ns);
}

void ServerSession::TopUp() {
  std::uint32_t added = 0;
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    if (slot.joined && slot.live && !slot.selected) {
      Select(slot);
      ++added;
    }
  }
  if (added > 0) ++counters_.top_ups;
}

void ServerSession::CloseRound(TimeNs now) {
  const Status applied = ApplyRound();
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
  ++counters_.rounds_completed;
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
  } else {
    EDGESGD_TRY(aggregation_->Apply({}, CodecContext{config_.seed, round_, 0}, model_));
  }
  // A diverged run would broadcast NaN forever; stop it instead, loudly.
  if (!AllFinite(model_)) return Status::DataLoss();
  return Status::Ok();
}

Status ServerSession::BroadcastAndApplyAggregate() {
  const TensorLayout& layout = config_.layout;
  const wire::FrameHeader header = NextHeader(round_ + 1);
  const wire::PayloadMessage message =
      wire::PayloadMessage::ModelBroadcast({wire::BroadcastContent::kAggregate, reported_});
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans, aggregate_builder_->BeginPayloadFrame(
                                                   header, message, config_.codec, layout));
  const CodecContext context{config_.seed, round_, 0};
  if (const Status filled = aggregation_->FillBroadcast(spans, context); !filled.ok()) {
    aggregate_builder_->AbandonPayloadFrame();
    return filled;
  }
  EDGESGD_TRY_ASSIGN(aggregate_frame_, aggregate_builder_->FinishPayloadFrame());
  const Result<wire::FrameView> view = wire::DecodeFrame(aggregate_frame_);
  if (!view.ok()) return Status::Internal();
  // The server applies the frame's own bytes, exactly as every worker will: their models stay
  // bit-identical to this one.
  EDGESGD_TRY(aggregation_->Apply(view.value().payload.view, context, model_));
  aggregate_valid_ = true;
  return Status::Ok();
}

Status ServerSession::BuildModelFrame() {
  const wire::FrameHeader header = NextHeader(round_);
  const wire::PayloadMessage message =
      wire::PayloadMessage::ModelBroadcast({wire::BroadcastContent::kModel, last_reported_});
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans, model_builder_->BeginPayloadFrame(
                                                   header, message, ModelCodec(), config_.layout));
  std::copy(model_.begin(), model_.end(), spans.values.begin());
  EDGESGD_TRY_ASSIGN(model_frame_, model_builder_->FinishPayloadFrame());
  return Status::Ok();
}

void ServerSession::Finish(wire::LeaveReason reason, Status status) {
  status_ = status;
  const Result<std::span<const std::byte>> leave =
      leave_builder_->EncodeLeave(NextHeader(round_), wire::LeaveInfo{reason});
  leave_frame_ = leave.ok() ? leave.value() : std::span<const std::byte>();
  for (PeerId peer = 1; peer <= options_.workers; ++peer) {
    WorkerSlot& slot = slots_[peer];
    ClearPending(slot, kPendingBroadcast);
    if (slot.joined && !leave_frame_.empty()) SetPending(slot, kPendingLeave);
  }
  phase_ = ServerPhase::kDone;
  deadline_ = kNever;
}

// ---- Outgoing frames ----

void ServerSession::SetPending(WorkerSlot& slot, std::uint8_t bits) {
  if (bits == 0) return;
  if (slot.pending == 0) ++pending_workers_;
  slot.pending = static_cast<std::uint8_t>(slot.pending | bits);
}

void ServerSession::ClearPending(WorkerSlot& slot, std::uint8_t bits) {
  if (slot.pending == 0) return;
  slot.pending = static_cast<std::uint8_t>(slot.pending & ~bits);
  if (slot.pending == 0) --pending_workers_;
}

Result<std::span<const std::byte>> ServerSession::BuildControlFrame(PeerId peer, std::uint8_t bit) {
  // A ring of builders: a frame handed out by PollFrame stays intact while the next few control
  // frames are built (one per call in practice, so a drained driver never sees it reused).
  wire::FrameBuilder& builder = *control_builders_[next_control_slot_];
  next_control_slot_ = (next_control_slot_ + 1) % kControlSlots;
  const wire::FrameHeader header = NextHeader(round_);
  if (bit == kPendingWelcome) {
    return builder.EncodeWelcome(header, ToWelcomeInfo(config_, peer, options_.workers));
  }
  const JoinRefusal& reason = kJoinRefusals[slots_[peer].error_reason];
  return builder.EncodeError(header, wire::ErrorInfo{reason.code, reason.text});
}

wire::FrameHeader ServerSession::NextHeader(std::uint32_t round) {
  return wire::FrameHeader{kServerPeer, round, sequence_++};
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
  state.sequence = sequence_;
  state.counters = {counters_.bytes_received, counters_.bytes_sent, counters_.frames_received,
                    counters_.frames_sent, counters_.rounds_completed};
  state.model = std::as_bytes(model_);
  state.aggregation = aggregation_->SavedState();
  return WriteCheckpoint(out, config_, options_.workers, state);
}

Status ServerSession::RestoreState(std::span<const std::byte> bytes,
                                   std::string_view* differing_field) {
  if (phase_ != ServerPhase::kJoining || started_) {
    return Status::FailedPrecondition(
        "a checkpoint can only be restored after Init and before Start");
  }
  CheckpointState state;
  EDGESGD_TRY(ReadCheckpoint(bytes, config_, options_.workers,
                             aggregation_->SavedState().size(), state, differing_field));
  // Check before touching the live state: a failed restore leaves the session as it was.
  for (std::size_t i = 0; i < model_.size(); ++i) {
    float value;
    std::memcpy(&value, state.model.data() + i * sizeof(float), sizeof(float));
    if (!std::isfinite(value)) return Status::InvalidArgument("the checkpoint's model is not finite");
  }
  EDGESGD_TRY(aggregation_->RestoreState(state.aggregation));
  std::memcpy(model_.data(), state.model.data(), state.model.size());
  round_ = state.round;
  sequence_ = state.sequence;
  counters_.bytes_received = state.counters.bytes_received;
  counters_.bytes_sent = state.counters.bytes_sent;
  counters_.frames_received = state.counters.frames_received;
  counters_.frames_sent = state.counters.frames_sent;
  counters_.rounds_completed = state.counters.rounds_completed;
  if (round_ >= config_.rounds) Finish(wire::LeaveReason::kDone, Status::Ok());
  return Status::Ok();
}

}  // namespace edgesgd::protocol
