#pragma once

// A decentralized gossip peer as a sans-I/O state machine (see session.h). Peers are the nodes
// of a Topology (topology.h); each knows only its own row of the mixing matrix W and talks only
// to its neighbours. Algorithm: D-PSGD (ALGORITHMS.md §6), round t = 0..T-1:
//
//   1. g_i = grad f_i(x_i)                                 (the gradient callback, at the start)
//   2. send x_i to every live neighbour                    (GossipExchange{phase 0, step 0,
//                                                           vector Model}, dense identity
//                                                           payload, envelope round t)
//   3. collect the neighbours' x_j of round t, until every live neighbour's has arrived or the
//      neighbour deadline (config) passes — a silent, slow or dead neighbour;
//   4. x_i <- sum_{j heard} W_ij x_j + (W_ii + sum_{j missed} W_ij) x_i - lr * g_i
//
// Re-weighting (step 4): a missed neighbour's weight moves onto the diagonal, so the row still
// sums to 1 and the update stays a convex mix plus the gradient step. The matrix actually applied
// in such a round is no longer symmetric (the neighbour may have heard this peer), so the network
// average drifts a little in rounds with misses; counters().neighbours_missed and
// reweighted_rounds say how often that happened.
//
// Received frames are checked and either accepted or counted by GossipRejectReason and dropped:
// a round-t frame is mixed in as it arrives (weighted sum in arrival order); a round-(t+1) frame
// from a neighbour that is ahead goes into a second accumulator for the next round (one slot per
// neighbour: a second one is a duplicate); later rounds are kFuture, earlier ones kLate/kStale.
// The two accumulators replace per-neighbour copies: memory is 4 model-sized vectors whatever the
// degree. Nothing a neighbour sends can crash the peer or hold it past the deadline.
//
// Lost neighbours: OnPeerLost(j) or a Leave from j marks j lost. Lost neighbours are neither sent
// to nor waited for (a round completes when every live neighbour was heard); when every neighbour
// is lost the peer waits for the deadline each round, so a neighbour that comes back finds it
// still pacing. A lost neighbour's models are still mixed in when they pass every check; it is
// live again (a revival, and it is sent the current round's model if that is its round) once
// one arrives for a round at least two past the round in which it was lost — frames that were
// merely in flight at the loss are at most one round ahead, and must not make every later round
// wait for a dead peer.
// After T rounds the peer sends Leave{Done} to its live neighbours (so they stop waiting for it)
// and reports Finished(). A peer without neighbours (a topology of one) runs plain SGD.
//
// What a driver does:
//   1. Init(arena, config, options) once (ArenaBytes(config) bytes); Start(now).
//   2. Feed every received frame to OnFrame(peer, bytes, now) — bytes at an 8-byte aligned
//      address — call OnPeerLost when a link drops and OnTimer(now) once now >= NextWakeup().
//   3. After every such call, PollFrame until it returns false and send each frame to its peer
//      (frames stay valid until the next call that is not PollFrame; several neighbours get the
//      same bytes); drain PollRoundEvent (metrics rows) and PollRejectEvent (log lines).
//   4. Stop when Finished() and PollFrame has nothing left.
// The gradient callback runs inside Start, OnFrame, OnTimer and OnPeerLost (whichever starts a
// round). The first frame of each round carries work_samples = samples_per_step: the simulator
// charges the gradient's compute time before the round's frames leave the device.
//
// Extending (gradient tracking, DeTAG): their rounds exchange more vectors (Tracker) and several
// gossip steps per phase; each (phase, step, vector) exchange gets its own pair of accumulators
// and IsExpectedExchange() widens. The frame handling, deadlines and re-weighting stay as they are.
//
// Memory: everything comes from the arena at Init; after Init no call allocates, on the heap or
// from the arena. At most two rounds start within one call (a round completed by buffered frames
// can be followed by one more start, which needs fresh frames), so two frame builders used by
// round parity keep every handed-out frame valid as the Session contract requires.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/protocol/topology.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "edgesgd/wire/messages.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::protocol {

// The gradient callback is the workers' GradientFunction (worker_session.h), called once per
// round with local_step 0. A non-ok Status or a non-finite gradient makes the peer mix without
// a gradient step that round (counted as a gradient error): the neighbours still get its model,
// so one bad batch never stalls them.

// The decentralized algorithm a peer runs. Only D-PSGD exists so far; gradient tracking and
// DeTAG add values here and exchanges in the session.
enum class GossipAlgorithm : std::uint8_t { kDpsgd = 0 };

struct GossipConfig {
  GossipAlgorithm algorithm = GossipAlgorithm::kDpsgd;
  // This peer's id (mixing.peer, its device id 1..n), its neighbours and its row of W; usually
  // MakeMixingRow(topology, rule, id).
  MixingRow mixing;
  TensorLayout layout;  // the model's tensors over one flat vector of layout.dimension() floats
  std::uint32_t rounds = 100;   // T >= 1
  float learning_rate = 0.01f;  // >= 0 and finite; 0 runs pure gossip averaging
  // Key of shared random choices. D-PSGD's dense exchange draws none; compressed gossip will.
  std::uint64_t seed = 0;
  // How long a round waits for its neighbours' models, from the round's start; > 0. kNever
  // waits for every live neighbour indefinitely (then only OnPeerLost or a Leave unblocks a
  // round whose neighbour went silent).
  TimeNs neighbour_deadline_ns = 10'000'000'000;

  friend constexpr bool operator==(const GossipConfig&, const GossipConfig&) = default;
};

// Checks a configuration before any memory is taken: a known algorithm, a valid mixing row
// (ValidateMixingRow), a non-empty layout whose dense model fits one frame, rounds >= 1, a
// non-negative finite learning rate and a non-zero deadline. Reads only `config`; does not
// allocate. Errors: kInvalidArgument with a reason.
ConfigCheck ValidateGossipConfig(const GossipConfig& config);

struct GossipOptions {
  GradientFunction gradient = nullptr;  // required
  void* user = nullptr;
  // Training samples behind one gradient, reported as work_samples on each round's first frame
  // (0: the simulator charges no compute time).
  std::uint32_t samples_per_step = 1;
  // x_i at round 0 (layout.dimension() finite floats); copied at Init, need not outlive it.
  std::span<const float> initial_model;
};

// Why a peer dropped a received frame. Every rejection is counted, logged as a
// GossipRejectEvent and otherwise ignored.
enum class GossipRejectReason : std::uint8_t {
  kMalformed = 0,      // DecodeFrame failed (truncated, corrupt, misaligned, oversized, version)
  kUnknownSender,      // not a neighbour, or the envelope's sender is not the link's peer
  kUnexpectedMessage,  // a message gossip peers do not exchange (Join, Update, Heartbeat, ...)
  kWrongExchange,      // a GossipExchange with a phase, step or vector this algorithm never sends
  kWrongCodec,         // a payload that is not the dense identity encoding of a model
  kBadPayload,         // the wrong number of values, or a non-finite value
  kLate,               // a model for the round that just closed (a neighbour past the deadline)
  kStale,              // a model for an older round
  kDuplicate,          // a second model from the same neighbour for the same round
  kFuture,             // a model two or more rounds ahead (only the next round is buffered), or
                       // for a round >= T
};
inline constexpr std::size_t kGossipRejectReasonCount = 10;

// Lower-snake name of a reason ("late"), for logs and metrics; never null.
const char* GossipRejectReasonName(GossipRejectReason reason);

struct GossipRejectEvent {
  PeerId peer = 0;
  GossipRejectReason reason = GossipRejectReason::kMalformed;
  std::uint32_t round = 0;  // the frame's round when it could be decoded, else the peer's
  TimeNs time = 0;
};

// One completed round, for a metrics row.
struct GossipRoundEvent {
  std::uint32_t round = 0;
  TimeNs time_closed = 0;
  std::uint32_t neighbours_heard = 0;   // models mixed in
  std::uint32_t neighbours_missed = 0;  // weights moved onto the diagonal (silent or lost)
  bool deadline_passed = false;         // closed by the deadline rather than by the last model
  std::uint64_t bytes_sent = 0;         // cumulative bytes of every frame handed out by PollFrame
  std::uint64_t bytes_received = 0;     // cumulative bytes of every frame received
};

struct GossipCounters {
  std::array<std::uint64_t, kGossipRejectReasonCount> rejected{};  // indexed by the reason
  std::uint64_t frames_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t models_accepted = 0;  // neighbour models mixed in (current or next round)
  std::uint64_t models_buffered = 0;  // of those, received a round early
  std::uint64_t rounds_completed = 0;
  std::uint64_t neighbours_heard = 0;   // summed over rounds
  std::uint64_t neighbours_missed = 0;  // summed over rounds
  std::uint64_t reweighted_rounds = 0;  // rounds with at least one missed neighbour
  std::uint64_t deadline_closes = 0;    // rounds closed by the deadline
  std::uint64_t gradient_errors = 0;    // callback failed or returned a non-finite gradient
  std::uint64_t neighbours_lost = 0;    // OnPeerLost of a live neighbour
  std::uint64_t leaves_received = 0;    // Leaves from neighbours (any reason; they count as lost)
  std::uint64_t revivals = 0;           // a lost neighbour heard from again
  std::uint64_t reject_events_dropped = 0;  // overwritten before a driver drained them
  std::uint64_t round_events_dropped = 0;

  std::uint64_t rejected_for(GossipRejectReason reason) const {
    return rejected[static_cast<std::size_t>(reason)];
  }
  std::uint64_t total_rejected() const {
    std::uint64_t total = 0;
    for (const std::uint64_t count : rejected) total += count;
    return total;
  }
};

enum class GossipPhase : std::uint8_t { kUninitialized, kReady, kRunning, kFinished };

class GossipPeerSession final : public Session {
 public:
  static constexpr std::size_t kRejectLogCapacity = 32;
  static constexpr std::size_t kRoundLogCapacity = 32;
  static constexpr std::size_t kControlBuilderBytes =
      wire::kMaxControlFrameBytes + wire::kBuilderScratchBytes;

  // Largest frame a peer of `config` sends or accepts (the dense model frame); 0 when the layout
  // cannot be sized. Size drivers' receive buffers with it.
  static constexpr std::size_t MaxFrameBytes(const GossipConfig& config) {
    return wire::MaxFrameBytes(ModelCodec(), config.layout);
  }

  // Exact arena bytes Init takes: the model, the gradient and two mixing accumulators (d floats
  // each), two model-frame builders and one control-frame builder. 0 when the layout cannot be
  // sized (see ValidateGossipConfig for the full checks).
  static constexpr std::size_t ArenaBytes(const GossipConfig& config) {
    const std::size_t d = config.layout.dimension();
    const std::size_t builder = wire::FrameBuilderBytes(ModelCodec(), config.layout);
    if (d == 0 || builder == 0) return 0;
    return 4 * ArenaBytesFor<float>(d) + 2 * edgesgd::ArenaBytes(builder) +
           edgesgd::ArenaBytes(kControlBuilderBytes);
  }

  GossipPeerSession() = default;
  GossipPeerSession(const GossipPeerSession&) = delete;
  GossipPeerSession& operator=(const GossipPeerSession&) = delete;

  // Validates `config` and `options`, takes every buffer from `arena` (ArenaBytes) and copies
  // the initial model. Frames received before Start are already accepted (for rounds 0 and 1).
  // Reads its arguments; allocates from the arena only, never afterwards.
  // Errors (with a reason): kInvalidArgument (config, no gradient callback, model size or
  // non-finite model), kFailedPrecondition (already initialized, arena sealed),
  // kResourceExhausted (arena smaller than ArenaBytes; nothing is taken then).
  ConfigCheck Init(Arena& arena, const GossipConfig& config, const GossipOptions& options);

  // ---- Session ----
  // Start begins round 0. OnFrame takes any bytes from any peer. None of these allocates.
  // The overrides are inline forwarders (as in ServerSession): the vtable, with its deleting
  // destructor that references the global operator delete, is then emitted only where a session
  // object is created — in the driver, never in the heap-free library.
  void Start(TimeNs now) override { DoStart(now); }
  void OnFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) override {
    DoFrame(from, frame, now);
  }
  void OnPeerLost(PeerId peer, TimeNs now) override { DoPeerLost(peer, now); }
  void OnTimer(TimeNs now) override { DoTimer(now); }
  bool PollFrame(OutgoingFrame& out) override { return DoPollFrame(out); }
  TimeNs NextWakeup() const override { return DoNextWakeup(); }
  bool Finished() const override { return phase_ == GossipPhase::kFinished; }

  // The oldest undrained rejection / completed round, removed from the log; false when there is
  // none. The logs keep the last kRejectLogCapacity / kRoundLogCapacity entries (older ones are
  // overwritten and counted as dropped). Do not allocate.
  bool PollRejectEvent(GossipRejectEvent& out);
  bool PollRoundEvent(GossipRoundEvent& out);

  // ---- State, for drivers and tests ----
  GossipPhase phase() const { return phase_; }
  const GossipConfig& config() const { return config_; }
  PeerId id() const { return config_.mixing.peer; }
  // x_i: the start model of round(), or the final model once finished.
  std::span<const float> model() const { return model_; }
  // The round in progress (T once finished).
  std::uint32_t round() const { return round_; }
  const GossipCounters& counters() const { return counters_; }
  // kOk, or why the run stopped early: kDataLoss (the model became non-finite), kInternal.
  Status status() const { return status_; }
  bool IsNeighbour(PeerId peer) const { return NeighbourIndex(peer) >= 0; }
  bool IsLive(PeerId peer) const;
  // Neighbours whose model for the current round has been mixed in so far.
  std::uint32_t heard_count() const;
  // When the current round's deadline falls (kNever unless running).
  TimeNs round_deadline() const { return phase_ == GossipPhase::kRunning ? deadline_ : kNever; }

 private:
  // Per-neighbour state lives in fixed arrays indexed like config_.mixing.neighbours, with the
  // set-valued parts (live, heard) as bit masks: bit k is neighbour k.
  static_assert(kMaxNeighbours <= 64, "neighbour sets are 64-bit masks");
  static constexpr std::uint8_t kPendingSlot0 = 1;  // model frame of slot 0 (even rounds)
  static constexpr std::uint8_t kPendingSlot1 = 2;  // model frame of slot 1 (odd rounds)
  static constexpr std::uint8_t kPendingLeave = 4;

  Status TakeBuffers(Arena& arena);

  void DoStart(TimeNs now);
  void DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now);
  void DoPeerLost(PeerId peer, TimeNs now);
  void DoTimer(TimeNs now);
  bool DoPollFrame(OutgoingFrame& out);
  TimeNs DoNextWakeup() const;

  // Index of `peer` in the mixing row, or -1.
  int NeighbourIndex(PeerId peer) const;
  void HandleExchange(std::size_t index, const wire::FrameView& view, TimeNs now);
  void HandleLeave(std::size_t index);
  // Whether D-PSGD sends this (phase, step, vector): only {0, 0, Model}.
  static bool IsExpectedExchange(const wire::GossipInfo& info);
  void MarkLost(std::size_t index);
  void Reject(PeerId peer, GossipRejectReason reason, std::uint32_t round, TimeNs now);

  // Closes rounds while the current one is complete or past its deadline.
  void Advance(TimeNs now);
  bool RoundComplete() const;
  void StartRound(TimeNs now);
  // x_i as a GossipExchange frame in `builder`. Errors: those of FrameBuilder.
  Result<std::span<const std::byte>> BuildModelFrame(wire::FrameBuilder& builder,
                                                     const wire::FrameHeader& header,
                                                     const wire::PayloadMessage& message) const;
  void CloseRound(TimeNs now, bool deadline_passed);
  void Finish(wire::LeaveReason reason, Status status);

  void SetPending(std::size_t index, std::uint8_t bits);
  void ClearPending(std::size_t index, std::uint8_t bits);

  GossipConfig config_;
  GossipOptions options_;
  GossipPhase phase_ = GossipPhase::kUninitialized;
  Status status_;
  std::size_t max_receive_bytes_ = 0;
  std::uint64_t all_neighbours_ = 0;  // mask of every neighbour
  std::uint64_t live_ = 0;            // mask of live neighbours
  std::uint64_t heard_current_ = 0;   // mixed into current_mix_ this round
  std::uint64_t heard_next_ = 0;      // mixed into next_mix_ (models of round + 1)
  std::array<std::uint32_t, kMaxNeighbours> lost_round_{};  // round_ when last marked lost
  std::array<std::uint8_t, kMaxNeighbours> pending_{};      // kPending* bits per neighbour
  std::size_t pending_frames_ = 0;                          // set bits over pending_

  std::span<float> model_;
  std::span<float> gradient_;
  std::span<float> current_mix_;  // sum of W_ij x_j over the neighbours heard this round
  std::span<float> next_mix_;     // the same for next round's models received early

  // Model frames by round parity (see the Memory note above).
  std::array<std::optional<wire::FrameBuilder>, 2> model_builders_;
  std::array<std::span<const std::byte>, 2> model_frames_;
  std::array<std::uint32_t, 2> frame_rounds_{};
  std::array<std::uint64_t, 2> frame_work_{};  // work_samples still to report for the slot
  std::optional<wire::FrameBuilder> leave_builder_;
  std::span<const std::byte> leave_frame_;

  std::uint32_t round_ = 0;
  TimeNs deadline_ = kNever;
  std::uint64_t sequence_ = 0;

  GossipCounters counters_;
  std::array<GossipRejectEvent, kRejectLogCapacity> reject_log_{};
  std::size_t reject_head_ = 0;
  std::size_t reject_size_ = 0;
  std::array<GossipRoundEvent, kRoundLogCapacity> round_log_{};
  std::size_t round_head_ = 0;
  std::size_t round_size_ = 0;
};

}  // namespace edgesgd::protocol
