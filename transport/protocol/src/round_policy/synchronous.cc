#include "edgesgd/protocol/round_policy/synchronous.h"

#include <algorithm>

#include "../session_util.h"

namespace edgesgd::protocol {

using internal::SaturatingAdd;

void SynchronousRoundPolicy::StartRound(TimeNs now) {
  SelectSampledParticipants(now);
  // A private round that sampled nobody closes empty at the next wakeup, a nanosecond on: not
  // within this call, so that a run of empty rounds neither recurses nor floods the round log
  // before a driver drains it.
  const bool empty = SamplesPoisson() && LiveCount(true, false) == 0;
  deadline_ = SaturatingAdd(now, empty ? 1 : options().round_deadline_ns);
}

std::optional<RejectReason> SynchronousRoundPolicy::RefuseUpdate(ServerWorkerSlot& slot,
                                                                 std::uint32_t round) {
  return RefuseOutsideCurrentRound(slot, round);
}

void SynchronousRoundPolicy::Advance(TimeNs now) {
  // Participants that can still report: sampled, alive, not reported yet.
  const std::uint32_t waiting = LiveCount(true, true);
  if (reported() >= 1 && waiting == 0) {
    CloseRound(now);
    return;
  }
  if (now >= deadline_) {
    std::uint32_t reachable = 0;
    for (const ServerWorkerSlot& slot : slots()) {
      reachable += (slot.selected && (slot.live || slot.reported)) ? 1u : 0u;
    }
    const std::uint32_t quorum =
        std::max<std::uint32_t>(1, std::min<std::uint32_t>(options().quorum, reachable));
    if (reported() >= quorum) {
      CloseRound(now);
    } else {
      ExtendRound(now);
    }
    return;
  }
  // Nobody sampled can report (all of them vanished): sample everyone else who is alive
  // rather than wait for the deadline.
  if (reported() == 0 && waiting == 0) TopUp(now);
}

void SynchronousRoundPolicy::TopUp(TimeNs now) {
  if (!SamplesPoisson()) {
    AddEveryLiveWorker(now);
    return;
  }
  // More participants would raise their inclusion above P: the round ends with what it has.
  if (reported() > 0) {
    CloseRound(now);
  } else {
    AbortRound(now, Status::Ok());  // nobody to hear from: an empty round, not a failure
  }
}

void SynchronousRoundPolicy::ExtendRound(TimeNs now) {
  bool resent = false;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    ServerWorkerSlot& slot = SlotOf(peer);
    if (slot.selected && slot.live && !slot.reported) {
      outbox().Owe(peer, ServerOutbox::kBroadcast);
      resent = true;
    }
  }
  if (!resent && SamplesPoisson()) {
    TopUp(now);  // ends the round
    return;
  }
  CountExtension();
  if (!resent) TopUp(now);
  deadline_ = SaturatingAdd(now, options().round_deadline_ns);
}

void SynchronousRoundPolicy::AddEveryLiveWorker(TimeNs now) {
  std::uint32_t added = 0;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    ServerWorkerSlot& slot = SlotOf(peer);
    if (slot.joined && slot.live && !slot.selected) {
      Select(slot, now);
      ++added;
    }
  }
  if (added > 0) ++counters().top_ups;
}

}  // namespace edgesgd::protocol
