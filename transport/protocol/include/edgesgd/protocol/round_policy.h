#pragma once

// How a server session runs its rounds (server_session.h). One policy, chosen at Init from the
// RunConfig (ServerSession::RoundPolicyFor), picks each round's workers, judges the round of
// every update, moves the round on as frames and time arrive, and says when it next needs the
// time: synchronous rounds (round_policy/synchronous.h), buffered asynchronous versions
// (round_policy/buffered_async.h) or secure aggregation rounds (round_policy/secure.h). The
// session keeps what every policy shares — joins, worker slots, liveness, rejections, the
// outbox, the aggregation and optimizer step, events — and lends it to the policy through the
// protected functions below.

#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/aggregation.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/secure_round.h"
#include "edgesgd/protocol/server_outbox.h"
#include "edgesgd/protocol/server_types.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/wire/frame_decoder.h"

namespace edgesgd::protocol {

class ServerSession;

// The server's state of one worker, zero-initialised by the arena (hence no member
// initialisers).
struct ServerWorkerSlot {
  TimeNs last_heard;
  TimeNs dispatched_at;      // when the worker was last sent a round's broadcast
  std::uint32_t held_round;  // a round whose start model the worker provably holds, or kNoRound
  std::uint32_t dispatched_round;  // the round of that broadcast (asynchronous: the version)
  std::uint32_t updates_accepted;  // since this session started (not checkpointed)
  bool joined;
  bool live;
  bool selected;  // sent the broadcast of dispatched_round: training, or reported if `reported`
  bool reported;

  static constexpr std::uint32_t kNoRound = 0xFFFFFFFFu;

  // Sent a round's broadcast and not yet reported for it (asynchronous: training).
  bool in_flight() const { return selected && !reported; }
  // A participant that was sent the broadcast of `round`.
  bool participates_in(std::uint32_t round) const { return selected && dispatched_round == round; }
};

class RoundPolicy {
 public:
  RoundPolicy(const RoundPolicy&) = delete;
  RoundPolicy& operator=(const RoundPolicy&) = delete;

  // What the policy needs of `config` and `options` beyond ValidateRunConfig and
  // ValidateServerOptions. Errors: kInvalidArgument with the reason.
  virtual Status Check(const RunConfig& config, const ServerOptions& options) const;
  // Takes the policy's buffers from `arena`, after the session took its own.
  virtual Status Init(Arena& arena, const CodecRegistry& codecs);
  // The secure aggregation round whose messages the outbox builds; nullptr when updates travel
  // plain.
  virtual SecureRound* secure_round() { return nullptr; }

  // Round current_round() begins; its model broadcast is built. Picks the workers that train.
  virtual void StartRound(TimeNs now) = 0;
  // Why the update of `round` (not later than current_round()) from the worker of `slot` is
  // refused before its payload is read; nullopt when it is read.
  virtual std::optional<RejectReason> RefuseUpdate(ServerWorkerSlot& slot, std::uint32_t round) = 0;
  // A secure aggregation message from the worker of `slot` during training: nullopt when it is
  // taken, otherwise why it is refused.
  virtual std::optional<RejectReason> TakeSecureMessage(ServerWorkerSlot& slot,
                                                        const wire::FrameView& view);
  // Moves the round in training as far as the current state and time allow, closing it (and
  // with that starting the next) through the session.
  virtual void Advance(TimeNs now) = 0;
  // When the policy next needs OnTimer during training (kNever when it does not).
  virtual TimeNs NextWakeup() const = 0;
  // The current round's deadline (kNever without one).
  virtual TimeNs RoundDeadline() const = 0;

 protected:
  explicit RoundPolicy(ServerSession& session) : session_(session) {}
  ~RoundPolicy() = default;

  // ---- The session's state and steps a policy works with ----
  const RunConfig& config() const;
  const ServerOptions& options() const;
  std::uint32_t current_round() const;
  std::span<ServerWorkerSlot> slots() const;    // indexed by peer id; slot 0 is unused
  std::span<std::uint32_t> candidates() const;  // scratch for drawing workers
  ServerWorkerSlot& SlotOf(PeerId peer) const { return slots()[peer]; }
  PeerId PeerOf(const ServerWorkerSlot& slot) const;
  ServerOutbox& outbox();
  ServerCounters& counters();
  std::uint32_t reported() const;
  // Live admitted workers; only participants / only those that have not reported, if asked.
  std::uint32_t LiveCount(bool selected_only, bool non_reporters_only) const;
  // Makes the worker a participant of current_round() and owes it the round's broadcast.
  void Select(ServerWorkerSlot& slot, TimeNs now);
  // Owes an in-flight worker the current round's full model again.
  void Resend(ServerWorkerSlot& slot, TimeNs now);
  // Counts a deadline that passed without the answers it waited for.
  void CountExtension();
  // Counts the worker's update of `round` as accepted into the aggregation.
  void AcceptUpdate(ServerWorkerSlot& slot, std::uint32_t round);
  // The round's reported updates and payload bits, when the policy counts them itself.
  void set_reported(std::uint32_t reported);
  void set_payload_bits(std::uint64_t bits);
  Aggregation& aggregation();
  std::span<const float> model() const;
  // Applies the round and starts the next one.
  void CloseRound(TimeNs now);
  // Ends the round without changing the model, and starts the next; `why` (kOk for a round that
  // merely had no update) goes to its RoundEvent.
  void AbortRound(TimeNs now, Status why);

  // ---- Steps of rounds that take updates of the current round only ----
  // Clears the last round's participants and selects round(P * n) of the n live workers, or
  // in a private run each live worker with probability P (SamplesPoisson).
  void SelectSampledParticipants(TimeNs now);
  // Whether rounds sample by Poisson from the server's secret: under differential privacy,
  // whose accountant charges every round at rate P. No round may then add a participant.
  bool SamplesPoisson() const;
  // kLate or kStale for an update of an earlier round, kNotSelected for one of a round its
  // worker does not take part in; nullopt when neither.
  std::optional<RejectReason> RefuseOutsideCurrentRound(const ServerWorkerSlot& slot,
                                                        std::uint32_t round) const;

 private:
  ServerSession& session_;
};

}  // namespace edgesgd::protocol
