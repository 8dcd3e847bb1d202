#pragma once

// What Server and Peer do with their session's event logs after every call into it.

#include <functional>
#include <span>

#include "edgesgd/platform/log.h"

namespace edgesgd::tcp::internal {

// Drains `session`'s round and reject logs (after every call into it, so they never overflow):
// each closed round goes to `on_round` with the session's model, each rejected frame to
// `on_reject` or, without one, to the log as a warning naming `log_name` and the reason
// (`reason_name` spells it).
template <typename Round, typename Reject, typename Session, typename ReasonName>
void DrainSessionEvents(Session& session,
                        const std::function<void(const Round&, std::span<const float>)>& on_round,
                        const std::function<void(const Reject&)>& on_reject, const char* log_name,
                        ReasonName reason_name) {
  Round round;
  while (session.PollRoundEvent(round)) {
    if (on_round) on_round(round, session.model());
  }
  Reject reject;
  while (session.PollRejectEvent(reject)) {
    if (on_reject) {
      on_reject(reject);
    } else {
      platform::Log(platform::LogLevel::kWarning,
                    "%s: rejected a frame from peer %u in round %u: %s", log_name, reject.peer,
                    reject.round + 1, reason_name(reject.reason));
    }
  }
}

}  // namespace edgesgd::tcp::internal
