#include "edgesgd/protocol/round_policy/synchronous.h"

#include <algorithm>

#include "../session_util.h"

namespace edgesgd::protocol {

using internal::SaturatingAdd;

void SynchronousRoundPolicy::StartRound(TimeNs now) {
  SelectSampledParticipants(now);
  deadline_ = SaturatingAdd(now, options().round_deadline_ns);
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

void SynchronousRoundPolicy::ExtendRound(TimeNs now) {
  CountExtension();
  bool resent = false;
  for (PeerId peer = 1; peer <= options().workers; ++peer) {
    ServerWorkerSlot& slot = SlotOf(peer);
    if (slot.selected && slot.live && !slot.reported) {
      outbox().Owe(peer, ServerOutbox::kBroadcast);
      resent = true;
    }
  }
  if (!resent) TopUp(now);
  deadline_ = SaturatingAdd(now, options().round_deadline_ns);
}

void SynchronousRoundPolicy::TopUp(TimeNs now) {
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
