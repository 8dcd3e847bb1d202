#include "edgesgd/protocol/worker_session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "session_util.h"
#include "worker_checks.h"
#include "worker_stages/update_stage.h"

namespace edgesgd::protocol {

using internal::SaturatingAdd;

Status WorkerSession::Init(Arena& arena, const WorkerOptions& options) {
  if (phase_ != WorkerPhase::kUninitialized) {
    return Status::FailedPrecondition("the worker is already initialized");
  }
  if (options.gradient == nullptr)
    return Status::InvalidArgument("a gradient callback is required");
  if (options.codecs == nullptr) {
    return Status::InvalidArgument("a codec registry is required (AllCodecs() has every codec)");
  }
  if (options.device_id == kServerPeer) {
    return Status::InvalidArgument("device id 0 is the server's peer id");
  }
  if (options.join_retry_ns == 0) return Status::InvalidArgument("join retry must be > 0");
  if (options.heartbeat_interval_ns == 0) {
    return Status::InvalidArgument("heartbeat interval must be > 0 (kNever for none)");
  }
  if (wire::kSecureAggregationFrames && options.secure_minimum_neighbours == 0) {
    return Status::InvalidArgument(
        "secure aggregation's minimum neighbourhood must be at least 1: a device alone would "
        "send its update unmasked");
  }
  if ((options.secure_signing.signer == nullptr) != (options.secure_signing.verifier == nullptr)) {
    return Status::InvalidArgument(
        "signed secure aggregation needs both a signer and a verifier of the other devices");
  }
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < InitArenaBytes()) {
    return Status::ResourceExhausted("the arena is smaller than WorkerSession::InitArenaBytes");
  }
  const Result<std::span<std::byte>> control = arena.AllocateBytes(kControlBuilderBytes);
  const Result<std::span<std::byte>> heartbeat = arena.AllocateBytes(kControlBuilderBytes);
  if (!control.ok() || !heartbeat.ok()) {
    return Status::Internal("arena accounting disagrees with InitArenaBytes");
  }
  control_builder_.emplace(control.value());
  heartbeat_builder_.emplace(heartbeat.value());
  options_ = options;
  arena_ = &arena;
  id_ = options.device_id;
  phase_ = WorkerPhase::kIdle;
  return Status::Ok();
}

// ---- Session ----

void WorkerSession::DoStart(TimeNs now) {
  if (phase_ != WorkerPhase::kIdle) return;
  phase_ = WorkerPhase::kJoining;
  SendJoin(now);
}

void WorkerSession::DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) {
  ++counters_.frames_received;
  counters_.bytes_received += frame.size();
  if (phase_ == WorkerPhase::kUninitialized || phase_ == WorkerPhase::kIdle ||
      phase_ == WorkerPhase::kFinished) {
    ++counters_.unexpected;
    return;
  }
  // Before the Welcome only control frames are expected; afterwards nothing larger than the
  // run's largest broadcast.
  const std::size_t limit = configured_ ? WorkerReceiveFrameBytes(config_, welcome_.workers)
                                        : wire::kMaxControlFrameBytes;
  const Result<wire::FrameView> decoded = wire::DecodeFrame(frame, limit);
  if (!decoded.ok()) {
    ++counters_.malformed;
    return;
  }
  const wire::FrameView& view = decoded.value();
  if (from != kServerPeer || view.header.sender != kServerPeer) {
    ++counters_.unknown_sender;
    return;
  }
  switch (view.kind) {
    case wire::MessageKind::kWelcome:
      HandleWelcome(view, now);
      break;
    case wire::MessageKind::kModelBroadcast:
      if (configured_) {
        HandleBroadcast(view, now);
      } else {
        ++counters_.unexpected;
      }
      break;
    case wire::MessageKind::kLeave:
      leave_reason_ = view.leave.reason;
      phase_ = WorkerPhase::kFinished;
      pending_ = 0;
      break;
    case wire::MessageKind::kError:
      HandleError(view);
      break;
    case wire::MessageKind::kSecureAggregation:
      if (Secure()) {
        HandleSecure(view);
      } else {
        ++counters_.unexpected;
      }
      break;
    default:
      ++counters_.unexpected;
      break;
  }
}

void WorkerSession::DoPeerLost(PeerId peer, TimeNs now) {
  // The server will have dropped this worker with the link; join again (the driver delivers the
  // Join once the link is back, and the join retry keeps trying until then).
  if (peer == kServerPeer && phase_ == WorkerPhase::kTraining) Resync(now);
}

void WorkerSession::DoTimer(TimeNs now) {
  const bool joining =
      phase_ == WorkerPhase::kJoining || (phase_ == WorkerPhase::kTraining && resyncing_);
  if (joining && now >= next_join_) SendJoin(now);
  if (phase_ == WorkerPhase::kTraining && options_.heartbeat_interval_ns != kNever &&
      now >= next_heartbeat_) {
    SendHeartbeat(now);
  }
}

bool WorkerSession::DoPollFrame(OutgoingFrame& out) {
  std::span<const std::byte> bytes;
  std::uint64_t work = 0;
  if ((pending_ & kPendingControl) != 0) {
    pending_ = static_cast<std::uint8_t>(pending_ & ~kPendingControl);
    bytes = control_frame_;
  } else if ((pending_ & kPendingUpdate) != 0) {
    pending_ = static_cast<std::uint8_t>(pending_ & ~kPendingUpdate);
    bytes = update_frame_;
    work = update_work_;
  } else if ((pending_ & kPendingHeartbeat) != 0) {
    pending_ = static_cast<std::uint8_t>(pending_ & ~kPendingHeartbeat);
    bytes = heartbeat_frame_;
  } else {
    return false;
  }
  out.to = kServerPeer;
  out.bytes = bytes;
  out.work_samples = work;
  ++counters_.frames_sent;
  counters_.bytes_sent += bytes.size();
  return true;
}

TimeNs WorkerSession::DoNextWakeup() const {
  if (phase_ == WorkerPhase::kJoining) return next_join_;
  if (phase_ != WorkerPhase::kTraining) return kNever;
  TimeNs next = resyncing_ ? next_join_ : kNever;
  if (options_.heartbeat_interval_ns != kNever) next = std::min(next, next_heartbeat_);
  return next;
}

// ---- Frames from the server ----

void WorkerSession::HandleWelcome(const wire::FrameView& view, TimeNs now) {
  const std::uint32_t assigned = view.welcome.assigned_id;
  if (assigned == kServerPeer || assigned == wire::kUnassignedDevice ||
      (options_.device_id != wire::kUnassignedDevice && assigned != options_.device_id)) {
    ++counters_.rejected_welcomes;
    return;
  }
  RunConfig config;
  const Status described = FromWelcomeInfo(view.welcome, config);
  if (!described.ok()) {
    ++counters_.rejected_welcomes;
    // The run cannot be done here: leave, so that the server stops waiting for this device, and
    // never start it (the bounds keep one Welcome from sizing unbounded work).
    if (!configured_) Fail(described, described.reason(), wire::LeaveReason::kRefusedRun);
    return;
  }
  if (!configured_ && config.privacy.mode == PrivacyMode::kDistributed && !AddsNoise()) {
    ++counters_.rejected_welcomes;
    const Status keyless = Status::FailedPrecondition(
        "the run adds noise on the devices and this worker cannot: no noise function or key");
    Fail(keyless, keyless.reason(), wire::LeaveReason::kRefusedRun);
    return;
  }
  if (wire::kSecureAggregationFrames && !configured_ && config.secure.enabled &&
      options_.secure_entropy == nullptr) {
    ++counters_.rejected_welcomes;
    const Status keyless = Status::FailedPrecondition(
        "the run uses secure aggregation and this worker has no entropy source for its keys");
    Fail(keyless, keyless.reason(), wire::LeaveReason::kRefusedRun);
    return;
  }
  if (wire::kSecureAggregationFrames && !configured_ && config.secure.enabled &&
      config.secure.signed_rounds != (options_.secure_signing.signer != nullptr)) {
    ++counters_.rejected_welcomes;
    const Status mismatch = Status::FailedPrecondition(
        config.secure.signed_rounds
            ? "the run signs its secure rounds and this worker has no signing key"
            : "this worker signs its secure rounds and the run does not: without the consistency "
              "check a server could learn its update by lying about who survived");
    Fail(mismatch, mismatch.reason(), wire::LeaveReason::kRefusedRun);
    return;
  }
  if (configured_) {
    // A reply to a resync Join (or a duplicate): it must describe the same run.
    if (!internal::SameWelcome(view.welcome, welcome_)) {
      ++counters_.rejected_welcomes;
      return;
    }
    resyncing_ = false;
    next_join_ = kNever;
    return;
  }
  id_ = assigned;
  if (const Status configured = Configure(config, view.welcome.workers); !configured.ok()) {
    Fail(configured,
         configured.code() == StatusCode::kResourceExhausted
             ? "worker arena is smaller than WorkerSession::ArenaBytes for this run"
             : "worker could not take its buffers for this run",
         wire::LeaveReason::kFailure);
    return;
  }
  welcome_ = view.welcome;
  config_ = config;
  configured_ = true;
  phase_ = WorkerPhase::kTraining;
  next_join_ = kNever;
  next_heartbeat_ = SaturatingAdd(now, options_.heartbeat_interval_ns);
}

void WorkerSession::HandleError(const wire::FrameView& view) {
  // Only an answer to a Join means anything (the server refusing this device); afterwards the
  // worker has a run to do and an Error cannot be tied to anything it sent.
  if (configured_) {
    ++counters_.unexpected;
    return;
  }
  const Status status = view.error.code == StatusCode::kOk
                            ? Status::Unavailable("the server answered the Join with an Error")
                            : Status(view.error.code, "the server answered the Join with an Error");
  const std::size_t length = std::min(view.error.reason.size(), wire::kMaxErrorReasonBytes);
  // An Error without a reason has no storage behind it (data() null): copy nothing then.
  if (length > 0) std::memcpy(failure_reason_.data(), view.error.reason.data(), length);
  failure_reason_[length] = '\0';
  status_ = status;
  phase_ = WorkerPhase::kFinished;
  pending_ = 0;
}

void WorkerSession::HandleBroadcast(const wire::FrameView& view, TimeNs now) {
  const std::uint32_t round = view.header.round;
  if (broadcast_round_ != kNoRound && round < broadcast_round_) {
    ++counters_.stale_broadcasts;
    return;
  }
  if (round == broadcast_round_) {
    // The server re-sent this round (its deadline passed without our update, which may have
    // been lost): send the same update again rather than compute a second one.
    ++counters_.duplicate_broadcasts;
    if (update_round_ == round && !update_frame_.empty()) {
      update_work_ = 0;
      pending_ = static_cast<std::uint8_t>(pending_ | kPendingUpdate);
      ++counters_.updates_resent;
    }
    return;
  }
  // Adaptive clipping: the round's bound comes with its broadcast. One that is not a positive
  // finite number makes the broadcast unusable, like a payload that does not decode.
  const float clip_bound = view.message.broadcast.clip_bound;
  if (AdaptsClipping(config_.privacy) && !(clip_bound > 0.0f && std::isfinite(clip_bound))) {
    ++counters_.bad_payloads;
    return;
  }
  const Result<std::span<const float>> model = ApplyBroadcast(view);
  if (model.status().code() == StatusCode::kFailedPrecondition) {
    Resync(now);
    return;
  }
  if (!model.ok()) {
    ++counters_.bad_payloads;
    return;
  }
  broadcast_round_ = round;
  model_round_ = round;
  if (AdaptsClipping(config_.privacy)) feedback_.SetClipNorm(clip_bound);
  ComputeUpdate(round, model.value());
}

// ---- Computing updates ----

IdleMemory WorkerSession::IdleBuffers() const {
  IdleMemory idle;
  if (!configured_) return idle;
  idle.Add(gradient_);
  if (config_.aggregation != AggregationKind::kMajority) idle.Add(feedback_.IdleBuffers());
  idle.Add(scratch_);
  if (config_.downlink == DownlinkKind::kModel &&
      ErrorFeedbackWorker::SelectionStateBytes(config_.layout, config_.codec) == 0) {
    idle.Add(model_);
  }
  return idle;
}

Status WorkerSession::Configure(const RunConfig& config, std::uint32_t workers) {
  Arena& arena = *arena_;
  const std::size_t needed = WelcomeArenaBytes(config, workers);
  if (needed == 0) return Status::InvalidArgument("the run cannot be sized");
  EDGESGD_TRY(options_.codecs->For(config.codec).status());
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < needed) {
    return Status::ResourceExhausted("the worker's memory is too small for this run");
  }
  const TensorLayout& layout = config.layout;
  const std::size_t d = layout.dimension();
  model_ = {};
  if (KeepsModelCopy(config)) {
    EDGESGD_TRY_ASSIGN(model_, arena.Allocate<float>(d));
  }
  EDGESGD_TRY_ASSIGN(gradient_, arena.Allocate<float>(d));
  if (config.aggregation == AggregationKind::kMajority) {
    EDGESGD_TRY_ASSIGN(momentum_, arena.Allocate<float>(d));
  } else {
    EDGESGD_TRY(feedback_.Init(arena, *options_.codecs, layout, config.codec, config.feedback));
    if (IsPrivate(config.privacy)) feedback_.SetClipNorm(config.privacy.clip);
    if (kScaffold && config.scaffold) {
      EDGESGD_TRY_ASSIGN(scaffold_,
                         internal::ControlVariates::Configure(arena, *options_.codecs, config));
    }
    if (config.downlink == DownlinkKind::kAggregate) {
      EDGESGD_TRY_ASSIGN(scratch_, arena.AllocateBytes(CodecScratchBytes(config.codec, layout)));
    }
  }
  EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer,
                     arena.AllocateBytes(BuilderBytesFor(UpdateFrameBytes(config))));
  update_builder_.emplace(buffer);
  if (wire::kSecureAggregationFrames && config.secure.enabled) {
    EDGESGD_TRY(ConfigureSecure(config, workers));
  }
  stage_count_ = static_cast<std::uint8_t>(internal::BuildUpdateChain(config, stages_));
  return Status::Ok();
}

void WorkerSession::ComputeUpdate(std::uint32_t round, std::span<const float> model) {
  const bool majority = config_.aggregation == AggregationKind::kMajority;
  const std::uint32_t run_steps = majority ? 1u : config_.feedback.local_steps;
  const std::uint32_t limit = options_.local_step_limit;
  const std::uint32_t steps = limit != 0 && limit < run_steps ? limit : run_steps;
  const std::uint64_t samples = std::uint64_t{StepSamples()} * steps;
  const auto reported = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(samples, std::numeric_limits<std::uint32_t>::max()));
  // Whatever happens below, the previous update is superseded.
  update_frame_ = {};
  update_round_ = kNoRound;
  pending_ = static_cast<std::uint8_t>(pending_ & ~kPendingUpdate);

  internal::UpdateRound update{
      .config = config_,
      .options = options_,
      .workers = welcome_.workers,
      .id = id_,
      .round = round,
      .local_steps = steps,
      .model = model,
      .gradient = gradient_,
      .momentum = momentum_,
      .feedback = feedback_,
      .scaffold = scaffold_,
      .secure = secure_,
      .counters = counters_,
      .stages = std::span(stages_).first(stage_count_),
      .builder = *update_builder_,
      .header = NextHeader(round),
      .message = wire::PayloadMessage::Update(
          {id_, reported, 0.0f, steps < run_steps ? steps : 0u}),
      .payload = {},
      .shape = {},
  };
  for (const internal::UpdateStage* stage : update.stages) {
    if (!stage->Run(update).ok()) {
      update_builder_->AbandonPayloadFrame();
      return;
    }
  }
  if (Secure()) {
    // The payload frame only held the update on its way to the masked input.
    update_builder_->AbandonPayloadFrame();
    if (!StartSecureRound(round).ok()) return;
  } else {
    const Result<std::span<const std::byte>> frame = update_builder_->FinishPayloadFrame();
    if (!frame.ok()) {
      ++counters_.encode_errors;
      return;
    }
    update_frame_ = frame.value();
  }
  update_round_ = round;
  update_work_ = samples;
  pending_ = static_cast<std::uint8_t>(pending_ | kPendingUpdate);
  ++counters_.updates_sent;
}

// ---- Control frames ----

void WorkerSession::SendJoin(TimeNs now) {
  // What this device can spend on the run: what is left of the arena, plus what the run already
  // took when this is a resync (the server checks it against WelcomeArenaBytes).
  std::size_t memory = arena_->remaining_bytes();
  if (configured_) memory += WelcomeArenaBytes(config_);
  wire::JoinInfo join;
  join.architecture = wire::HostArchitecture();
  join.codecs = options_.codecs->Mask();
  if (kDifferentialPrivacy) {
    join.features = wire::kFeatureDifferentialPrivacy;
    if (AddsNoise()) join.features |= wire::kFeatureDistributedNoise;
  }
  if (kScaffold) join.features |= wire::kFeatureScaffold;
  if (wire::kSecureAggregationFrames && options_.secure_entropy != nullptr) {
    join.features |= wire::kFeatureSecureAggregation;
  }
  join.max_frame_bytes = 0;  // frames arrive through the driver, which sizes its buffers
  join.memory_bytes = static_cast<std::uint32_t>(
      std::min<std::size_t>(memory, std::numeric_limits<std::uint32_t>::max()));
  const Result<std::span<const std::byte>> frame =
      control_builder_->EncodeJoin(NextHeader(0), join);
  if (frame.ok()) {
    control_frame_ = frame.value();
    pending_ = static_cast<std::uint8_t>(pending_ | kPendingControl);
    ++counters_.joins_sent;
  }
  next_join_ = SaturatingAdd(now, options_.join_retry_ns);
}

void WorkerSession::SendHeartbeat(TimeNs now) {
  const std::uint32_t round = broadcast_round_ == kNoRound ? 0 : broadcast_round_;
  const wire::HeartbeatInfo heartbeat{now / 1000, 0};
  const Result<std::span<const std::byte>> frame =
      heartbeat_builder_->EncodeHeartbeat(NextHeader(round), heartbeat);
  if (frame.ok()) {
    heartbeat_frame_ = frame.value();
    pending_ = static_cast<std::uint8_t>(pending_ | kPendingHeartbeat);
    ++counters_.heartbeats_sent;
  }
  next_heartbeat_ = SaturatingAdd(now, options_.heartbeat_interval_ns);
}

void WorkerSession::Resync(TimeNs now) {
  ++counters_.resyncs;
  resyncing_ = true;
  SendJoin(now);
}

void WorkerSession::Fail(Status status, const char* reason, wire::LeaveReason leave) {
  status_ = status;
  const std::size_t length = std::min(std::strlen(reason), wire::kMaxErrorReasonBytes);
  std::memcpy(failure_reason_.data(), reason, length);
  failure_reason_[length] = '\0';
  pending_ = 0;
  const Result<std::span<const std::byte>> frame =
      control_builder_->EncodeLeave(NextHeader(0), wire::LeaveInfo{leave});
  if (frame.ok()) {
    control_frame_ = frame.value();
    pending_ = kPendingControl;
  }
  phase_ = WorkerPhase::kFinished;
}

wire::FrameHeader WorkerSession::NextHeader(std::uint32_t round) {
  return wire::FrameHeader{id_, round, sequence_++};
}

std::uint32_t WorkerSession::StepSamples() const {
  return options_.samples_per_step != 0 ? options_.samples_per_step : config_.batch;
}

}  // namespace edgesgd::protocol
