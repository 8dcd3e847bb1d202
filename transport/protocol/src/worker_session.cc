#include "edgesgd/protocol/worker_session.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include "edgesgd/core/optimizer.h"
#include "session_util.h"

namespace edgesgd::protocol {
namespace {

using internal::AllFinite;
using internal::SaturatingAdd;

// Bitwise float equality: a Welcome must compare equal to itself even if a field the run does
// not read holds a NaN.
bool SameBits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

bool SameTraining(const wire::TrainingConfig& a, const wire::TrainingConfig& b) {
  return a.feedback == b.feedback && SameBits(a.detach, b.detach) && a.optimizer == b.optimizer &&
         SameBits(a.learning_rate, b.learning_rate) && SameBits(a.momentum, b.momentum) &&
         SameBits(a.weight_decay, b.weight_decay) && a.local_steps == b.local_steps &&
         SameBits(a.prox_mu, b.prox_mu) && a.scaffold == b.scaffold && a.batch == b.batch &&
         a.aggregate == b.aggregate && SameBits(a.participation, b.participation) &&
         a.mode == b.mode && a.gossip == b.gossip && a.topology == b.topology &&
         a.gossip_rounds == b.gossip_rounds;
}

bool SamePrivacy(const wire::PrivacyConfig& a, const wire::PrivacyConfig& b) {
  return a.mode == b.mode && SameBits(a.clip, b.clip) &&
         SameBits(a.noise_multiplier, b.noise_multiplier) && SameBits(a.delta, b.delta) &&
         SameBits(a.target_quantile, b.target_quantile) &&
         SameBits(a.clip_learning_rate, b.clip_learning_rate) &&
         SameBits(a.count_noise, b.count_noise);
}

bool SameSecure(const wire::SecureConfig& a, const wire::SecureConfig& b) {
  return SameBits(a.threshold, b.threshold) && a.neighbours == b.neighbours &&
         SameBits(a.bound, b.bound);
}

bool SameWelcome(const wire::WelcomeInfo& a, const wire::WelcomeInfo& b) {
  return a.assigned_id == b.assigned_id && a.workers == b.workers && a.rounds == b.rounds &&
         a.seed == b.seed && a.layout == b.layout && SameCodecParams(a.codec, b.codec) &&
         SameTraining(a.training, b.training) && SamePrivacy(a.privacy, b.privacy) &&
         (!wire::kSecureAggregationFrames || SameSecure(a.secure, b.secure));
}

}  // namespace

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
  if (configured_) {
    // A reply to a resync Join (or a duplicate): it must describe the same run.
    if (!SameWelcome(view.welcome, welcome_)) {
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

Result<std::span<const float>> WorkerSession::ApplyBroadcast(const wire::FrameView& view) {
  const PayloadView& payload = view.payload.view;
  const TensorLayout& layout = config_.layout;
  if (view.message.broadcast.content == wire::BroadcastContent::kModel) {
    if (view.payload.codec != CodecIdOf(ModelCodec()) ||
        view.payload.layout != PayloadLayout::kDense ||
        payload.values.size() != layout.dimension() || !AllFinite(payload.values)) {
      return Status::DataLoss("a model broadcast must be the dense model");
    }
    if (Scaffold()) {
      // The round's control variate comes with its model, or the broadcast is refused whole.
      if (!view.has_control) return Status::DataLoss("a SCAFFOLD model broadcast lacks c");
      EDGESGD_TRY(scaffold_->SetServerControl(view.control.view.values));
    }
    // Without a copy the round reads the model in the frame (KeepsModelCopy), and there is no
    // selector to learn the aggregate.
    if (model_.empty()) return payload.values;
    if (config_.aggregation == AggregationKind::kMean) LearnAggregate(view);
    // A copy, not a decode-add into zeros: 0 + (-0) would turn -0 into +0 and the worker's
    // model would no longer be the server's bit for bit.
    std::copy(payload.values.begin(), payload.values.end(), model_.begin());
    return std::span<const float>(model_);
  }
  if (config_.downlink != DownlinkKind::kAggregate) {
    return Status::DataLoss("an aggregate broadcast in a run with the model downlink");
  }
  const Result<CodecParams> params =
      ParamsForPayload(config_.codec, view.payload.codec, view.payload.layout, view.payload.header);
  if (!params.ok()) return params.status();
  const std::uint32_t round = view.header.round;
  if (model_round_ == kNoRound || model_round_ + 1 != round) {
    return Status::FailedPrecondition("the aggregate's round does not follow the worker's model");
  }
  Status status;
  if (config_.aggregation == AggregationKind::kMajority) {
    status = ApplySignVote(payload.words, layout, config_.optimizer.learning_rate,
                           config_.optimizer.weight_decay, model_);
  } else {
    const CodecContext context{config_.seed, round - 1, 0};
    status = options_.codecs->DecodeAdd(params.value(), layout, context, payload, -1.0f, model_,
                                        scratch_);
  }
  // Every failure here is the payload's (both functions leave the model untouched on error).
  if (!status.ok()) return Status::DataLoss("the aggregate broadcast's payload does not decode");
  return std::span<const float>(model_);
}

void WorkerSession::LearnAggregate(const wire::FrameView& view) {
  // The model of round r is x_r = x_{r-1} - ghat_{r-1} (mean aggregation, lr and weight decay
  // applied on the workers), so a worker still holding x_{r-1}, whose update of round r-1 was
  // computed from it, reads ghat off the model change; the broadcast says how many updates the
  // server aggregated. A worker that sat the round out, or holds another model, cannot know
  // the aggregate of its last update. (A worker whose update arrived too late to count cannot
  // tell either: its selector then takes the others' sum for the full one, for one round.)
  const std::uint32_t round = view.header.round;
  const bool holds_previous =
      update_round_ != kNoRound && update_round_ + 1 == round && model_round_ == update_round_;
  if (!holds_previous) {
    feedback_.ForgetAggregate();
    return;
  }
  if (!feedback_
           .ObserveModelChange(model_, view.payload.view.values,
                               view.message.broadcast.participants)
           .ok()) {
    feedback_.ForgetAggregate();
  }
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
      static_assert(alignof(ScaffoldDevice) <= kArenaAlignment &&
                    std::is_trivially_destructible_v<ScaffoldDevice>);
      EDGESGD_TRY_ASSIGN(const std::span<std::byte> storage,
                         arena.AllocateBytes(sizeof(ScaffoldDevice)));
      auto* scaffold = ::new (static_cast<void*>(storage.data())) ScaffoldDevice();
      EDGESGD_TRY(scaffold->Init(arena, *options_.codecs, layout, config.codec));
      scaffold_ = scaffold;
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
  return Status::Ok();
}

void WorkerSession::ComputeUpdate(std::uint32_t round, std::span<const float> model) {
  const bool majority = config_.aggregation == AggregationKind::kMajority;
  const std::uint32_t steps = majority ? 1u : config_.feedback.local_steps;
  const std::uint64_t samples = std::uint64_t{StepSamples()} * steps;
  const auto reported = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(samples, std::numeric_limits<std::uint32_t>::max()));
  // Whatever happens below, the previous update is superseded.
  update_frame_ = {};
  update_round_ = kNoRound;
  pending_ = static_cast<std::uint8_t>(pending_ & ~kPendingUpdate);

  const wire::FrameHeader header = NextHeader(round);
  const wire::PayloadMessage message = wire::PayloadMessage::Update({id_, reported});
  const Status computed = majority ? ComputeMajorityUpdate(round, header, message)
                                   : ComputeMeanUpdate(round, model, header, message);
  if (!computed.ok()) return;
  update_round_ = round;
  update_work_ = samples;
  pending_ = static_cast<std::uint8_t>(pending_ | kPendingUpdate);
  ++counters_.updates_sent;
}

Status WorkerSession::ComputeMeanUpdate(std::uint32_t round, std::span<const float> model,
                                        const wire::FrameHeader& header,
                                        const wire::PayloadMessage& message) {
  // A round abandoned earlier (callback error) is folded into the residual by BeginRound, so
  // error feedback still delivers its progress later.
  // The model stays as it is until the round is compressed (all of it happens in this call),
  // so the gradient point may be the model itself.
  if (const Status begun = feedback_.BeginRound(model, ErrorFeedbackWorker::PointSource::kBorrow);
      !begun.ok()) {
    ++counters_.encode_errors;
    return begun;
  }
  // A dense update without a residual is its delta: the local steps write it straight into the
  // frame, and nothing is copied. Any other update is encoded into the frame after the steps.
  const bool in_place = feedback_.CanAccumulateInPayload();
  if (!in_place) {
    EDGESGD_TRY(TakeLocalSteps(round));
    // The codec's choice for the round (a quantization schedule's level count, from the round's
    // gradient); buffers were sized for the widest choice.
    const Result<CodecParams> round_params =
        options_.codecs->RoundParams(config_.codec, round, config_.rounds, gradient_);
    const Status set =
        round_params.ok() ? feedback_.SetRoundParams(round_params.value()) : round_params.status();
    if (!set.ok()) {
      ++counters_.encode_errors;
      return set;
    }
  }
  const Result<PayloadSpans> spans =
      update_builder_->BeginPayloadFrame(header, message, feedback_.codec(), config_.layout);
  if (!spans.ok()) {
    ++counters_.encode_errors;
    return spans.status();
  }
  if (in_place) {
    if (const Status lent = feedback_.AccumulateInPayload(spans.value().values); !lent.ok()) {
      update_builder_->AbandonPayloadFrame();
      ++counters_.encode_errors;
      return lent;
    }
    if (const Status stepped = TakeLocalSteps(round); !stepped.ok()) {
      update_builder_->AbandonPayloadFrame();
      return stepped;
    }
  }
  const CodecContext context{config_.seed, round, id_};
  if (const Status changed = Scaffold() ? CompressControlChange(context) : Status::Ok();
      !changed.ok()) {
    update_builder_->AbandonPayloadFrame();
    ++counters_.encode_errors;
    return changed;
  }
  // The codec writes the payload straight into the frame.
  const Result<PayloadShape> shape = feedback_.Compress(context, spans.value());
  if (!shape.ok()) {
    update_builder_->AbandonPayloadFrame();
    ++counters_.encode_errors;
    return shape.status();
  }
  if (const Status noted =
          IsPrivate(config_.privacy)
              ? NotePrivacy(round, message, spans.value().values.first(shape.value().values))
              : Status::Ok();
      !noted.ok()) {
    update_builder_->AbandonPayloadFrame();
    ++counters_.encode_errors;
    return noted;
  }
  if (Secure()) {
    // The payload frame only held the payload on its way to the masked input.
    const Status encoded = EncodeSecureInput(spans.value(), shape.value());
    update_builder_->AbandonPayloadFrame();
    if (!encoded.ok()) {
      ++counters_.encode_errors;
      return encoded;
    }
    return StartSecureRound(round);
  }
  const Result<std::span<const std::byte>> frame = update_builder_->FinishPayloadFrame();
  if (!frame.ok()) {
    ++counters_.encode_errors;
    return frame.status();
  }
  update_frame_ = frame.value();
  return Status::Ok();
}

Status WorkerSession::CompressControlChange(const CodecContext& context) {
  // Read before Compress folds the delta into the residual; the gradient is idle after the
  // steps and holds q. A change the server then never receives leaves c_i ahead of its c.
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans,
                     update_builder_->ReserveControlPayload(config_.codec, config_.layout));
  return scaffold_
      ->CompressChange(context, feedback_.round_delta(), config_.feedback.local_steps,
                       config_.feedback.learning_rate, gradient_, spans)
      .status();
}

Status WorkerSession::TakeLocalSteps(std::uint32_t round) {
  for (std::uint32_t step = 0; step < config_.feedback.local_steps; ++step) {
    const Status gradient =
        options_.gradient(options_.user, feedback_.GradientPoint(), round, step, gradient_);
    if (!gradient.ok()) {
      ++counters_.gradient_errors;
      return gradient;
    }
    if (const Status proximal = feedback_.AddProximalGradient(gradient_); !proximal.ok()) {
      ++counters_.gradient_errors;
      return proximal;
    }
    if (const Status corrected = Scaffold() ? scaffold_->Correct(gradient_) : Status::Ok();
        !corrected.ok()) {
      ++counters_.gradient_errors;
      return corrected;
    }
    if (const Status stepped = feedback_.LocalStep(gradient_); !stepped.ok()) {
      ++counters_.gradient_errors;
      return stepped;
    }
  }
  return Status::Ok();
}

Status WorkerSession::NotePrivacy(std::uint32_t round, wire::PayloadMessage message,
                                  std::span<float> sent_values) {
  const PrivacyParams& privacy = config_.privacy;
  const bool distributed = privacy.mode == PrivacyMode::kDistributed;
  const float bound = feedback_.clip_norm();
  const std::uint32_t cohort = SampledCount(config_.participation, welcome_.workers);
  if (distributed) {
    // This device's share of the round's noise, on the coordinates every device sends; after
    // Compress, so the residual never holds noise.
    options_.add_noise(privacy, bound, cohort, {options_.noise_key, round, id_, kNoiseOnValues},
                       sent_values);
  }
  if (!AdaptsClipping(privacy)) return Status::Ok();
  // Whether the update needed no clipping, for the server's count (with this device's share of
  // the count's noise when the devices add the noise).
  float indicator = feedback_.norm_before_clipping() <= bound ? 1.0f : 0.0f;
  if (distributed) {
    options_.add_noise(privacy, bound, cohort, {options_.noise_key, round, id_, kNoiseOnCount},
                       std::span(&indicator, 1));
  }
  message.update.clip_indicator = indicator;
  return update_builder_->AmendPendingMessage(message);
}

Status WorkerSession::ComputeMajorityUpdate(std::uint32_t round, const wire::FrameHeader& header,
                                            const wire::PayloadMessage& message) {
  const Status gradient = options_.gradient(options_.user, model_, round, 0, gradient_);
  if (!gradient.ok()) {
    ++counters_.gradient_errors;
    return gradient;
  }
  if (const Status updated = SignumMomentumUpdate(config_.optimizer.momentum, gradient_, momentum_);
      !updated.ok()) {
    ++counters_.gradient_errors;
    return updated;
  }
  const Result<PayloadSpans> spans =
      update_builder_->BeginPayloadFrame(header, message, config_.codec, config_.layout);
  if (!spans.ok()) {
    ++counters_.encode_errors;
    return spans.status();
  }
  const CodecContext context{config_.seed, round, id_};
  if (const Status encoded = options_.codecs->Encode(
          config_.codec, config_.layout, context, momentum_, spans.value(), std::span<std::byte>());
      !encoded.ok()) {
    update_builder_->AbandonPayloadFrame();
    ++counters_.encode_errors;
    return encoded;
  }
  if (Secure()) {
    // Each vote becomes a 0 or 1 in its lane; the frame only held the signs on their way.
    const std::span<const std::uint32_t> signs =
        spans.value().words.first(MajorityVote::WordsFor(config_.layout));
    secagg::PackVotes(signs, 32 * signs.size(), secure_->lane_bits, secure_->stage.input());
    update_builder_->AbandonPayloadFrame();
    return StartSecureRound(round);
  }
  const Result<std::span<const std::byte>> frame = update_builder_->FinishPayloadFrame();
  if (!frame.ok()) {
    ++counters_.encode_errors;
    return frame.status();
  }
  update_frame_ = frame.value();
  return Status::Ok();
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

Status CheckWorkerCanRun(const RunConfig& config, const wire::JoinInfo& join,
                         std::uint32_t workers) {
  // The dense model broadcasts are copied, not decoded: the run's codec is all a worker needs.
  if (join.codecs != 0 && (join.codecs & wire::CodecBit(CodecIdOf(config.codec))) == 0) {
    return Status::FailedPrecondition("worker does not implement this run's codec");
  }
  // A device with 4 GiB or more reports the u32 maximum, which is not a limit.
  if (join.memory_bytes != 0 && join.memory_bytes != 0xFFFFFFFFu &&
      join.memory_bytes < WorkerSession::WelcomeArenaBytes(config, workers)) {
    return Status::ResourceExhausted("worker memory is too small for this run");
  }
  if (config.privacy.mode != PrivacyMode::kOff &&
      (join.features & wire::kFeatureDifferentialPrivacy) == 0) {
    return Status::FailedPrecondition(
        "worker does not implement differential privacy, which this run needs");
  }
  if (config.privacy.mode == PrivacyMode::kDistributed &&
      (join.features & wire::kFeatureDistributedNoise) == 0) {
    return Status::FailedPrecondition(
        "worker cannot add noise itself, which this run's distributed noise needs");
  }
  if (config.scaffold && (join.features & wire::kFeatureScaffold) == 0) {
    return Status::FailedPrecondition("worker does not implement SCAFFOLD, which this run uses");
  }
  if (config.secure.enabled && (join.features & wire::kFeatureSecureAggregation) == 0) {
    return Status::FailedPrecondition(
        "worker cannot take part in secure aggregation (no entropy source), which this run uses");
  }
  if (join.max_frame_bytes != 0 &&
      join.max_frame_bytes < WorkerReceiveFrameBytes(config, workers)) {
    return Status::ResourceExhausted("worker cannot receive this run's largest frame");
  }
  return Status::Ok();
}

}  // namespace edgesgd::protocol
