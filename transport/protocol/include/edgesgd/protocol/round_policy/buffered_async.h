#pragma once

// Buffered asynchronous aggregation (buffered_async.h): a round is a model version. The policy
// keeps round(P * live) workers training, each from the version it was sent (never twice from
// the same one), takes an update up to max_staleness versions old, and closes the version after
// K updates — or with fewer when no other worker can add one. A worker whose update does not
// arrive within the round deadline is replaced by an idle one.

#include "edgesgd/core/random.h"
#include "edgesgd/protocol/round_policy.h"

namespace edgesgd::protocol {

class BufferedAsyncRoundPolicy final : public RoundPolicy {
 public:
  explicit BufferedAsyncRoundPolicy(ServerSession& session) : RoundPolicy(session) {}

  Status Check(const RunConfig& config, const ServerOptions& options) const override;
  void StartRound(TimeNs now) override;
  std::optional<RejectReason> RefuseUpdate(ServerWorkerSlot& slot, std::uint32_t round) override;
  // Closes the version when its buffer is full (or nothing else can fill it), replaces workers
  // past their deadline, and keeps the concurrency's worth of workers training.
  void Advance(TimeNs now) override;
  TimeNs NextWakeup() const override;
  TimeNs RoundDeadline() const override { return kNever; }

 private:
  // Draws idle workers to train until the concurrency's worth of them does.
  void Dispatch(TimeNs now);
  bool Dispatchable(const ServerWorkerSlot& slot) const {
    return slot.joined && slot.live && !slot.in_flight() &&
           slot.dispatched_round != current_round();
  }

  CounterRng dispatch_rng_{0, 0, 0, 0};  // which idle workers train next
};

}  // namespace edgesgd::protocol
