// GossipPeerSession, the exchange against public copies (CHOCO, BEER): building and applying
// deltas, the consensus terms, and resynchronising a copy that missed one.

#include <algorithm>

#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/wire/frame_decoder.h"
#include "gossip/gossip_rule.h"
#include "session_util.h"

namespace edgesgd::protocol {

using internal::AllFinite;
using internal::Bit;

Result<std::span<const std::byte>> GossipPeerSession::BuildDeltaFrame(
    std::size_t vector_index, std::size_t slot, const wire::FrameHeader& header,
    const wire::PayloadMessage& message) {
  // The consensus accumulator is empty until the round's first term (added after this), so it
  // holds the encoder's input z - ẑ_i meanwhile; x_k itself stays the round's model.
  Exchanged& vector = exchanged_[vector_index];
  wire::FrameBuilder& builder = *vector.builders[slot];
  const std::span<const float> z = vector.current;
  const std::span<float> input = vector.mix;
  const std::span<float> own_copy = vector.own_copy;
  if (!config_.public_copies) std::fill(own_copy.begin(), own_copy.end(), 0.0f);
  rule_->DeltaInput(RuleState(), z, own_copy, input);
  const CodecRegistry& codecs = *options_.codecs;
  EDGESGD_TRY_ASSIGN(const CodecParams params,
                     codecs.RoundParams(config_.codec, round_, config_.rounds, input));
  const CodecContext context{config_.seed, round_, id()};
  EDGESGD_TRY_ASSIGN(const std::span<const std::byte> frame,
                     builder.EncodePayloadFrame(header, message, codecs, params, config_.layout,
                                                context, input, codec_scratch_));
  std::fill(input.begin(), input.end(), 0.0f);
  // x̂_i advances by the frame's bytes, decoded exactly as its receivers decode them.
  EDGESGD_TRY_ASSIGN(const wire::FrameView view, wire::DecodeFrame(frame, max_receive_bytes_));
  EDGESGD_TRY_ASSIGN(const CodecParams sent,
                     ParamsForPayload(config_.codec, view.payload.codec, view.payload.layout,
                                      view.payload.header));
  EDGESGD_TRY(ApplyDelta(sent, view.payload.view, round_, id(), own_copy));
  ++vector.own_rounds;
  return frame;
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

void GossipPeerSession::CountInIfAhead(std::size_t index, std::size_t vector_index) {
  Exchanged& vector = exchanged_[vector_index];
  if (phase_ != GossipPhase::kRunning || vector.copy_rounds[index] <= round_ ||
      (vector.heard & Bit(index)) != 0) {
    return;
  }
  vector.heard |= Bit(index);
  AddConsensusTerm(index, vector_index);
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

std::span<const float> GossipPeerSession::public_copy(PeerId peer, std::size_t vector) const {
  if (!compressed() || vector >= vectors_) return {};
  const Exchanged& copies = exchanged_[vector];
  if (peer == id()) return copies.own_copy;
  const int index = NeighbourIndex(peer);
  return index < 0 ? std::span<const float>() : copies.copies[static_cast<std::size_t>(index)];
}

std::uint64_t GossipPeerSession::public_copy_rounds(PeerId peer, std::size_t vector) const {
  if (!compressed() || vector >= vectors_) return 0;
  const Exchanged& copies = exchanged_[vector];
  if (peer == id()) return copies.own_rounds;
  const int index = NeighbourIndex(peer);
  return index < 0 ? 0 : copies.copy_rounds[static_cast<std::size_t>(index)];
}

}  // namespace edgesgd::protocol
