#pragma once

// Synchronous rounds: each round samples round(P * live) participants and sends them the model;
// it closes when every participant reported or, at the deadline, when a quorum did. Short of a
// quorum the deadline moves on: the participants that have not reported are sent the broadcast
// again, or, when none of them can report, every other live worker joins the round. A private
// run samples each live worker with probability P instead and never adds one: its round closes
// with the updates it has, or empty.

#include "edgesgd/protocol/round_policy.h"

namespace edgesgd::protocol {

class SynchronousRoundPolicy final : public RoundPolicy {
 public:
  explicit SynchronousRoundPolicy(ServerSession& session) : RoundPolicy(session) {}

  void StartRound(TimeNs now) override;
  std::optional<RejectReason> RefuseUpdate(ServerWorkerSlot& slot, std::uint32_t round) override;
  void Advance(TimeNs now) override;
  TimeNs NextWakeup() const override { return deadline_; }
  TimeNs RoundDeadline() const override { return deadline_; }

 private:
  // Re-sends the broadcast to participants that have not reported, or tops up the
  // participants when none of them can report; moves the deadline.
  void ExtendRound(TimeNs now);
  // Called when no participant can report any more: adds every other live worker, or in a
  // private run closes the round with the updates it has (aborts it with none).
  void TopUp(TimeNs now);
  void AddEveryLiveWorker(TimeNs now);

  TimeNs deadline_ = kNever;
};

}  // namespace edgesgd::protocol
