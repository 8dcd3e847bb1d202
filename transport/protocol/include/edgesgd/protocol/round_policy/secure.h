#pragma once

// Secure aggregation rounds (secure_round.h): the sampled participants of a synchronous round
// are its cohort. Each of its four phases (keys, shares, masked inputs, unmasking) closes when
// every device still in the round sent its message, or at the phase's deadline (round_deadline_ns
// from the phase's start), and halfway to it the phase's message goes again to the devices that
// still owe their answer. After the unmasking the survivors' sum is added to the aggregation
// component at once; a round that lost too many devices is aborted with the model unchanged.
// Plain updates are refused: they would reveal their device's.

#include <cstddef>
#include <span>

#include "edgesgd/protocol/round_policy.h"

namespace edgesgd::protocol {

class SecureRoundPolicy final : public RoundPolicy {
 public:
  explicit SecureRoundPolicy(ServerSession& session) : RoundPolicy(session) {}

  // Exact arena bytes Init takes; 0 when the configuration cannot be sized.
  static std::size_t ArenaBytes(const RunConfig& config, std::uint32_t workers) {
    const std::size_t round = SecureRound::ArenaBytes(config, workers);
    return round == 0 ? 0 : round + ArenaBytesFor<std::uint32_t>(workers);
  }

  Status Check(const RunConfig& config, const ServerOptions& options) const override;
  Status Init(Arena& arena, const CodecRegistry& codecs) override;
  SecureRound* secure_round() override { return &secure_; }
  void StartRound(TimeNs now) override;
  std::optional<RejectReason> RefuseUpdate(ServerWorkerSlot& slot, std::uint32_t round) override;
  std::optional<RejectReason> TakeSecureMessage(ServerWorkerSlot& slot,
                                                const wire::FrameView& view) override;
  void Advance(TimeNs now) override;
  TimeNs NextWakeup() const override;
  // The current phase's deadline.
  TimeNs RoundDeadline() const override { return deadline_; }

  const SecureRound& round_state() const { return secure_; }
  // Why the last aborted round was aborted (kOk when none was).
  Status abort_reason() const { return abort_reason_; }

 private:
  // Closes the current phase once nobody still in the round owes its message, or at its
  // deadline; halfway to it sends the phase's message again to those who do.
  void AdvancePhase(TimeNs now);
  void ClosePhase(TimeNs now);
  TimeNs ResendTime(TimeNs phase_start) const;
  void Abort(TimeNs now, Status why);

  SecureRound secure_;
  std::span<std::uint32_t> cohort_;  // the round's participants
  Status abort_reason_;
  TimeNs deadline_ = kNever;
  // When the current phase's message goes again to the devices that still owe their answer
  // (halfway to the phase's deadline, once); kNever once done.
  TimeNs resend_at_ = kNever;
};

}  // namespace edgesgd::protocol
