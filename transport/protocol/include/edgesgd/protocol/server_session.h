#pragma once

// The parameter server of a run as a sans-I/O state machine (see session.h). It admits workers
// (Join -> Welcome with the RunConfig), then runs T rounds: each round it samples participants,
// sends them the model (or the previous round's aggregate), aggregates the updates that pass
// every check, closes the round when all participants reported or, at the deadline, when a
// quorum did, and applies the aggregate to its model. After T rounds it sends Leave{Done} to
// every worker and reports Finished().
//
// Asynchronous aggregation (RunConfig::async, buffered_async.h): a round is a model version.
// The server keeps round(P * live) workers training, each from the version it was sent (never
// twice from the same one), accepts an update up to max_staleness versions old, and closes the
// version after K updates — or with fewer when no other worker can add one. A worker whose
// update does not arrive within the round deadline is replaced by an idle one (counted as a
// deadline extension); a worker that reconnects while training is sent the current version.
//
// Rounds: the broadcast of round r carries the model x_r (content Model), or — with the
// aggregate downlink, to a worker whose update of round r-1 was accepted and which therefore
// holds x_{r-1} — the aggregate A_{r-1} (content Aggregate) that turns x_{r-1} into x_r. The
// server applies an aggregate by decoding the very frame it broadcasts, so every worker's model
// stays bit-identical to its own. Updates count with equal weight (Update.samples is
// informational). How they combine — the mean, the payload mean, the mean re-compressed with the
// server's own residual, or the majority vote — is the aggregation component the configuration
// selects (aggregation_registry.h); how rounds pick their workers and close is the round policy
// the configuration selects (round_policy.h: synchronous, buffered asynchronous or secure); the
// session admits workers, tracks their liveness, applies rounds and sends frames.
//
// Secure aggregation (RunConfig::secure, secure_round.h): the round's participants are its
// cohort. Each of its four phases (keys, shares, masked inputs, unmasking) closes when every
// device still in the round sent its message, or at the phase's deadline (round_deadline_ns
// from the phase's start), and the server then sends each device still in the round the next
// phase's message. After the unmasking the survivors' sum is added to the aggregation component
// at once; a round that lost too many devices is aborted with the model unchanged (counted, and
// the run goes on with the next round).
//
// What a driver does:
//   1. Init(arena, codecs, config, options, initial_model) once; Start(now).
//   2. Feed every received frame to OnFrame(peer, bytes, now) — bytes at an 8-byte aligned
//      address (wire::ReceiveBuffer, arena memory, or std::vector<std::uint64_t> storage);
//      call OnPeerLost when a link drops and OnTimer(now) once now >= NextWakeup().
//   3. After every such call, PollFrame until it returns false and send each frame to its peer
//      (frames stay valid until the next call that is not PollFrame); drain PollRejectEvent
//      (log lines) and PollRoundEvent (metrics rows).
//   4. Stop when Finished() and PollFrame has nothing left (the final Leaves are queued when
//      Finished() becomes true).
// Peer ids: workers are peers 1..n, the server is kServerPeer. A Join from peer p admits worker
// p; the Join's sender must be p or wire::kUnassignedDevice.
//
// Memory: everything comes from the arena at Init (ArenaBytes() tells how much); after Init no
// call allocates, on the heap or from the arena.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/privacy/rdp_accountant.h"
#include "edgesgd/core/random.h"
#include "edgesgd/core/server_optimizer.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/checkpoint.h"
#include "edgesgd/protocol/event_log.h"
#include "edgesgd/protocol/round_policy.h"
#include "edgesgd/protocol/round_policy/buffered_async.h"
#include "edgesgd/protocol/round_policy/secure.h"
#include "edgesgd/protocol/round_policy/synchronous.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_outbox.h"
#include "edgesgd/protocol/server_types.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/wire/frame_builder.h"

namespace edgesgd::protocol {

enum class ServerPhase : std::uint8_t { kUninitialized, kJoining, kTraining, kDone };

class ServerSession final : public InlineSession<ServerSession> {
 public:
  static constexpr std::size_t kRejectLogCapacity = 32;
  static constexpr std::size_t kRoundLogCapacity = 32;

  // Exact arena bytes Init takes for `config` and `options`; 0 when either is invalid in a way
  // that prevents sizing (see ValidateRunConfig / ValidateServerOptions for the full checks).
  static constexpr std::size_t ArenaBytes(const RunConfig& config, const ServerOptions& options) {
    const std::size_t d = config.layout.dimension();
    if (d == 0 || options.workers < 1 || options.workers > kMaxWorkers) return 0;
    const AggregationDescriptor* aggregation = FindAggregation(config);
    if (aggregation == nullptr) return 0;
    const std::size_t outbox =
        ServerOutbox::ArenaBytes(config, options.workers, aggregation->aggregate_is_payload);
    const std::size_t component = aggregation->arena_bytes(config, options.workers);
    if (outbox == 0 || component == 0) return 0;
    std::size_t secure = 0;
    if (config.secure.enabled) {
      secure = SecureRoundPolicy::ArenaBytes(config, options.workers);
      if (secure == 0) return 0;
    }
    // A server optimizer other than plain FedAvg keeps its state and the round's change.
    const std::size_t server_optimizer =
        ChangesFedAvg(config.server_optimizer)
            ? ServerOptimizer::StateBytes(d, config.server_optimizer) + ArenaBytesFor<float>(d)
            : 0;
    return ArenaBytesFor<float>(d) + ArenaBytesFor<WorkerSlot>(std::size_t{options.workers} + 1) +
           ArenaBytesFor<std::uint32_t>(options.workers) + outbox + component + server_optimizer +
           secure;
  }

  ServerSession() = default;
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  // Validates `config` and `options`, takes every buffer from `arena` (ArenaBytes) and copies
  // `initial_model` (layout.dimension() floats) as the round-0 model. Decodes and encodes with
  // the run codec's operations in `codecs` (which must outlive the session). Accepts Joins from
  // then on. Reads its arguments; allocates from the arena only, never afterwards.
  // Errors (with a reason): kInvalidArgument (config, options, model size),
  // kFailedPrecondition (already initialized, arena sealed, the run's codec not in `codecs`),
  // kResourceExhausted (arena smaller than ArenaBytes; nothing is taken then).
  Status Init(Arena& arena, const CodecRegistry& codecs, const RunConfig& config,
              const ServerOptions& options, std::span<const float> initial_model);

  // ---- Session (InlineSession's forwarders) ----
  // Start begins the join timeout. OnFrame takes any bytes from any peer; bad frames are
  // rejected with a counter and a RejectEvent. None of these allocates.
  bool Finished() const override { return phase_ == ServerPhase::kDone; }

  // The oldest undrained rejection / closed round, removed from the log; false when there is
  // none. The logs hold the last kRejectLogCapacity / kRoundLogCapacity entries (older ones are
  // overwritten and counted as dropped). Do not allocate.
  bool PollRejectEvent(RejectEvent& out);
  bool PollRoundEvent(RoundEvent& out);

  // ---- Checkpoint: the committed state as bytes (the caller stores them) ----
  //
  // The committed state is the round in progress and the model it started from (the model only
  // changes when a round closes, together with the round number), the cumulative byte counters
  // (so that metrics stay cumulative across a restart) and the aggregation component's state
  // (the downlink residual of two-way compression). Workers' own state (error feedback
  // residuals, momentum) lives on the workers. The format, with every field of the run
  // configuration, is checkpoint.h's.

  // Bytes SaveState writes (after Init).
  std::size_t StateBytes() const;

  // Writes the committed state into `out` (at least StateBytes() bytes) and returns the bytes
  // written. To lose no committed round, save after every call that advanced round() and
  // before sending the frames PollFrame hands out. Does not allocate.
  // Errors: kFailedPrecondition before Init; kResourceExhausted if `out` is too small.
  Result<std::size_t> SaveState(std::span<std::byte> out) const;

  // Continues a run from SaveState's bytes: after Init (with the same RunConfig and worker
  // count) and before Start. The run resumes at the saved round with the saved model; workers
  // that join get the full model. Does not allocate. Errors (with a reason; nothing changes):
  // kFailedPrecondition (not initialized, or already started); kDataLoss (a damaged file, or
  // another format version); kInvalidArgument (a state of another configuration — then
  // `differing_field`, if given, names the first setting that differs, as
  // ForEachRunConfigField names it — or a non-finite model or residual).
  Status RestoreState(std::span<const std::byte> state,
                      std::string_view* differing_field = nullptr);

  // ---- State, for drivers and tests ----
  std::span<const float> model() const { return model_; }
  // The round in progress (or, once done, the number of rounds run).
  std::uint32_t round() const { return round_; }
  ServerPhase phase() const { return phase_; }
  const ServerCounters& counters() const { return counters_; }
  // Updates accepted from worker `peer` since this session started (0 outside 1..workers):
  // counters().updates_accepted device by device.
  std::uint32_t UpdatesAcceptedFrom(PeerId peer) const {
    const WorkerSlot* slot = Slot(peer);
    return slot != nullptr ? slot->updates_accepted : 0;
  }
  const RunConfig& config() const { return config_; }
  const ServerOptions& options() const { return options_; }
  // kOk, or why the run was aborted (kDataLoss: the model became non-finite; kInternal).
  Status status() const { return status_; }
  std::uint32_t joined_workers() const;
  std::uint32_t live_workers() const;
  // Participants of the current round, and how many of them reported.
  std::uint32_t selected_count() const { return selected_; }
  std::uint32_t reported_count() const { return reported_; }
  bool IsJoined(PeerId peer) const { return Slot(peer) != nullptr && Slot(peer)->joined; }
  bool IsLive(PeerId peer) const { return Slot(peer) != nullptr && Slot(peer)->live; }
  bool IsSelected(PeerId peer) const { return Slot(peer) != nullptr && Slot(peer)->selected; }
  // Sent a round's broadcast and not yet reported for it (asynchronous: training).
  bool IsTraining(PeerId peer) const { return Slot(peer) != nullptr && Slot(peer)->in_flight(); }
  // When the current round's deadline falls (kNever outside training or without deadlines); in
  // a secure round, the current phase's.
  TimeNs round_deadline() const {
    return phase_ == ServerPhase::kTraining ? rounds_->RoundDeadline() : kNever;
  }
  // The privacy a private run has spent: every round that released an aggregate, charged at
  // the rate its participants were sampled at and with the noise the aggregate really carried
  // (docs/privacy.md, "What the epsilon counts"). Empty when the run is not private.
  const PrivacyLedger& privacy_ledger() const { return privacy_ledger_; }
  // Continues an account kept outside the checkpoint (a resumed run's driver restores the
  // rounds the last run charged after its checkpoint, which this run re-runs and charges
  // again). Errors: as PrivacyLedger::Restore; kFailedPrecondition after Start.
  Status RestorePrivacyLedger(std::span<const double> rdp, std::uint64_t rounds);

  // Secure aggregation's round state (open() while a round's phases run).
  const SecureRound& secure_round() const { return secure_rounds_.round_state(); }
  // Why the last aborted secure round was aborted (kOk when none was).
  Status secure_abort_reason() const { return secure_rounds_.abort_reason(); }

 private:
  friend class RoundPolicy;  // lends a policy the session's state and steps
  friend class InlineSession<ServerSession>;
  using WorkerSlot = ServerWorkerSlot;
  static constexpr std::uint32_t kNoRound = ServerWorkerSlot::kNoRound;

  // The policy that runs `config`'s rounds: the one place the round kind is chosen.
  RoundPolicy& RoundPolicyFor(const RunConfig& config);

  void DoStart(TimeNs now);
  void DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now);
  void DoPeerLost(PeerId peer, TimeNs now);
  void DoTimer(TimeNs now);
  bool DoPollFrame(OutgoingFrame& out);
  TimeNs DoNextWakeup() const;

  // The slot of worker `peer` (the span's elements are mutable through a const session, as the
  // arena memory behind them is), or nullptr for a peer id outside 1..workers.
  WorkerSlot* Slot(PeerId peer) const;
  PeerId PeerOf(const WorkerSlot& slot) const { return static_cast<PeerId>(&slot - slots_.data()); }
  // The slot of `from` when it is an admitted worker and `sender` (the frame's claimed id)
  // agrees; nullptr otherwise.
  WorkerSlot* KnownSender(PeerId from, std::uint32_t sender);

  void HandleJoin(PeerId from, const wire::FrameView& view, TimeNs now);
  void HandleUpdate(PeerId from, const wire::FrameView& view, TimeNs now);
  void HandleSecure(PeerId from, const wire::FrameView& view, TimeNs now);
  // Verifies and adds an admitted update's payload, and its control change when it carries one,
  // to the aggregation component. Errors: why it cannot be aggregated (nothing is added).
  Status AddUpdate(const wire::FrameView& view, const CodecParams& params,
                   const CodecContext& context);
  // Counts the worker's update of `round` as accepted into the aggregation.
  void AcceptUpdate(WorkerSlot& slot, std::uint32_t round);

  void MarkHeard(WorkerSlot& slot, TimeNs now);
  // Sends an in-flight worker the current round's full model again (it reconnected or missed
  // its deadline).
  void Resend(WorkerSlot& slot, TimeNs now);
  void MarkGone(WorkerSlot& slot);
  void Reject(PeerId peer, RejectReason reason, std::uint32_t round, TimeNs now);

  // Moves the run forward as far as the current state and time allow.
  void Advance(TimeNs now);
  void StartRound(TimeNs now);
  // Ends the round — applying it to the model, or, when `apply` is false, leaving the model as
  // it was — and starts the next.
  void CloseRound(TimeNs now, bool apply);
  void Select(WorkerSlot& slot, TimeNs now);
  Status ApplyRound();
  // Charges the closed round to the privacy ledger (private runs).
  void ChargePrivacy();
  // For a component whose aggregate is a payload: builds the next round's aggregate frame, then
  // applies that frame's payload to the model.
  Status BroadcastAndApplyAggregate();
  void Finish(wire::LeaveReason reason, Status status);

  std::uint32_t LiveCount(bool selected_only, bool non_reporters_only) const;

  RunConfig config_;
  ServerOptions options_;
  ServerPhase phase_ = ServerPhase::kUninitialized;
  Status status_;
  std::size_t max_receive_bytes_ = 0;

  const CodecRegistry* codecs_ = nullptr;
  const AggregationDescriptor* aggregation_kind_ = nullptr;
  Aggregation* aggregation_ = nullptr;  // in the arena
  std::span<float> model_;
  // Unless plain FedAvg: the server optimizer and the round's change it moves the model by (what
  // the component would add to the model).
  ServerOptimizer server_optimizer_;
  std::span<float> change_;
  std::span<WorkerSlot> slots_;          // indexed by peer id; slot 0 (the server) is unused
  std::span<std::uint32_t> candidates_;  // scratch for sampling participants

  SynchronousRoundPolicy synchronous_rounds_{*this};
  BufferedAsyncRoundPolicy buffered_async_rounds_{*this};
  SecureRoundPolicy secure_rounds_{*this};
  RoundPolicy* rounds_ = nullptr;  // the one of them RoundPolicyFor chose at Init
  ServerOutbox outbox_;
  bool aggregate_valid_ = false;  // the outbox holds the aggregate of round round_ - 1

  std::uint32_t round_ = 0;
  TimeNs join_deadline_ = kNever;
  bool join_deadline_passed_ = false;
  std::uint32_t selected_ = 0;
  std::uint32_t reported_ = 0;
  std::uint64_t payload_bits_this_round_ = 0;
  std::uint32_t rejected_this_round_ = 0;
  std::uint32_t extensions_this_round_ = 0;
  std::uint32_t last_reported_ = 0;
  bool started_ = false;
  PrivacyLedger privacy_ledger_;
  Status abort_reason_this_round_ = Status::Ok();  // for the round's RoundEvent

  ServerCounters counters_;
  EventLog<RejectEvent, kRejectLogCapacity> reject_log_;
  EventLog<RoundEvent, kRoundLogCapacity> round_log_;
};

}  // namespace edgesgd::protocol
