#pragma once

// The parameter server of a run as a sans-I/O state machine (see session.h). It admits workers
// (Join -> Welcome with the RunConfig), then runs T rounds: each round it samples participants,
// sends them the model (or the previous round's aggregate), aggregates the updates that pass
// every check, closes the round when all participants reported or, at the deadline, when a
// quorum did, and applies the aggregate to its model. After T rounds it sends Leave{Done} to
// every worker and reports Finished().
//
// Rounds: the broadcast of round r carries the model x_r (content Model), or — with the
// aggregate downlink, to a worker whose update of round r-1 was accepted and which therefore
// holds x_{r-1} — the aggregate A_{r-1} (content Aggregate) that turns x_{r-1} into x_r. The
// server applies an aggregate by decoding the very frame it broadcasts, so every worker's model
// stays bit-identical to its own. Updates count with equal weight (Update.samples is
// informational). How they combine — the mean, the payload mean, the mean re-compressed with the
// server's own residual, or the majority vote — is the aggregation component the configuration
// selects (aggregation_registry.h); the session only admits workers, runs rounds, deadlines and
// timers, and sends frames.
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
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/checkpoint.h"
#include "edgesgd/protocol/event_log.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/wire/frame_builder.h"

namespace edgesgd::protocol {

// Most workers one server admits (peer ids 1..kMaxWorkers).
inline constexpr std::uint32_t kMaxWorkers = 256;

// Nanoseconds per second, for writing durations.
inline constexpr TimeNs kNsPerSecond = 1'000'000'000;

struct ServerOptions {
  std::uint32_t workers = 1;  // n, in 1..kMaxWorkers: the run starts when n workers joined
  // q, in 1..n: at the deadline a round closes if at least min(q, live participants) (and at
  // least one) reported; otherwise the server re-sends the broadcast to the participants that
  // have not reported and extends the deadline.
  std::uint32_t quorum = 1;
  TimeNs round_deadline_ns = 30 * kNsPerSecond;  // from the round's start; kNever: no deadline
  // A worker not heard from for this long (any valid frame counts; workers send heartbeats, so
  // keep this a few WorkerOptions::heartbeat_interval_ns) is considered gone: it is no longer
  // sampled or waited for, and any frame from it later brings it back. This is the only thing
  // that detects a device that stops silently (its link never drops): with kNever, only
  // OnPeerLost and Leave remove workers, and a round whose quorum needs a silent worker keeps
  // re-sending to it until it returns.
  TimeNs liveness_timeout_ns = 60 * kNsPerSecond;
  // The server never retries a join itself (workers re-send Join until welcomed); what it can
  // do is stop waiting: after this long since Start, training starts as soon as at least
  // `quorum` live workers have joined. kNever (default): wait for all n.
  TimeNs join_timeout_ns = kNever;
};

// Checks the options. Reasons: workers outside 1..kMaxWorkers, quorum outside 1..workers, a
// zero deadline, liveness timeout or join timeout. Does not allocate. Errors: kInvalidArgument.
Status ValidateServerOptions(const ServerOptions& options);

// Why the server dropped a received frame. Every rejection is counted, logged as a RejectEvent
// and otherwise ignored: the round goes on with the other workers.
enum class RejectReason : std::uint8_t {
  kMalformed = 0,      // DecodeFrame failed (truncated, corrupt, misaligned, other version)
  kUnknownSender,      // not a worker peer id, never joined, or header/update id != the link
  kLate,               // an Update for the round that just closed (a straggler)
  kStale,              // an Update for an older round
  kFuture,             // an Update for a round that has not started
  kDuplicate,          // a second Update from the same worker in the round
  kNotSelected,        // an Update from a worker that is not a participant of the round
  kWrongCodec,         // an Update whose codec (or qsgd levels/bucket) is not the run's
  kBadPayload,         // the payload failed verification (sizes, indices, non-finite, starts)
  kUnexpectedMessage,  // a message a server does not take (Welcome, ModelBroadcast, ...), or
                       // an Update before training started
  kIncompatible,       // a Join from a device that cannot run this configuration (it gets an
                       // Error frame saying why)
};
inline constexpr std::size_t kRejectReasonCount = 11;

// Lower-snake name of a reason ("late"), for logs and metrics; never null.
const char* RejectReasonName(RejectReason reason);

struct RejectEvent {
  PeerId peer = 0;
  RejectReason reason = RejectReason::kMalformed;
  std::uint32_t round = 0;  // the frame's round when it could be decoded, else the server's
  TimeNs time = 0;
};

// One closed round, for a metrics row.
struct RoundEvent {
  std::uint32_t round = 0;
  TimeNs time_closed = 0;
  std::uint32_t selected = 0;             // participants (including top-ups)
  std::uint32_t reported = 0;             // accepted updates aggregated
  std::uint32_t rejected = 0;             // frames rejected while this round was open
  std::uint32_t deadline_extensions = 0;  // times the deadline passed below quorum
  std::uint64_t bytes_up = 0;    // cumulative bytes of every frame received (accepted or not)
  std::uint64_t bytes_down = 0;  // cumulative bytes of every frame handed out by PollFrame
  // Bits of the payloads of this round's accepted updates (their fields, not the frames around
  // them): payload_bits / (reported * d) is the round's mean bits per coordinate, which a
  // quantization schedule changes from round to round.
  std::uint64_t payload_bits = 0;
};

struct ServerCounters {
  std::array<std::uint64_t, kRejectReasonCount> rejected{};  // indexed by RejectReason
  std::uint64_t frames_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t joins = 0;         // first Joins of a worker id
  std::uint64_t rejoins = 0;       // Joins of an id already admitted (resync, restart)
  std::uint64_t workers_lost = 0;  // liveness timeouts, OnPeerLost and Leaves
  std::uint64_t revivals = 0;      // a lost worker heard from again
  std::uint64_t updates_accepted = 0;
  std::uint64_t rounds_completed = 0;  // closed and applied (a failed apply ends the run)
  std::uint64_t deadline_extensions = 0;
  std::uint64_t top_ups = 0;  // participants added because none of the sampled could report
  std::uint64_t reject_events_dropped = 0;  // overwritten before a driver drained them
  std::uint64_t round_events_dropped = 0;

  std::uint64_t rejected_for(RejectReason reason) const {
    return rejected[static_cast<std::size_t>(reason)];
  }
  std::uint64_t total_rejected() const {
    std::uint64_t total = 0;
    for (const std::uint64_t count : rejected) total += count;
    return total;
  }
};

enum class ServerPhase : std::uint8_t { kUninitialized, kJoining, kTraining, kDone };

class ServerSession final : public Session {
 public:
  static constexpr std::size_t kRejectLogCapacity = 32;
  static constexpr std::size_t kRoundLogCapacity = 32;
  // Welcome / Error frames that can be outstanding at once (one per call in practice).
  static constexpr std::size_t kControlSlots = 4;
  static constexpr std::size_t kControlBuilderBytes =
      wire::kMaxControlFrameBytes + wire::kBuilderScratchBytes;

  // Exact arena bytes Init takes for `config` and `options`; 0 when either is invalid in a way
  // that prevents sizing (see ValidateRunConfig / ValidateServerOptions for the full checks).
  static constexpr std::size_t ArenaBytes(const RunConfig& config, const ServerOptions& options) {
    const TensorLayout& layout = config.layout;
    const std::size_t d = layout.dimension();
    if (d == 0 || options.workers < 1 || options.workers > kMaxWorkers) return 0;
    const AggregationDescriptor* aggregation = FindAggregation(config);
    if (aggregation == nullptr) return 0;
    const std::size_t model_builder = wire::FrameBuilderBytes(ModelCodec(), layout);
    const std::size_t component = aggregation->arena_bytes(config, options.workers);
    if (model_builder == 0 || component == 0) return 0;
    std::size_t aggregate_buffer = 0;
    if (aggregation->aggregate_is_payload) {
      const std::size_t aggregate_builder = wire::FrameBuilderBytes(config.codec, layout);
      if (aggregate_builder == 0) return 0;
      aggregate_buffer = edgesgd::ArenaBytes(aggregate_builder);
    }
    return ArenaBytesFor<float>(d) +
           ArenaBytesFor<WorkerSlot>(std::size_t{options.workers} + 1) +
           ArenaBytesFor<std::uint32_t>(options.workers) + edgesgd::ArenaBytes(model_builder) +
           (kControlSlots + 1) * edgesgd::ArenaBytes(kControlBuilderBytes) + aggregate_buffer +
           component;
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

  // ---- Session ----
  // Start begins the join timeout. OnFrame takes any bytes from any peer; bad frames are
  // rejected with a counter and a RejectEvent. None of these allocates.
  //
  // The overrides are defined here, in the header, and forward to out-of-line functions: a
  // class whose virtual functions are all inline has its vtable (and with it the deleting
  // destructor, which references the global operator delete) emitted only where an object is
  // created — in the driver, never in the heap-free library.
  void Start(TimeNs now) override { DoStart(now); }
  void OnFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) override {
    DoFrame(from, frame, now);
  }
  void OnPeerLost(PeerId peer, TimeNs now) override { DoPeerLost(peer, now); }
  void OnTimer(TimeNs now) override { DoTimer(now); }
  bool PollFrame(OutgoingFrame& out) override { return DoPollFrame(out); }
  TimeNs NextWakeup() const override { return DoNextWakeup(); }
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
  // When the current round's deadline falls (kNever outside training or without deadlines).
  TimeNs round_deadline() const { return phase_ == ServerPhase::kTraining ? deadline_ : kNever; }

 private:
  // Per-worker state, zero-initialised by the arena (hence no member initialisers).
  struct WorkerSlot {
    TimeNs last_heard;
    std::uint32_t held_round;  // a round whose start model the worker provably holds, or kNoRound
    bool joined;
    bool live;
    bool selected;
    bool reported;
    std::uint8_t pending;       // kPending* bits: frames waiting for PollFrame
    std::uint8_t broadcast;     // Broadcast: what this worker is sent in the current round
    std::uint8_t error_reason;  // index into the incompatibility reasons, for a pending Error
  };
  enum Broadcast : std::uint8_t { kBroadcastModel = 0, kBroadcastAggregate = 1 };
  static constexpr std::uint8_t kPendingWelcome = 1;
  static constexpr std::uint8_t kPendingError = 2;
  static constexpr std::uint8_t kPendingBroadcast = 4;
  static constexpr std::uint8_t kPendingLeave = 8;
  static constexpr std::uint32_t kNoRound = 0xFFFFFFFFu;

  // Init's allocations, in order. Errors: those of Arena (none after Init's size check).
  Status TakeBuffers(Arena& arena);

  void DoStart(TimeNs now);
  void DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now);
  void DoPeerLost(PeerId peer, TimeNs now);
  void DoTimer(TimeNs now);
  bool DoPollFrame(OutgoingFrame& out);
  TimeNs DoNextWakeup() const;

  const WorkerSlot* Slot(PeerId peer) const;
  WorkerSlot* Slot(PeerId peer);
  // The slot of `from` when it is an admitted worker and `sender` (the frame's claimed id)
  // agrees; nullptr otherwise.
  WorkerSlot* KnownSender(PeerId from, std::uint32_t sender);

  void HandleJoin(PeerId from, const wire::FrameView& view, TimeNs now);
  void HandleUpdate(PeerId from, const wire::FrameView& view, TimeNs now);
  // Index of the reason `join` cannot run this configuration, or -1.
  int Incompatibility(const wire::JoinInfo& join) const;

  void MarkHeard(WorkerSlot& slot, TimeNs now);
  void MarkGone(WorkerSlot& slot);
  void Reject(PeerId peer, RejectReason reason, std::uint32_t round, TimeNs now);

  // Moves the run forward as far as the current state and time allow.
  void Advance(TimeNs now);
  void StartTraining(TimeNs now);
  void StartRound(TimeNs now);
  void CloseRound(TimeNs now);
  // Re-sends the broadcast to participants that have not reported, or tops up the
  // participants when none of them can report; moves the deadline.
  void ExtendRound(TimeNs now);
  void TopUp();
  void Select(WorkerSlot& slot);
  Status ApplyRound();
  // For a component that broadcasts its aggregate: builds the next round's broadcast of this
  // round's aggregate, then applies that frame's payload to the model.
  Status BroadcastAndApplyAggregate();
  Status BuildModelFrame();
  void Finish(wire::LeaveReason reason, Status status);

  void SetPending(WorkerSlot& slot, std::uint8_t bits);
  void ClearPending(WorkerSlot& slot, std::uint8_t bits);
  Result<std::span<const std::byte>> BuildControlFrame(PeerId peer, std::uint8_t bit);
  wire::FrameHeader NextHeader(std::uint32_t round);
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
  std::span<WorkerSlot> slots_;          // indexed by peer id; slot 0 (the server) is unused
  std::span<std::uint32_t> candidates_;  // scratch for sampling participants

  std::optional<wire::FrameBuilder> model_builder_;
  std::optional<wire::FrameBuilder> aggregate_builder_;
  std::optional<wire::FrameBuilder> leave_builder_;
  std::array<std::optional<wire::FrameBuilder>, kControlSlots> control_builders_;
  std::size_t next_control_slot_ = 0;
  std::span<const std::byte> model_frame_;
  std::span<const std::byte> aggregate_frame_;  // the aggregate of round round_ - 1
  std::span<const std::byte> leave_frame_;
  bool aggregate_valid_ = false;

  std::uint32_t round_ = 0;
  TimeNs deadline_ = kNever;
  TimeNs join_deadline_ = kNever;
  bool join_deadline_passed_ = false;
  std::uint32_t selected_ = 0;
  std::uint32_t reported_ = 0;
  std::uint64_t payload_bits_this_round_ = 0;
  std::uint32_t rejected_this_round_ = 0;
  std::uint32_t extensions_this_round_ = 0;
  std::uint32_t last_reported_ = 0;
  std::uint64_t sequence_ = 0;
  bool started_ = false;
  std::uint32_t pending_workers_ = 0;  // workers with a nonzero `pending`
  PeerId poll_cursor_ = 1;

  ServerCounters counters_;
  EventLog<RejectEvent, kRejectLogCapacity> reject_log_;
  EventLog<RoundEvent, kRoundLogCapacity> round_log_;
};

}  // namespace edgesgd::protocol
