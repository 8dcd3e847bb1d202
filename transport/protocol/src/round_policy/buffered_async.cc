#include "edgesgd/protocol/round_policy/buffered_async.h"

#include <algorithm>
#include <utility>

#include "../session_util.h"

namespace edgesgd::protocol {

using internal::SaturatingAdd;

Status BufferedAsyncRoundPolicy::Check(const RunConfig& config,
                                       const ServerOptions& options) const {
  if (config.async.buffer > options.workers) {
    return Status::InvalidArgument(
        "the asynchronous buffer K is larger than the worker count: a version takes one update "
        "from each of K different workers");
  }
  return Status::Ok();
}

void BufferedAsyncRoundPolicy::StartRound(TimeNs now) {
  // Workers keep training across versions; a broadcast still owed goes out as the new
  // version's frame.
  for (ServerWorkerSlot& slot : slots()) {
    if (slot.in_flight() && outbox().Owes(PeerOf(slot), ServerOutbox::kBroadcast)) {
      slot.dispatched_round = current_round();
    }
  }
  dispatch_rng_ =
      CounterRng(config().seed, current_round(), 1, StreamId(RandomPurpose::kParticipation));
  Dispatch(now);
}

std::optional<RejectReason> BufferedAsyncRoundPolicy::RefuseUpdate(ServerWorkerSlot& slot,
                                                                   std::uint32_t round) {
  // Updates up to max_staleness versions old are aggregated; older ones are dropped (and
  // counted), and their worker, having answered too late, is free to train again.
  if (current_round() - round > config().async.max_staleness) {
    if (slot.participates_in(round)) slot.reported = true;
    return RejectReason::kStale;
  }
  if (!slot.participates_in(round)) return RejectReason::kNotSelected;
  return std::nullopt;
}

void BufferedAsyncRoundPolicy::Advance(TimeNs now) {
  bool more_can_report = false;
  for (ServerWorkerSlot& slot : slots()) {
    if (!slot.live || !slot.in_flight()) {
      more_can_report = more_can_report || Dispatchable(slot);
      continue;
    }
    if (options().round_deadline_ns != kNever &&
        SaturatingAdd(slot.dispatched_at, options().round_deadline_ns) <= now) {
      // No answer within the deadline (offline, or the frames were lost): another worker takes
      // its place; an update it still sends is refused as not selected.
      slot.selected = false;
      outbox().Forgive(PeerOf(slot), ServerOutbox::kBroadcast);
      CountExtension();
      more_can_report = more_can_report || Dispatchable(slot);
      continue;
    }
    more_can_report = true;
  }
  if (reported() >= config().async.buffer || (reported() >= 1 && !more_can_report)) {
    CloseRound(now);  // and starts the next version, dispatching to idle workers
    return;
  }
  Dispatch(now);
}

TimeNs BufferedAsyncRoundPolicy::NextWakeup() const {
  TimeNs next = kNever;
  if (options().round_deadline_ns == kNever) return kNever;
  for (const ServerWorkerSlot& slot : slots()) {
    if (slot.live && slot.in_flight()) {
      next = std::min(next, SaturatingAdd(slot.dispatched_at, options().round_deadline_ns));
    }
  }
  return next;
}

void BufferedAsyncRoundPolicy::Dispatch(TimeNs now) {
  const std::uint32_t target = SampledCount(config().participation, LiveCount(false, false));
  const std::span<std::uint32_t> idle = candidates();
  std::uint32_t training = 0;
  std::uint32_t count = 0;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    const ServerWorkerSlot& slot = SlotOf(peer);
    if (slot.live && slot.in_flight()) ++training;
    if (Dispatchable(slot)) idle[count++] = peer;
  }
  // A partial Fisher-Yates shuffle draws the idle workers that start training.
  for (std::uint32_t i = 0; training < target && i < count; ++i, ++training) {
    std::swap(idle[i], idle[i + dispatch_rng_.NextBelow(count - i)]);
    Select(SlotOf(idle[i]), now);
  }
}

}  // namespace edgesgd::protocol
