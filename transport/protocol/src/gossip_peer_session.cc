// GossipPeerSession: initialisation, the Session interface, steps, rounds and mixing. The frames
// in and out are in gossip_peer_frames.cc, the exchange against public copies in
// gossip_peer_copies.cc, the configuration's rules and memory in gossip_config.cc, and each
// algorithm's update rule in gossip/.

#include "edgesgd/protocol/gossip_peer_session.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>
#include <variant>

#include "edgesgd/wire/frame_decoder.h"
#include "gossip/gossip_rule.h"
#include "session_util.h"

namespace edgesgd::protocol {
namespace {

using internal::AllFinite;
using internal::Bit;
using internal::SaturatingAdd;

}  // namespace

// ---- Init ----

Status GossipPeerSession::Init(Arena& arena, const GossipConfig& config,
                               const GossipOptions& options) {
  if (phase_ != GossipPhase::kUninitialized) {
    return Status::FailedPrecondition("the gossip peer is already initialized");
  }
  if (const Status check = ValidateGossipConfig(config); !check.ok()) return check;
  const internal::GossipRule* rule = internal::FindGossipRule(config.algorithm);
  if (options.gradient == nullptr)
    return Status::InvalidArgument("a gradient callback is required");
  if (rule->compressed() && options.codecs == nullptr) {
    return Status::InvalidArgument(
        "CHOCO and BEER need a codec registry (AllCodecs() has every codec)");
  }
  if (rule->compressed() && !options.codecs->For(config.codec).ok()) {
    return Status::InvalidArgument("the codec registry does not hold the run's codec");
  }
  if (options.initial_model.size() != config.layout.dimension()) {
    return Status::InvalidArgument("the initial model's size is not the layout's dimension");
  }
  if (!AllFinite(options.initial_model)) {
    return Status::InvalidArgument("the initial model is not finite");
  }
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  const std::size_t needed = ArenaBytes(config);
  if (needed == 0) return Status::InvalidArgument("the configuration cannot be sized");
  if (arena.remaining_bytes() < needed) {
    return Status::ResourceExhausted("the arena is smaller than GossipPeerSession::ArenaBytes");
  }
  config_ = config;
  options_ = options;
  options_.initial_model = {};  // copied below; the caller's buffer need not outlive Init
  rule_ = rule;
  vectors_ = rule->vectors();
  if (!TakeBuffers(arena).ok()) {
    return Status::Internal("arena accounting disagrees with ArenaBytes");
  }
  std::copy(options.initial_model.begin(), options.initial_model.end(),
            exchanged_[0].current.begin());
  if (config_.gossip_steps > 1) {
    std::copy(options.initial_model.begin(), options.initial_model.end(), model_start_.begin());
  }
  all_neighbours_ = config_.mixing.degree == 0 ? 0 : (Bit(config_.mixing.degree) - 1);
  live_ = all_neighbours_;
  max_receive_bytes_ = MaxFrameBytes(config_);
  phase_ = GossipPhase::kReady;
  return Status::Ok();
}

Status GossipPeerSession::TakeBuffers(Arena& arena) {
  const std::size_t d = config_.layout.dimension();
  const std::size_t builder_bytes = wire::FrameBuilderBytes(config_.codec, config_.layout);
  const bool separate_starts = config_.gossip_steps > 1;
  for (std::size_t v = 0; v < vectors_; ++v) {
    Exchanged& vector = exchanged_[v];
    if (compressed()) {
      vector.kind = v == 0 ? wire::GossipVector::kModelDelta : wire::GossipVector::kTrackerDelta;
    } else {
      vector.kind = v == 0 ? wire::GossipVector::kModel : wire::GossipVector::kTracker;
    }
    EDGESGD_TRY_ASSIGN(vector.current, arena.Allocate<float>(d));
    if (config_.accel != 0.0f) {
      EDGESGD_TRY_ASSIGN(vector.previous, arena.Allocate<float>(d));
    }
    EDGESGD_TRY_ASSIGN(vector.mix, arena.Allocate<float>(d));
    // CHOCO and BEER keep no early accumulator: a neighbour ahead advances its copy instead.
    if (!compressed()) {
      EDGESGD_TRY_ASSIGN(vector.next_mix, arena.Allocate<float>(d));
    }
    for (std::optional<wire::FrameBuilder>& builder : vector.builders) {
      EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer, arena.AllocateBytes(builder_bytes));
      builder.emplace(buffer);
    }
    if (compressed()) {
      EDGESGD_TRY_ASSIGN(vector.own_copy, arena.Allocate<float>(d));
      for (std::size_t k = 0; k < config_.mixing.degree; ++k) {
        EDGESGD_TRY_ASSIGN(vector.copies[k], arena.Allocate<float>(d));
      }
    }
    if (ResynchronisesCopies(config_)) {
      EDGESGD_TRY_ASSIGN(
          std::span<std::byte> copy_buffer,
          arena.AllocateBytes(wire::FrameBuilderBytes(ModelCodec(), config_.layout)));
      vector.copy_builder.emplace(copy_buffer);
      EDGESGD_TRY_ASSIGN(std::span<std::byte> request_buffer,
                         arena.AllocateBytes(kCopyRequestBuilderBytes));
      vector.request_builder.emplace(request_buffer);
    }
  }
  EDGESGD_TRY_ASSIGN(gradient_, arena.Allocate<float>(d));
  if (config_.phase_batches > 1) {
    EDGESGD_TRY_ASSIGN(batch_gradient_, arena.Allocate<float>(d));
  }
  model_start_ = exchanged_[0].current;
  if (compressed()) {
    EDGESGD_TRY_ASSIGN(codec_scratch_,
                       arena.AllocateBytes(CodecScratchBytes(config_.codec, config_.layout)));
  }
  if (vectors_ == 2) {
    EDGESGD_TRY_ASSIGN(previous_gradient_, arena.Allocate<float>(d));
    tracker_start_ = exchanged_[1].current;
    if (separate_starts) {
      EDGESGD_TRY_ASSIGN(model_start_, arena.Allocate<float>(d));
      EDGESGD_TRY_ASSIGN(tracker_start_, arena.Allocate<float>(d));
    }
  }
  EDGESGD_TRY_ASSIGN(std::span<std::byte> leave_buffer, arena.AllocateBytes(kControlBuilderBytes));
  leave_builder_.emplace(leave_buffer);
  return Status::Ok();
}

// ---- Session ----

void GossipPeerSession::DoStart(TimeNs now) {
  if (phase_ != GossipPhase::kReady) return;
  phase_ = GossipPhase::kRunning;
  round_ = 0;
  step_ = 0;
  StartStep(now);
  Advance(now, 1);
}

void GossipPeerSession::DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) {
  ++counters_.frames_received;
  counters_.bytes_received += frame.size();
  if (phase_ == GossipPhase::kUninitialized) return;

  const Result<wire::FrameView> decoded = wire::DecodeFrame(frame, max_receive_bytes_);
  if (!decoded.ok()) {
    Reject(from, GossipRejectReason::kMalformed, round_, now);
    return;
  }
  const wire::FrameView& view = decoded.value();
  // The link's peer must be a neighbour and must be who the envelope says sent it: a frame
  // relayed or forged by another peer would otherwise be mixed in with a neighbour's weight.
  const int index = NeighbourIndex(from);
  if (index < 0 || view.header.sender != from) {
    Reject(from, GossipRejectReason::kUnknownSender, view.header.round, now);
    return;
  }
  const auto neighbour = static_cast<std::size_t>(index);
  switch (view.kind) {
    case wire::MessageKind::kGossipExchange:
      HandleExchange(neighbour, view, now);
      break;
    case wire::MessageKind::kLeave:
      HandleLeave(neighbour);
      break;
    default:
      Reject(from, GossipRejectReason::kUnexpectedMessage, view.header.round, now);
      break;
  }
  Advance(now, 0);
}

void GossipPeerSession::DoPeerLost(PeerId peer, TimeNs now) {
  if (phase_ == GossipPhase::kUninitialized) return;
  const int index = NeighbourIndex(peer);
  if (index < 0) return;
  const auto neighbour = static_cast<std::size_t>(index);
  if ((live_ & Bit(neighbour)) != 0) ++counters_.neighbours_lost;
  MarkLost(neighbour);
  Advance(now, 0);
}

void GossipPeerSession::DoTimer(TimeNs now) { Advance(now, 0); }

TimeNs GossipPeerSession::DoNextWakeup() const {
  return phase_ == GossipPhase::kRunning ? deadline_ : kNever;
}

bool GossipPeerSession::PollRejectEvent(GossipRejectEvent& out) { return reject_log_.Pop(out); }

bool GossipPeerSession::PollRoundEvent(GossipRoundEvent& out) { return round_log_.Pop(out); }

bool GossipPeerSession::IsLive(PeerId peer) const {
  const int index = NeighbourIndex(peer);
  return index >= 0 && (live_ & Bit(static_cast<std::size_t>(index))) != 0;
}

bool GossipPeerSession::compressed() const { return rule_ != nullptr && rule_->compressed(); }

internal::GossipState GossipPeerSession::RuleState() {
  return {.config = config_,
          .round = round_,
          .last_step = step_ + 1 == config_.gossip_steps,
          .model = exchanged_[internal::kModelVector].current,
          .tracker = exchanged_[internal::kTrackerVector].current,
          .model_mix = exchanged_[internal::kModelVector].mix,
          .tracker_mix = exchanged_[internal::kTrackerVector].mix,
          .tracker_start = tracker_start_,
          .gradient = gradient_,
          .previous_gradient = previous_gradient_};
}

std::uint32_t GossipPeerSession::heard_count() const {
  std::uint64_t all = all_neighbours_;
  for (const Exchanged& vector : exchanged()) all &= vector.heard;
  return static_cast<std::uint32_t>(std::popcount(all));
}
// ---- Steps and rounds ----

void GossipPeerSession::Advance(TimeNs now, std::uint32_t started) {
  // Terminates: a step started here has a deadline after `now`, and it can only be complete
  // already when it has no neighbours or its vectors were buffered — for the dense algorithms
  // nothing is buffered for the step after it; CHOCO counts in neighbours that are rounds ahead
  // from their copies, so several rounds in a row can be complete. After the second start in one
  // call both builders hold frames the driver may not have polled (see the Memory note in the
  // header), so a third close waits for the driver's next timer, due at once.
  while (phase_ == GossipPhase::kRunning) {
    const bool complete = StepComplete();
    if (!complete && now < deadline_) return;
    if (started == 2 && config_.mixing.degree > 0) {
      deadline_ = now;
      return;
    }
    CloseStep(now, !complete);
    ++started;
  }
}

bool GossipPeerSession::StepComplete() const {
  // Every live neighbour heard, for every vector. With neighbours but none heard (all lost), the
  // step waits for its deadline instead: racing through the remaining steps alone would leave
  // nothing for a neighbour that comes back.
  std::uint64_t any_heard = 0;
  for (const Exchanged& vector : exchanged()) {
    if ((live_ & ~vector.heard) != 0) return false;
    any_heard |= vector.heard;
  }
  return all_neighbours_ == 0 || any_heard != 0;
}

bool GossipPeerSession::ComputeGradient() {
  const std::span<const float> point = exchanged_[0].current;  // x_k
  bool ok = true;
  for (std::uint32_t call = 0; call < config_.phase_batches && ok; ++call) {
    const std::span<float> out = call == 0 ? gradient_ : batch_gradient_;
    ok = options_.gradient(options_.user, point, round_, call, out).ok() && AllFinite(out);
    if (ok && call > 0) {
      for (std::size_t i = 0; i < gradient_.size(); ++i) gradient_[i] += batch_gradient_[i];
    }
  }
  if (ok && config_.phase_batches > 1) {
    const float scale = 1.0f / static_cast<float>(config_.phase_batches);
    for (float& g : gradient_) g *= scale;
  }
  return ok && AllFinite(gradient_);
}

void GossipPeerSession::StartStep(TimeNs now) {
  if (step_ == 0) {
    // g_k at x_k, before x_k leaves, as the frame's work_samples tells a simulator.
    const bool gradient_ok = ComputeGradient();
    if (!gradient_ok) ++counters_.gradient_errors;
    rule_->BeginRound(RuleState(), gradient_ok);
    if (!tracker_start_.empty() && config_.gossip_steps > 1) {
      std::copy(exchanged_[1].current.begin(), exchanged_[1].current.end(), tracker_start_.begin());
    }
  }

  const std::uint64_t step = CurrentStep();
  const auto slot = static_cast<std::size_t>(step & 1u);
  // Any undrained frame of step s-2 in this slot is superseded (drivers drain after every call,
  // so this only matters for one that does not).
  for (std::size_t k = 0; k < config_.mixing.degree; ++k) {
    for (std::size_t v = 0; v < vectors_; ++v) ClearPending(k, PendingBit(v, slot));
  }
  frame_steps_[slot] = step;
  frame_work_[slot] = 0;
  for (Exchanged& vector : exchanged()) vector.frames[slot] = {};
  if (config_.mixing.degree > 0) {
    for (std::size_t v = 0; v < vectors_; ++v) {
      Exchanged& vector = exchanged_[v];
      const wire::FrameHeader header{id(), round_, sequence_++};
      const wire::PayloadMessage message =
          wire::PayloadMessage::GossipExchange({0, step_, vector.kind});
      const Result<std::span<const std::byte>> frame =
          compressed() ? BuildDeltaFrame(v, slot, header, message)
                       : BuildFrame(*vector.builders[slot], header, message, vector.current);
      if (!frame.ok()) {
        // The builder was sized for exactly this frame, so only a codec refusing the delta
        // (values beyond what it can encode: a diverging run) makes this fail.
        Finish(wire::LeaveReason::kFailure,
               compressed()
                   ? Status::DataLoss("a delta does not encode: the run diverged")
                   : Status::Internal("a gossip frame did not fit the builder sized for it"));
        return;
      }
      vector.frames[slot] = frame.value();
      for (std::size_t k = 0; k < config_.mixing.degree; ++k) {
        if ((live_ & Bit(k)) != 0) SetPending(k, PendingBit(v, slot));
      }
    }
    if (step_ == 0) {
      frame_work_[slot] = std::uint64_t{options_.samples_per_step} * config_.phase_batches;
    }
  }
  if (compressed()) {  // neighbours already past this round: their copies hold its delta
    for (std::size_t k = 0; k < config_.mixing.degree; ++k) {
      for (std::size_t v = 0; v < vectors_; ++v) CountInIfAhead(k, v);
    }
  }
  deadline_ = SaturatingAdd(now, config_.neighbour_deadline_ns);
}

Result<std::span<const std::byte>> GossipPeerSession::BuildFrame(
    wire::FrameBuilder& builder, const wire::FrameHeader& header,
    const wire::PayloadMessage& message, std::span<const float> values) const {
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans,
                     builder.BeginPayloadFrame(header, message, ModelCodec(), config_.layout));
  std::copy(values.begin(), values.end(), spans.values.begin());
  return builder.FinishPayloadFrame();
}

void GossipPeerSession::MixStep(Exchanged& vector) {
  // Against public copies the step's mix is the consensus sum, which the rule applies.
  if (compressed()) return;
  const MixingRow& row = config_.mixing;
  // Re-weighting: each missed neighbour's W_ij joins the diagonal (ascending neighbour order, so
  // the same misses give the same float on every run).
  float self_weight = row.self_weight;
  for (std::size_t k = 0; k < row.degree; ++k) {
    if ((vector.heard & Bit(k)) == 0) self_weight += row.weights[k];
  }
  const std::span<float> z = vector.current;
  if (vector.previous.empty()) {  // eta_g = 0: plain gossip
    for (std::size_t i = 0; i < z.size(); ++i) z[i] = vector.mix[i] + self_weight * z[i];
    return;
  }
  // Z_{r+1} = (1 + eta) W Z_r - eta Z_{r-1}, with Z_{-1} = Z_0 in a round's first step.
  const float eta = config_.accel;
  const float momentum = 1.0f + eta;
  const bool first = step_ == 0;
  for (std::size_t i = 0; i < z.size(); ++i) {
    const float now_value = z[i];
    const float before = first ? now_value : vector.previous[i];
    z[i] = momentum * (vector.mix[i] + self_weight * now_value) - eta * before;
    vector.previous[i] = now_value;
  }
}

void GossipPeerSession::CloseStep(TimeNs now, bool deadline_passed) {
  const MixingRow& row = config_.mixing;
  std::uint64_t heard_all = all_neighbours_;
  for (const Exchanged& vector : exchanged()) heard_all &= vector.heard;
  const auto heard = static_cast<std::uint32_t>(std::popcount(heard_all));
  const std::uint32_t missed = row.degree - heard;

  // The model first: its update may read y_k, which for R = 1 is the tracker's working vector
  // before its own step.
  const internal::GossipState state = RuleState();
  for (std::size_t v = 0; v < vectors_; ++v) {
    MixStep(exchanged_[v]);
    rule_->AfterMix(state, v);
  }

  ++counters_.steps_completed;
  counters_.neighbours_heard += heard;
  counters_.neighbours_missed += missed;
  if (missed > 0) ++counters_.reweighted_steps;
  if (deadline_passed) ++counters_.deadline_closes;
  round_heard_ += heard;
  round_missed_ += missed;
  round_deadline_passed_ = round_deadline_passed_ || deadline_passed;

  // A diverged peer would send NaN forever (which its neighbours reject); stop it, loudly.
  for (const Exchanged& vector : exchanged()) {
    if (!AllFinite(vector.current)) {
      Finish(wire::LeaveReason::kFailure,
             Status::DataLoss("the model diverged: a vector holds a NaN or an infinity"));
      return;
    }
  }
  // The early vectors of step s+1 become the current step's. CHOCO and BEER have no early
  // accumulator: StartStep counts neighbours that are ahead in from their copies.
  for (Exchanged& vector : exchanged()) {
    if (vector.next_mix.empty()) {
      std::fill(vector.mix.begin(), vector.mix.end(), 0.0f);
    } else {
      std::swap(vector.mix, vector.next_mix);
      std::fill(vector.next_mix.begin(), vector.next_mix.end(), 0.0f);
    }
    vector.heard = vector.heard_next;
    vector.heard_next = 0;
  }
  if (state.last_step) {
    FinishRound(now);
    if (phase_ != GossipPhase::kRunning) return;
  } else {
    ++step_;
  }
  StartStep(now);
}

void GossipPeerSession::FinishRound(TimeNs now) {
  ++counters_.rounds_completed;
  const GossipRoundEvent event{round_,
                               now,
                               round_heard_,
                               round_missed_,
                               round_deadline_passed_,
                               counters_.bytes_sent,
                               counters_.bytes_received};
  round_log_.Push(event, counters_.round_events_dropped);
  round_heard_ = 0;
  round_missed_ = 0;
  round_deadline_passed_ = false;
  if (config_.gossip_steps > 1) {  // x_{k+1} becomes the round-start model
    std::copy(exchanged_[0].current.begin(), exchanged_[0].current.end(), model_start_.begin());
  }
  step_ = 0;
  ++round_;
  if (round_ >= config_.rounds) Finish(wire::LeaveReason::kDone, Status::Ok());
}

void GossipPeerSession::Finish(wire::LeaveReason reason, Status status) {
  status_ = status;
  phase_ = GossipPhase::kFinished;
  deadline_ = kNever;
  const wire::FrameHeader header{id(), round_, sequence_++};
  const Result<std::span<const std::byte>> leave =
      leave_builder_->EncodeLeave(header, wire::LeaveInfo{reason});
  leave_frame_ = leave.ok() ? leave.value() : std::span<const std::byte>();
  if (leave_frame_.empty()) return;
  for (std::size_t k = 0; k < config_.mixing.degree; ++k) {
    if ((live_ & Bit(k)) != 0) SetPending(k, kPendingLeave);
  }
}

}  // namespace edgesgd::protocol
