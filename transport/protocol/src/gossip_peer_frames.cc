// GossipPeerSession, the frames: those from neighbours (dense exchanges, leaves, and the
// rejections of whatever does not fit the current step; deltas and copies go on to
// gossip_peer_copies.cc) and the queue of outgoing ones.

#include <algorithm>
#include <bit>
#include <utility>

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

// ---- Outgoing frames ----

bool GossipPeerSession::DoPollFrame(OutgoingFrame& out) {
  if (pending_frames_ == 0) return false;
  const std::size_t degree = config_.mixing.degree;
  // Copies and requests first: a delta queued with a copy must reach the holder after it.
  for (std::size_t order = 0; order < 2 * vectors_; ++order) {
    const bool copy = order < vectors_;
    const Exchanged& vector = exchanged_[order % vectors_];
    const PendingBits bit = copy ? PendingCopy(order % vectors_) : PendingRequest(order % vectors_);
    for (std::size_t k = 0; k < degree; ++k) {
      if ((pending_[k] & bit) == 0) continue;
      ClearPending(k, bit);
      const std::span<const std::byte> bytes = copy ? vector.copy_frame : vector.request_frame;
      out.to = config_.mixing.neighbours[k];
      out.bytes = bytes;
      out.work_samples = 0;
      ++counters_.frames_sent;
      counters_.bytes_sent += bytes.size();
      if (copy) ++counters_.copies_sent;
      return true;
    }
  }
  // Oldest step first across all neighbours (model, then tracker), then the newer step, then
  // Leaves: every neighbour gets step s's vectors before anyone gets step s+1's, which is what a
  // FIFO uplink wants.
  const std::size_t older = frame_steps_[0] <= frame_steps_[1] ? 0 : 1;
  for (std::size_t order = 0; order < 2 * vectors_ + 1; ++order) {
    const bool leave = order == 2 * vectors_;
    const std::size_t slot = order < vectors_ ? older : 1 - older;
    const std::size_t vector = order % vectors_;
    const PendingBits bit = leave ? kPendingLeave : PendingBit(vector, slot);
    for (std::size_t k = 0; k < degree; ++k) {
      if ((pending_[k] & bit) == 0) continue;
      ClearPending(k, bit);
      std::span<const std::byte> bytes;
      std::uint64_t work = 0;
      if (leave) {
        bytes = leave_frame_;
      } else {
        bytes = exchanged_[vector].frames[slot];
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

void GossipPeerSession::SetPending(std::size_t index, PendingBits bits) {
  const auto added = static_cast<PendingBits>(bits & ~pending_[index]);
  pending_frames_ += static_cast<std::size_t>(std::popcount(added));
  pending_[index] = static_cast<PendingBits>(pending_[index] | bits);
}

void GossipPeerSession::ClearPending(std::size_t index, PendingBits bits) {
  const auto removed = static_cast<PendingBits>(bits & pending_[index]);
  pending_frames_ -= static_cast<std::size_t>(std::popcount(removed));
  pending_[index] = static_cast<PendingBits>(pending_[index] & ~bits);
}

}  // namespace edgesgd::protocol
