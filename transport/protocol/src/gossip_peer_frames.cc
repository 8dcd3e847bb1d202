// GossipPeerSession, the frames from neighbours: exchanges, compressed deltas, public copies and
// their requests, leaves, and the rejections of whatever does not fit the current step.

#include <algorithm>
#include <bit>

#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/wire/frame_decoder.h"
#include "session_util.h"

namespace edgesgd::protocol {

using internal::AllFinite;
using internal::Bit;

int GossipPeerSession::NeighbourIndex(PeerId peer) const {
  const std::span<const PeerId> ids = config_.mixing.neighbour_ids();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] == peer) return static_cast<int>(k);
  }
  return -1;
}

int GossipPeerSession::ExchangedIndex(const wire::GossipInfo& info) const {
  if (info.phase != 0 || info.step >= config_.gossip_steps) return -1;
  for (std::size_t v = 0; v < vectors_; ++v) {
    if (exchanged_[v].kind == info.vector) return static_cast<int>(v);
  }
  return -1;
}

void GossipPeerSession::HandleExchange(std::size_t index, const wire::FrameView& view, TimeNs now) {
  const PeerId from = config_.mixing.neighbours[index];
  const std::uint32_t round = view.header.round;
  const wire::GossipInfo& info = view.message.gossip;
  // Resynchronisation frames name the copy's vector in `step`: 0 the model, 1 BEER's tracker.
  if (ResynchronisesCopies(config_) && info.phase == 0 && info.step < vectors_) {
    if (info.vector == wire::GossipVector::kCopyRequest) {
      HandleCopyRequest(index, info.step, view, now);
      return;
    }
    if (info.vector == wire::GossipVector::kModelCopy) {
      HandleCopy(index, info.step, view, now);
      return;
    }
  }
  const int vector_index = ExchangedIndex(info);
  if (vector_index < 0) {
    Reject(from, GossipRejectReason::kWrongExchange, round, now);
    return;
  }
  if (compressed()) {
    HandleDelta(index, static_cast<std::size_t>(vector_index), view, now);
    return;
  }
  if (view.payload.codec != CodecIdOf(ModelCodec()) ||
      view.payload.layout != PayloadLayout::kDense) {
    Reject(from, GossipRejectReason::kWrongCodec, round, now);
    return;
  }
  // Cheap step checks before the O(d) payload scan. Subtractions only: the current step + 1 could
  // wrap.
  const std::uint64_t step = StepIndex(round, view.message.gossip.step);
  const std::uint64_t current = CurrentStep();
  if (step < current) {
    Reject(from, current - step == 1 ? GossipRejectReason::kLate : GossipRejectReason::kStale,
           round, now);
    return;
  }
  if (phase_ == GossipPhase::kFinished || step - current > 1 || round >= config_.rounds) {
    Reject(from, GossipRejectReason::kFuture, round, now);
    return;
  }
  const bool next = step != current;
  Exchanged& vector = exchanged_[static_cast<std::size_t>(vector_index)];
  std::uint64_t& heard = next ? vector.heard_next : vector.heard;
  if ((heard & Bit(index)) != 0) {
    Reject(from, GossipRejectReason::kDuplicate, round, now);
    return;
  }
  const PayloadView& payload = view.payload.view;
  if (payload.values.size() != vector.current.size() || !payload.indices.empty() ||
      !payload.words.empty() || !payload.scales.empty() || !AllFinite(payload.values)) {
    Reject(from, GossipRejectReason::kBadPayload, round, now);
    return;
  }
  // Mixed in now, so a neighbour's vector never needs a copy: the frame's bytes are only valid
  // during this call.
  const float weight = config_.mixing.weights[index];
  const std::span<float> mix = next ? vector.next_mix : vector.mix;
  for (std::size_t i = 0; i < mix.size(); ++i) mix[i] += weight * payload.values[i];
  heard |= Bit(index);
  ++counters_.models_accepted;
  if (next) ++counters_.models_buffered;
  ReviveIfBack(index, step);
}

void GossipPeerSession::HandleDelta(std::size_t index, std::size_t vector_index,
                                    const wire::FrameView& view, TimeNs now) {
  const PeerId from = config_.mixing.neighbours[index];
  const std::uint32_t round = view.header.round;
  const wire::EncodedPayload& payload = view.payload;
  const Result<CodecParams> params =
      ParamsForPayload(config_.codec, payload.codec, payload.layout, payload.header);
  if (!params.ok()) {
    Reject(from, GossipRejectReason::kWrongCodec, round, now);
    return;
  }
  if (round >= config_.rounds) {
    Reject(from, GossipRejectReason::kFuture, round, now);
    return;
  }
  Exchanged& vector = exchanged_[vector_index];
  // Every holder applies the sender's deltas in round order, so the copies agree bit for bit.
  // Without public copies each delta replaces the last one, so a gap loses nothing.
  const std::uint64_t expected = vector.copy_rounds[index];
  if (round < expected) {
    Reject(from, GossipRejectReason::kDuplicate, round, now);
    return;
  }
  if (round > expected && config_.public_copies) {
    Reject(from, GossipRejectReason::kOutOfOrder, round, now);
    // The neighbour is sending, so it is back if it was lost; its copy needs resynchronising.
    ReviveIfBack(index, StepIndex(round, 0));
    RequestCopy(index, vector_index);
    return;
  }
  const std::span<float> copy = vector.copies[index];
  if (!config_.public_copies) std::fill(copy.begin(), copy.end(), 0.0f);
  if (!ApplyDelta(params.value(), payload.view, round, from, copy).ok()) {
    Reject(from, GossipRejectReason::kBadPayload, round, now);
    return;
  }
  vector.copy_rounds[index] = std::uint64_t{round} + 1;
  ++counters_.models_accepted;
  // This round's own delta is applied once the round has started; a neighbour ahead (or one heard
  // before Start) is counted in when this peer's round starts (StartStep).
  if (phase_ == GossipPhase::kRunning && round == round_) {
    vector.heard |= Bit(index);
    AddConsensusTerm(index, vector_index);
  } else if (round < round_) {
    ++counters_.late_deltas;
  } else {
    ++counters_.models_buffered;
  }
  ReviveIfBack(index, StepIndex(round, 0));
}

void GossipPeerSession::HandleCopyRequest(std::size_t index, std::size_t vector_index,
                                          const wire::FrameView& view, TimeNs now) {
  const PeerId from = config_.mixing.neighbours[index];
  const std::uint32_t round = view.header.round;
  const wire::EncodedPayload& payload = view.payload;
  if (payload.codec != CodecIdOf(ModelCodec()) || payload.layout != PayloadLayout::kDense) {
    Reject(from, GossipRejectReason::kWrongCodec, round, now);
    return;
  }
  if (payload.view.values.size() != 1 || !payload.view.indices.empty() ||
      !payload.view.words.empty() || !payload.view.scales.empty()) {
    Reject(from, GossipRejectReason::kBadPayload, round, now);
    return;
  }
  if (round >= config_.rounds) {
    Reject(from, GossipRejectReason::kFuture, round, now);
    return;
  }
  if (phase_ == GossipPhase::kFinished) return;  // its Leave tells the neighbour
  ReviveIfBack(index, StepIndex(round, 0));
  // Frames built in an earlier call have been handed out already, so the builder is free; within
  // one call a second request gets the same copy.
  if ((pending_[index] & PendingCopy(vector_index)) != 0) return;
  Exchanged& vector = exchanged_[vector_index];
  const wire::FrameHeader header{id(), static_cast<std::uint32_t>(vector.own_rounds), sequence_++};
  const wire::GossipInfo info{0, static_cast<std::uint32_t>(vector_index),
                              wire::GossipVector::kModelCopy};
  const Result<std::span<const std::byte>> frame = BuildFrame(
      *vector.copy_builder, header, wire::PayloadMessage::GossipExchange(info), vector.own_copy);
  if (!frame.ok()) return;  // sized for exactly this frame: cannot fail
  vector.copy_frame = frame.value();
  SetPending(index, PendingCopy(vector_index));
}

void GossipPeerSession::HandleCopy(std::size_t index, std::size_t vector_index,
                                   const wire::FrameView& view, TimeNs now) {
  const PeerId from = config_.mixing.neighbours[index];
  const std::uint32_t held = view.header.round;  // the sender's deltas of rounds 0..held-1
  const wire::EncodedPayload& payload = view.payload;
  if (payload.codec != CodecIdOf(ModelCodec()) || payload.layout != PayloadLayout::kDense) {
    Reject(from, GossipRejectReason::kWrongCodec, held, now);
    return;
  }
  Exchanged& vector = exchanged_[vector_index];
  const std::span<float> copy = vector.copies[index];
  if (payload.view.values.size() != copy.size() || !payload.view.indices.empty() ||
      !payload.view.words.empty() || !payload.view.scales.empty() ||
      !AllFinite(payload.view.values)) {
    Reject(from, GossipRejectReason::kBadPayload, held, now);
    return;
  }
  if (held > config_.rounds) {
    Reject(from, GossipRejectReason::kFuture, held, now);
    return;
  }
  if (held < vector.copy_rounds[index]) {  // this peer's copy is already newer
    Reject(from, GossipRejectReason::kStale, held, now);
    return;
  }
  std::copy(payload.view.values.begin(), payload.view.values.end(), copy.begin());
  vector.copy_rounds[index] = held;
  vector.awaiting_copy &= ~Bit(index);
  ++counters_.copies_applied;
  if (held > 0) ReviveIfBack(index, StepIndex(held - 1, 0));
  CountInIfAhead(index, vector_index);
}

void GossipPeerSession::RequestCopy(std::size_t index, std::size_t vector_index) {
  if (phase_ == GossipPhase::kFinished) return;
  Exchanged& vector = exchanged_[vector_index];
  if ((vector.awaiting_copy & Bit(index)) != 0 && vector.copy_requested_round[index] == round_) {
    return;
  }
  const PendingBits bit = PendingRequest(vector_index);
  if ((pending_[index] & bit) == 0) {
    const wire::FrameHeader header{id(), round_, sequence_++};
    const wire::GossipInfo info{0, static_cast<std::uint32_t>(vector_index),
                                wire::GossipVector::kCopyRequest};
    const Result<PayloadSpans> spans = vector.request_builder->BeginPayloadFrame(
        header, wire::PayloadMessage::GossipExchange(info), ModelCodec(),
        TensorLayout::Single(1).value());
    if (!spans.ok()) return;  // sized for exactly this frame: cannot fail
    spans.value().values[0] = 0.0f;
    const Result<std::span<const std::byte>> frame = vector.request_builder->FinishPayloadFrame();
    if (!frame.ok()) return;
    vector.request_frame = frame.value();
    SetPending(index, bit);
  }
  vector.awaiting_copy |= Bit(index);
  vector.copy_requested_round[index] = round_;
  ++counters_.copy_requests_sent;
}

void GossipPeerSession::CountInIfAhead(std::size_t index, std::size_t vector_index) {
  Exchanged& vector = exchanged_[vector_index];
  if (phase_ != GossipPhase::kRunning || vector.copy_rounds[index] <= round_ ||
      (vector.heard & Bit(index)) != 0) {
    return;
  }
  vector.heard |= Bit(index);
  AddConsensusTerm(index, vector_index);
}

void GossipPeerSession::ReviveIfBack(std::size_t index, std::uint64_t step) {
  // A lost neighbour's vectors are still good data, but only one for a step it cannot have
  // sent before it was lost (at most one step ahead of this peer then) shows that it is back:
  // a frame that was merely in flight at the loss must not make every later step wait for a
  // dead peer's deadline.
  if ((live_ & Bit(index)) != 0 || step < lost_step_[index] + 2) return;
  live_ |= Bit(index);
  ++counters_.revivals;
  // If it is in the current step it has not had this step's vectors (lost neighbours are not
  // sent to); one a step ahead already had them or no longer needs them.
  if (step == CurrentStep() && phase_ == GossipPhase::kRunning) {
    const auto slot = static_cast<std::size_t>(step & 1u);
    for (std::size_t v = 0; v < vectors_; ++v) SetPending(index, PendingBit(v, slot));
  }
}

Status GossipPeerSession::ApplyDelta(const CodecParams& params, const PayloadView& payload,
                                     std::uint32_t round, PeerId sender, std::span<float> copy) {
  const CodecContext context{config_.seed, round, sender};
  EDGESGD_TRY(options_.codecs->CheckShared(params, config_.layout, context, payload));
  return options_.codecs->DecodeAdd(params, config_.layout, context, payload, 1.0f, copy,
                                    codec_scratch_);
}

void GossipPeerSession::AddConsensusTerm(std::size_t index, std::size_t vector_index) {
  Exchanged& vector = exchanged_[vector_index];
  const float weight = config_.mixing.weights[index];
  const std::span<const float> copy = vector.copies[index];
  const std::span<const float> own = vector.own_copy;
  const std::span<float> mix = vector.mix;
  for (std::size_t i = 0; i < mix.size(); ++i) mix[i] += weight * (copy[i] - own[i]);
}

void GossipPeerSession::HandleLeave(std::size_t index) {
  ++counters_.leaves_received;
  MarkLost(index);
}

void GossipPeerSession::MarkLost(std::size_t index) {
  if ((live_ & Bit(index)) != 0) lost_step_[index] = CurrentStep();
  live_ &= ~Bit(index);
  ClearPending(index, pending_[index]);
}

void GossipPeerSession::Reject(PeerId peer, GossipRejectReason reason, std::uint32_t round,
                               TimeNs now) {
  ++counters_.rejected[static_cast<std::size_t>(reason)];
  const GossipRejectEvent event{peer, reason, round, now};
  reject_log_.Push(event, counters_.reject_events_dropped);
}

}  // namespace edgesgd::protocol
