#include "edgesgd/protocol/gossip_peer_session.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "edgesgd/wire/frame_decoder.h"
#include "session_util.h"

namespace edgesgd::protocol {
namespace {

using internal::AllFinite;
using internal::SaturatingAdd;

constexpr float kMaxFloat = std::numeric_limits<float>::max();

constexpr std::uint64_t Bit(std::size_t index) { return std::uint64_t{1} << index; }

// Appends to a fixed ring, overwriting (and counting) the oldest entry when it is full.
template <typename T, std::size_t N>
void PushRing(std::array<T, N>& ring, std::size_t& head, std::size_t& size, const T& value,
              std::uint64_t& dropped) {
  if (size == N) {
    ring[head] = value;
    head = (head + 1) % N;
    ++dropped;
    return;
  }
  ring[(head + size) % N] = value;
  ++size;
}

template <typename T, std::size_t N>
bool PopRing(std::array<T, N>& ring, std::size_t& head, std::size_t& size, T& out) {
  if (size == 0) return false;
  out = ring[head];
  head = (head + 1) % N;
  --size;
  return true;
}

constexpr std::uint8_t SlotBit(std::size_t slot) {
  return static_cast<std::uint8_t>(std::uint8_t{1} << slot);
}

}  // namespace

const char* GossipRejectReasonName(GossipRejectReason reason) {
  switch (reason) {
    case GossipRejectReason::kMalformed:
      return "malformed";
    case GossipRejectReason::kUnknownSender:
      return "unknown_sender";
    case GossipRejectReason::kUnexpectedMessage:
      return "unexpected_message";
    case GossipRejectReason::kWrongExchange:
      return "wrong_exchange";
    case GossipRejectReason::kWrongCodec:
      return "wrong_codec";
    case GossipRejectReason::kBadPayload:
      return "bad_payload";
    case GossipRejectReason::kLate:
      return "late";
    case GossipRejectReason::kStale:
      return "stale";
    case GossipRejectReason::kDuplicate:
      return "duplicate";
    case GossipRejectReason::kFuture:
      return "future";
  }
  return "unknown";
}

ConfigCheck ValidateGossipConfig(const GossipConfig& config) {
  if (config.algorithm != GossipAlgorithm::kDpsgd) {
    return ConfigCheck::Invalid("unknown gossip algorithm");
  }
  if (const ConfigCheck row = ValidateMixingRow(config.mixing); !row.ok()) return row;
  if (config.layout.tensor_count() == 0) return ConfigCheck::Invalid("the model has no tensors");
  if (wire::MaxFrameBytes(ModelCodec(), config.layout) == 0) {
    return ConfigCheck::Invalid("the model is too large for one frame (1 GiB limit)");
  }
  if (config.rounds < 1) return ConfigCheck::Invalid("rounds must be at least 1");
  // Written so that NaN fails.
  if (!(config.learning_rate >= 0.0f && config.learning_rate <= kMaxFloat)) {
    return ConfigCheck::Invalid("learning rate must be non-negative and finite");
  }
  if (config.neighbour_deadline_ns == 0) {
    return ConfigCheck::Invalid("neighbour deadline must be > 0");
  }
  return ConfigCheck::Ok();
}

// ---- Init ----

ConfigCheck GossipPeerSession::Init(Arena& arena, const GossipConfig& config,
                                    const GossipOptions& options) {
  if (phase_ != GossipPhase::kUninitialized) {
    return ConfigCheck{Status::FailedPrecondition(), "the gossip peer is already initialized"};
  }
  if (const ConfigCheck check = ValidateGossipConfig(config); !check.ok()) return check;
  if (options.gradient == nullptr) return ConfigCheck::Invalid("a gradient callback is required");
  if (options.initial_model.size() != config.layout.dimension()) {
    return ConfigCheck::Invalid("the initial model's size is not the layout's dimension");
  }
  if (!AllFinite(options.initial_model)) {
    return ConfigCheck::Invalid("the initial model is not finite");
  }
  if (arena.sealed()) return ConfigCheck{Status::FailedPrecondition(), "the arena is sealed"};
  const std::size_t needed = ArenaBytes(config);
  if (needed == 0) return ConfigCheck::Invalid("the configuration cannot be sized");
  if (arena.remaining_bytes() < needed) {
    return ConfigCheck{Status::ResourceExhausted(),
                       "the arena is smaller than GossipPeerSession::ArenaBytes"};
  }
  config_ = config;
  options_ = options;
  options_.initial_model = {};  // copied below; the caller's buffer need not outlive Init
  if (!TakeBuffers(arena).ok()) {
    return ConfigCheck{Status::Internal(), "arena accounting disagrees with ArenaBytes"};
  }
  std::copy(options.initial_model.begin(), options.initial_model.end(), model_.begin());
  all_neighbours_ = config_.mixing.degree == 0 ? 0 : (Bit(config_.mixing.degree) - 1);
  live_ = all_neighbours_;
  max_receive_bytes_ = MaxFrameBytes(config_);
  phase_ = GossipPhase::kReady;
  return ConfigCheck::Ok();
}

Status GossipPeerSession::TakeBuffers(Arena& arena) {
  const std::size_t d = config_.layout.dimension();
  EDGESGD_TRY_ASSIGN(model_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(gradient_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(current_mix_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(next_mix_, arena.Allocate<float>(d));
  const std::size_t builder_bytes = wire::FrameBuilderBytes(ModelCodec(), config_.layout);
  for (std::optional<wire::FrameBuilder>& builder : model_builders_) {
    EDGESGD_TRY_ASSIGN(std::span<std::byte> buffer, arena.AllocateBytes(builder_bytes));
    builder.emplace(buffer);
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
  StartRound(now);
  Advance(now);
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
  Advance(now);
}

void GossipPeerSession::DoPeerLost(PeerId peer, TimeNs now) {
  if (phase_ == GossipPhase::kUninitialized) return;
  const int index = NeighbourIndex(peer);
  if (index < 0) return;
  const auto neighbour = static_cast<std::size_t>(index);
  if ((live_ & Bit(neighbour)) != 0) ++counters_.neighbours_lost;
  MarkLost(neighbour);
  Advance(now);
}

void GossipPeerSession::DoTimer(TimeNs now) { Advance(now); }

bool GossipPeerSession::DoPollFrame(OutgoingFrame& out) {
  if (pending_frames_ == 0) return false;
  // Oldest round first across all neighbours, then the newer round, then Leaves: every
  // neighbour gets round t's model before anyone gets round t+1's, which is what a FIFO uplink
  // wants.
  const std::size_t older = frame_rounds_[0] <= frame_rounds_[1] ? 0 : 1;
  const std::array<std::uint8_t, 3> order = {SlotBit(older), SlotBit(1 - older), kPendingLeave};
  const std::size_t degree = config_.mixing.degree;
  for (const std::uint8_t bit : order) {
    for (std::size_t k = 0; k < degree; ++k) {
      if ((pending_[k] & bit) == 0) continue;
      ClearPending(k, bit);
      std::span<const std::byte> bytes;
      std::uint64_t work = 0;
      if (bit == kPendingLeave) {
        bytes = leave_frame_;
      } else {
        const std::size_t slot = bit == kPendingSlot0 ? 0 : 1;
        bytes = model_frames_[slot];
        work = std::exchange(frame_work_[slot], std::uint64_t{0});
      }
      if (bytes.empty()) continue;
      out.to = config_.mixing.neighbours[k];
      out.bytes = bytes;
      out.work_samples = work;
      ++counters_.frames_sent;
      counters_.bytes_sent += bytes.size();
      return true;
    }
  }
  return false;
}

TimeNs GossipPeerSession::DoNextWakeup() const {
  return phase_ == GossipPhase::kRunning ? deadline_ : kNever;
}

bool GossipPeerSession::PollRejectEvent(GossipRejectEvent& out) {
  return PopRing(reject_log_, reject_head_, reject_size_, out);
}

bool GossipPeerSession::PollRoundEvent(GossipRoundEvent& out) {
  return PopRing(round_log_, round_head_, round_size_, out);
}

bool GossipPeerSession::IsLive(PeerId peer) const {
  const int index = NeighbourIndex(peer);
  return index >= 0 && (live_ & Bit(static_cast<std::size_t>(index))) != 0;
}

std::uint32_t GossipPeerSession::heard_count() const {
  return static_cast<std::uint32_t>(std::popcount(heard_current_));
}

// ---- Frames from neighbours ----

int GossipPeerSession::NeighbourIndex(PeerId peer) const {
  const std::span<const PeerId> ids = config_.mixing.neighbour_ids();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] == peer) return static_cast<int>(k);
  }
  return -1;
}

bool GossipPeerSession::IsExpectedExchange(const wire::GossipInfo& info) {
  return info.phase == 0 && info.step == 0 && info.vector == wire::GossipVector::kModel;
}

void GossipPeerSession::HandleExchange(std::size_t index, const wire::FrameView& view, TimeNs now) {
  const PeerId from = config_.mixing.neighbours[index];
  const std::uint32_t round = view.header.round;
  if (!IsExpectedExchange(view.message.gossip)) {
    Reject(from, GossipRejectReason::kWrongExchange, round, now);
    return;
  }
  if (view.payload.codec != CodecKind::kIdentity ||
      view.payload.kind != wire::PayloadKind::kDense) {
    Reject(from, GossipRejectReason::kWrongCodec, round, now);
    return;
  }
  // Cheap round checks before the O(d) payload scan. Subtractions only: round_ + 1 could wrap.
  if (round < round_) {
    Reject(from, round_ - round == 1 ? GossipRejectReason::kLate : GossipRejectReason::kStale,
           round, now);
    return;
  }
  if (phase_ == GossipPhase::kFinished || round - round_ > 1 || round >= config_.rounds) {
    Reject(from, GossipRejectReason::kFuture, round, now);
    return;
  }
  const bool next = round != round_;
  std::uint64_t& heard = next ? heard_next_ : heard_current_;
  if ((heard & Bit(index)) != 0) {
    Reject(from, GossipRejectReason::kDuplicate, round, now);
    return;
  }
  const PayloadView& payload = view.payload.view;
  if (payload.values.size() != model_.size() || !payload.indices.empty() ||
      !payload.words.empty() || !payload.scales.empty() || !AllFinite(payload.values)) {
    Reject(from, GossipRejectReason::kBadPayload, round, now);
    return;
  }
  // Mixed in now, so a neighbour's model never needs a copy: the frame's bytes are only valid
  // during this call.
  const float weight = config_.mixing.weights[index];
  const std::span<float> mix = next ? next_mix_ : current_mix_;
  for (std::size_t i = 0; i < mix.size(); ++i) mix[i] += weight * payload.values[i];
  heard |= Bit(index);
  ++counters_.models_accepted;
  if (next) ++counters_.models_buffered;

  // A lost neighbour's models are still good data, but only one for a round it cannot have
  // sent before it was lost (at most one round ahead of this peer then) shows that it is back:
  // a frame that was merely in flight at the loss must not make every later round wait for a
  // dead peer's deadline.
  if ((live_ & Bit(index)) == 0 && round - lost_round_[index] >= 2) {
    live_ |= Bit(index);
    ++counters_.revivals;
    // If it is in the current round it has not had this round's model (lost neighbours are not
    // sent to); one a round ahead already had it or no longer needs it.
    if (!next && phase_ == GossipPhase::kRunning) SetPending(index, SlotBit(round_ & 1u));
  }
}

void GossipPeerSession::HandleLeave(std::size_t index) {
  ++counters_.leaves_received;
  MarkLost(index);
}

void GossipPeerSession::MarkLost(std::size_t index) {
  if ((live_ & Bit(index)) != 0) lost_round_[index] = round_;
  live_ &= ~Bit(index);
  ClearPending(index, pending_[index]);
}

void GossipPeerSession::Reject(PeerId peer, GossipRejectReason reason, std::uint32_t round,
                               TimeNs now) {
  ++counters_.rejected[static_cast<std::size_t>(reason)];
  const GossipRejectEvent event{peer, reason, round, now};
  PushRing(reject_log_, reject_head_, reject_size_, event, counters_.reject_events_dropped);
}

// ---- Rounds ----

void GossipPeerSession::Advance(TimeNs now) {
  // Terminates: a round started here has a deadline after `now`, and it can only be complete
  // already when it has no neighbours or its models were buffered — and nothing is buffered
  // for the round after it (see the Memory note in the header).
  while (phase_ == GossipPhase::kRunning) {
    const bool complete = RoundComplete();
    if (!complete && now < deadline_) return;
    CloseRound(now, !complete);
  }
}

bool GossipPeerSession::RoundComplete() const {
  // Every live neighbour heard. With neighbours but none heard (all lost), the round waits for
  // its deadline instead: racing through the remaining rounds alone would leave nothing for a
  // neighbour that comes back.
  const bool nobody_waited_for = (live_ & ~heard_current_) == 0;
  return nobody_waited_for && (all_neighbours_ == 0 || heard_current_ != 0);
}

void GossipPeerSession::StartRound(TimeNs now) {
  // g_i at x_i(t), before x_i leaves, as the frame's work_samples tells a simulator.
  if (const Status status = options_.gradient(options_.user, model_, round_, 0, gradient_);
      !status.ok() || !AllFinite(gradient_)) {
    ++counters_.gradient_errors;
    std::fill(gradient_.begin(), gradient_.end(), 0.0f);
  }

  const std::size_t slot = round_ & 1u;
  // Any undrained frame of round t-2 in this slot is superseded (drivers drain after every
  // call, so this only matters for one that does not).
  for (std::size_t k = 0; k < config_.mixing.degree; ++k) ClearPending(k, SlotBit(slot));
  model_frames_[slot] = {};
  frame_rounds_[slot] = round_;
  frame_work_[slot] = 0;
  if (config_.mixing.degree > 0) {
    const wire::FrameHeader header{id(), round_, sequence_++};
    const wire::PayloadMessage message =
        wire::PayloadMessage::GossipExchange({0, 0, wire::GossipVector::kModel});
    const Result<std::span<const std::byte>> frame =
        BuildModelFrame(*model_builders_[slot], header, message);
    if (!frame.ok()) {
      // The builder was sized for exactly this frame: failing here is a bug, not bad input.
      Finish(wire::LeaveReason::kFailure, Status::Internal());
      return;
    }
    model_frames_[slot] = frame.value();
    frame_work_[slot] = options_.samples_per_step;
    for (std::size_t k = 0; k < config_.mixing.degree; ++k) {
      if ((live_ & Bit(k)) != 0) SetPending(k, SlotBit(slot));
    }
  }
  deadline_ = SaturatingAdd(now, config_.neighbour_deadline_ns);
}

Result<std::span<const std::byte>> GossipPeerSession::BuildModelFrame(
    wire::FrameBuilder& builder, const wire::FrameHeader& header,
    const wire::PayloadMessage& message) const {
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans,
                     builder.BeginPayloadFrame(header, message, ModelCodec(), config_.layout));
  std::copy(model_.begin(), model_.end(), spans.values.begin());
  return builder.FinishPayloadFrame();
}

void GossipPeerSession::CloseRound(TimeNs now, bool deadline_passed) {
  const MixingRow& row = config_.mixing;
  // Re-weighting: each missed neighbour's W_ij joins the diagonal (ascending neighbour order, so
  // the same misses give the same float on every run).
  float self_weight = row.self_weight;
  std::uint32_t missed = 0;
  for (std::size_t k = 0; k < row.degree; ++k) {
    if ((heard_current_ & Bit(k)) == 0) {
      self_weight += row.weights[k];
      ++missed;
    }
  }
  const std::uint32_t heard = row.degree - missed;
  const float lr = config_.learning_rate;
  for (std::size_t i = 0; i < model_.size(); ++i) {
    model_[i] = current_mix_[i] + self_weight * model_[i] - lr * gradient_[i];
  }

  ++counters_.rounds_completed;
  counters_.neighbours_heard += heard;
  counters_.neighbours_missed += missed;
  if (missed > 0) ++counters_.reweighted_rounds;
  if (deadline_passed) ++counters_.deadline_closes;
  const GossipRoundEvent event{
      round_, now, heard, missed, deadline_passed, counters_.bytes_sent, counters_.bytes_received};
  PushRing(round_log_, round_head_, round_size_, event, counters_.round_events_dropped);

  // A diverged peer would send NaN forever (which its neighbours reject); stop it, loudly.
  if (!AllFinite(model_)) {
    Finish(wire::LeaveReason::kFailure, Status::DataLoss());
    return;
  }
  // The early models of round t+1 become the current round's.
  std::swap(current_mix_, next_mix_);
  std::fill(next_mix_.begin(), next_mix_.end(), 0.0f);
  heard_current_ = heard_next_;
  heard_next_ = 0;
  ++round_;
  if (round_ >= config_.rounds) {
    Finish(wire::LeaveReason::kDone, Status::Ok());
    return;
  }
  StartRound(now);
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

// ---- Outgoing frames ----

void GossipPeerSession::SetPending(std::size_t index, std::uint8_t bits) {
  const auto added = static_cast<std::uint8_t>(bits & ~pending_[index]);
  pending_frames_ += static_cast<std::size_t>(std::popcount(added));
  pending_[index] = static_cast<std::uint8_t>(pending_[index] | bits);
}

void GossipPeerSession::ClearPending(std::size_t index, std::uint8_t bits) {
  const auto removed = static_cast<std::uint8_t>(bits & pending_[index]);
  pending_frames_ -= static_cast<std::size_t>(std::popcount(removed));
  pending_[index] = static_cast<std::uint8_t>(pending_[index] & ~bits);
}

}  // namespace edgesgd::protocol
