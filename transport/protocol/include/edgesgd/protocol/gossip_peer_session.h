#pragma once

// A decentralized gossip peer as a sans-I/O state machine (see session.h). Peers are the nodes
// of a Topology (topology.h); each knows only its own row of the mixing matrix W and talks only
// to its neighbours. The peer runs one of the algorithms of docs/algorithms.md §6 (GossipAlgorithm;
// each one's update rule lives in transport/protocol/src/gossip/) over one of two exchanges:
//
// Dense (D-PSGD, gradient tracking, DeTAG): an exchange step sends this peer's vector(s) to every
// live neighbour (GossipExchange{phase 0, step r, vector Model or Tracker}, dense identity
// payload, envelope round k), collects the neighbours' vectors of the same (k, r) until every
// live neighbour's have arrived or the neighbour deadline (config, per step) passes — a silent,
// slow or dead neighbour — and applies one step of accelerated gossip to each vector Z:
//
//   Z_{r+1} = (1 + eta_g) * (sum_{j heard} W_ij Z_j,r + (W_ii + sum_{j missed} W_ij) Z_i,r)
//             - eta_g * Z_{r-1}                                  (Z_{-1} = Z_0, config.accel)
//
// Round (phase) k is `gossip_steps` (R) such steps; at its start the peer computes g_k, the mean
// of `phase_batches` (B) gradient calls at x_k (local_step 0..B-1). A frame of the current step
// is mixed in as it arrives (weighted sum in arrival order); one of the next step, from a
// neighbour that is ahead, goes into a second accumulator (one slot per neighbour and vector: a
// second one is a duplicate); later steps are kFuture, earlier ones kLate (the step that just
// closed) or kStale. Memory is a fixed number of model-sized vectors whatever the degree.
//
// Against public copies (CHOCO, BEER; R = 1): every peer keeps public copies ẑ_j of each
// exchanged vector of itself and of each neighbour (degree δ: δ + 1 per vector, zero at the
// start), identical at every holder, and sends C(z - ẑ_i) (GossipVector::kModelDelta,
// kTrackerDelta, config.codec; the same bytes to every neighbour). x̂_j += decode(q_j) for j = i
// and each neighbour, keyed by CodecContext{seed, round, j}; the sender decodes its own frame
// through the same path, so the copies agree bit for bit. The step's mix is the consensus sum
// sum_{j heard} W_ij (ẑ_j - ẑ_i). The copies stay identical only if every holder applies the same
// deltas in the same order (float addition does not commute bit for bit), so a neighbour's deltas
// are applied strictly in round order, as they arrive, whatever this peer's own round: one of the
// current round joins this round's consensus; one of a later round (a neighbour that is ahead)
// advances the copy at once, and each round the copy has passed counts the neighbour as heard,
// with the copy as it stands when the round starts; one of a closed round (a neighbour that
// missed the deadline) is still applied — that round's consensus went without it, its weight on
// the diagonal, but the copy is whole again. A delta that would skip a round (the one before it
// was lost) is rejected as kOutOfOrder and the copy is resynchronised: the holder sends the
// neighbour a CopyRequest (at most one per neighbour per round while it waits), the neighbour
// answers with its own public copy, dense and lossless (GossipVector::kModelCopy, envelope round
// n = the deltas it holds; GossipInfo.step names the vector: 0 the model, 1 the tracker), and the
// holder replaces its copy and continues with delta n. Until then the neighbour stays out of this
// peer's consensus. A peer sends a copy ahead of any delta it queues for the same neighbour, so
// the delta that follows it on an ordered link applies. Without public copies (CHOCO's naive
// baseline) every copy is reset to zero before each delta.
//
// Re-weighting: a missed neighbour's weight (per vector) moves onto the diagonal, so the row
// still sums to 1 and the update stays a convex mix. The matrix actually applied in such a step
// is no longer symmetric (the neighbour may have heard this peer), so the network average drifts
// a little in steps with misses; counters().neighbours_missed and reweighted_steps say how often
// that happened. Received frames are checked and either accepted or counted by
// GossipRejectReason and dropped: nothing a neighbour sends can crash the peer or hold it past
// the deadline.
//
// Lost neighbours: OnPeerLost(j) or a Leave from j marks j lost. Lost neighbours are neither sent
// to nor waited for (a step completes when every live neighbour was heard); when every neighbour
// is lost the peer waits for the deadline each step, so a neighbour that comes back finds it
// still pacing. A lost neighbour's vectors are still mixed in when they pass every check; it is
// live again (a revival, and it is sent the current step's vectors if that is its step) once
// one arrives for a step at least two past the step in which it was lost — frames that were
// merely in flight at the loss are at most one step ahead, and must not make every later step
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
// round). The first frame of each round carries work_samples = B * samples_per_step: the
// simulator charges the gradient's compute time before the round's frames leave the device.
//
// Memory: everything comes from the arena at Init; after Init no call allocates, on the heap or
// from the arena. At most two steps start within one call (a step completed by buffered frames
// can be followed by one more start, which needs fresh frames; a CHOCO or BEER round completed
// from the copies of neighbours that are ahead waits for the next call, with NextWakeup() due at
// once), so two frame builders per vector, used by step parity, keep every handed-out frame
// valid as the Session contract requires.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"
#include "edgesgd/protocol/event_log.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/protocol/topology.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "edgesgd/wire/messages.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::protocol {

namespace internal {
class GossipRule;
struct GossipState;
}  // namespace internal

// The gradient callback is the workers' GradientFunction (worker_session.h), called once per
// round with local_step 0. A non-ok Status or a non-finite gradient is counted as a gradient
// error and the peer still mixes: D-PSGD and CHOCO take no gradient step that round, the
// trackers keep g_{k-1}. The neighbours still get its vectors, so one bad batch never stalls them.

// The decentralized algorithm a peer runs (docs/algorithms.md §6; each one's update rule is a
// file of transport/protocol/src/gossip/).
enum class GossipAlgorithm : std::uint8_t {
  kDpsgd = 0,
  kGradientTracking = 1,
  kDetag = 2,
  kChoco = 3,
  kBeer = 4,
};

// Lower-case name ("dpsgd", "gt", "detag", "choco", "beer"); never null.
const char* GossipAlgorithmName(GossipAlgorithm algorithm);

// Whether the algorithm exchanges a tracker besides the model (false for an unknown value).
bool TracksGradients(GossipAlgorithm algorithm);

// Whether the algorithm sends compressed deltas against public copies (CHOCO and BEER) rather
// than dense vectors (false for an unknown value).
bool CompressesGossip(GossipAlgorithm algorithm);

// Most gradient calls averaged per round.
inline constexpr std::uint32_t kMaxPhaseBatches = 1u << 20;

struct GossipConfig {
  GossipAlgorithm algorithm = GossipAlgorithm::kDpsgd;
  // This peer's id (mixing.peer, its device id 1..n), its neighbours and its row of W; usually
  // MakeMixingRow(topology, rule, id).
  MixingRow mixing;
  TensorLayout layout;  // the model's tensors over one flat vector of layout.dimension() floats
  std::uint32_t rounds = 100;   // T >= 1 (DeTAG: phases)
  float learning_rate = 0.01f;  // >= 0 and finite; 0 runs pure gossip averaging
  // R, exchange steps (accelerated gossip rounds) per round: 1 for D-PSGD and gradient tracking,
  // 1..kMaxGossipSteps for DeTAG (DetagGossipSteps gives the recipe).
  std::uint32_t gossip_steps = 1;
  // eta_g of accelerated gossip, in [0, 1): 0 for D-PSGD and gradient tracking; DeTAG uses
  // AcceleratedGossipRate(lambda) (0 makes its R steps plain gossip rounds).
  float accel = 0.0f;
  // B, gradient calls (mini-batches) averaged into a round's gradient, >= 1.
  std::uint32_t phase_batches = 1;
  // Key of shared random choices. The dense exchange draws none; CHOCO's and BEER's codec does
  // (rand_k indices, random_block starts, dither), keyed by (seed, round, sender).
  std::uint64_t seed = 0;
  // The codec of what the peer sends: CHOCO's model deltas, BEER's model and tracker deltas (a
  // codec CheckChocoCodec accepts); the identity for the dense algorithms.
  CodecParams codec = ModelCodec();
  // CHOCO's and BEER's consensus step gamma, in (0, 1] (DefaultConsensusStep gives the
  // codec's declared choice); 1 for the dense algorithms, which have none.
  float consensus_step = 1.0f;
  // CHOCO keeps public copies (true); false runs the naive baseline without them (see the top
  // of this file). Must be true for the other algorithms.
  bool public_copies = true;
  // How long an exchange step waits for its neighbours' vectors, from the step's start; > 0.
  // kNever waits for every live neighbour indefinitely (then only OnPeerLost or a Leave unblocks
  // a step whose neighbour went silent).
  TimeNs neighbour_deadline_ns = 10'000'000'000;

  friend constexpr bool operator==(const GossipConfig&, const GossipConfig&) = default;
};

// Checks a configuration before any memory is taken: a known algorithm, a valid mixing row
// (ValidateMixingRow), a non-empty layout whose frames fit kMaxFrameBytes, rounds >= 1, a
// non-negative finite learning rate, R and eta_g as the algorithm allows (1 and 0 unless DeTAG;
// DeTAG: R in 1..kMaxGossipSteps, eta_g in [0, 1)), B in 1..kMaxPhaseBatches, a non-zero
// deadline, and the codec and consensus step: CHOCO and BEER take valid codec parameters that
// CheckChocoCodec accepts and gamma in (0, 1]; the dense algorithms the identity codec and
// gamma = 1; public_copies = false only with CHOCO. Reads only `config`; does not allocate.
// Errors: kInvalidArgument with a reason.
Status ValidateGossipConfig(const GossipConfig& config);

// Whether CHOCO (and BEER) can track public copies with `codec`: their analyses need a
// compressor that shrinks what it leaves behind, E||x - C(x)||^2 <= (1 - delta) ||x||^2. Refused,
// with the reason: reg_top_k (its selection reads a server's aggregate, which gossip has none of:
// top_k is the same selection without it), sign with unit scales (it would add +-1 to every
// coordinate), rand_k scaled by d/k (not contractive: its variance d/k - 1 is at least 1 for k <=
// d/2; the unscaled form is) and qsgd whose bucket B is at least s^2 for its s levels (its variance
// bound min(B/s^2, sqrt(B)/s) is then at least 1; for the dq schedule, with the fewest levels it
// may pick). Reads only `codec`; does not allocate. Errors: kInvalidArgument.
Status CheckChocoCodec(const CodecParams& codec);

// The consensus step gamma CHOCO and BEER use with `codec` when none is given: the one its
// descriptor declares (CodecTraits::consensus_step; docs/algorithms.md §6 says how they were
// measured). Does not allocate. Errors: kInvalidArgument for a codec that declares none.
Result<float> DefaultConsensusStep(const CodecParams& codec);

struct GossipOptions {
  GradientFunction gradient = nullptr;  // required
  void* user = nullptr;
  // The codecs this program can encode and decode (AllCodecs() has every one); required for
  // CHOCO and BEER, unused by the dense algorithms. Must outlive the session.
  const CodecRegistry* codecs = nullptr;
  // Training samples behind one gradient call; B times this is reported as work_samples on each
  // round's first frame (0: the simulator charges no compute time).
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
                       // (a tracker to a D-PSGD peer, a step >= R)
  kWrongCodec,         // a payload of another codec or layout than the run's (dense identity
                       // for the dense algorithms), or a qsgd header the run cannot produce
  kBadPayload,         // the wrong number of values, a non-finite value, or (CHOCO, BEER) a
                       // payload the codec's checks refuse
  kLate,               // a vector for the step that just closed (a neighbour past the deadline;
                       // CHOCO and BEER apply such deltas to the copy instead)
  kStale,              // a vector for an older step
  kDuplicate,          // a second copy of the same vector from the same neighbour for one step
                       // (CHOCO, BEER: a delta the sender's copy already holds)
  kFuture,             // a vector two or more steps ahead (only the next step is buffered), or
                       // for a round >= T (CHOCO, BEER: only the latter)
  kOutOfOrder,         // CHOCO, BEER: a delta that would skip a round of the sender's public copy
                       // (the frame before it was lost)
};
inline constexpr std::size_t kGossipRejectReasonCount = 11;

// Lower-snake name of a reason ("late"), for logs and metrics; never null.
const char* GossipRejectReasonName(GossipRejectReason reason);

using GossipRejectEvent = RejectEventOf<GossipRejectReason>;

// One completed round (all its R exchange steps), for a metrics row.
struct GossipRoundEvent {
  std::uint32_t round = 0;
  TimeNs time_closed = 0;
  // Summed over the round's steps: neighbours whose every vector was mixed in, and neighbours
  // with at least one vector's weight moved onto the diagonal (silent or lost).
  std::uint32_t neighbours_heard = 0;
  std::uint32_t neighbours_missed = 0;
  bool deadline_passed = false;      // a step closed by the deadline rather than by the last
                                     // vector
  std::uint64_t bytes_sent = 0;      // cumulative bytes of every frame handed out by PollFrame
  std::uint64_t bytes_received = 0;  // cumulative bytes of every frame received
};

struct GossipCounters {
  std::array<std::uint64_t, kGossipRejectReasonCount> rejected{};  // indexed by the reason
  std::uint64_t frames_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t models_accepted = 0;  // neighbour vectors mixed in (current or next step);
                                      // CHOCO, BEER: deltas applied to a neighbour's copy
  std::uint64_t models_buffered = 0;  // of those, received a step early (CHOCO, BEER: a round
                                      // or more)
  std::uint64_t late_deltas = 0;      // CHOCO, BEER: deltas of a closed round, applied to the copy
  std::uint64_t copy_requests_sent = 0;  // CHOCO, BEER: CopyRequests for a copy missing a delta
  std::uint64_t copies_sent = 0;         // CHOCO, BEER: own public copies sent in answer
  std::uint64_t copies_applied = 0;      // CHOCO, BEER: neighbours' copies that replaced a held one
  std::uint64_t rounds_completed = 0;
  std::uint64_t steps_completed = 0;    // exchange steps: R per round
  std::uint64_t neighbours_heard = 0;   // summed over steps
  std::uint64_t neighbours_missed = 0;  // summed over steps
  std::uint64_t reweighted_steps = 0;   // steps with at least one missed neighbour
  std::uint64_t deadline_closes = 0;    // steps closed by the deadline
  std::uint64_t gradient_errors = 0;    // rounds whose gradient call failed or was not finite
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

class GossipPeerSession final : public InlineSession<GossipPeerSession> {
 public:
  static constexpr std::size_t kRejectLogCapacity = 32;
  static constexpr std::size_t kRoundLogCapacity = 32;
  static constexpr std::size_t kControlBuilderBytes =
      wire::kMaxControlFrameBytes + wire::kBuilderScratchBytes;
  // A CopyRequest carries a one-value dense payload (a GossipExchange always has one).
  static constexpr std::size_t kCopyRequestBuilderBytes =
      wire::FrameBuilderBytes(ModelCodec(), TensorLayout::Single(1).value());

  // Largest frame a peer of `config` sends or accepts (a payload of config.codec: the dense model
  // for the dense algorithms, and with public copies the dense copy if larger); 0 when the layout
  // cannot be sized. Size drivers' receive buffers with it.
  static std::size_t MaxFrameBytes(const GossipConfig& config);

  // Whether a peer of `config` sends and answers CopyRequests: CHOCO with public copies, BEER.
  static bool ResynchronisesCopies(const GossipConfig& config);

  // Model-sized float vectors a peer of `config` keeps. Per exchanged vector (the model, and the
  // tracker when tracking) the working copy and its mixing accumulator, plus, for the dense
  // algorithms, the accumulator of the next step's early vectors (and Z_{r-1} when eta_g != 0),
  // or, against public copies, degree + 1 copies; the round's gradient (and a per-call buffer when
  // B > 1); when tracking the previous gradient, and for R > 1 the round-start snapshots of x and
  // y. 0 for an unknown algorithm.
  static std::size_t ModelVectors(const GossipConfig& config);

  // Exact arena bytes Init takes: ModelVectors(config) vectors of d floats, two frame builders
  // (of config.codec's frames) per exchanged vector, the codec scratch (CHOCO, BEER), one
  // control-frame builder, and when copies are resynchronised, per exchanged vector the builders
  // of its dense copy and its CopyRequest. 0 when the algorithm, layout or codec cannot be sized
  // (see ValidateGossipConfig for the full checks).
  static std::size_t ArenaBytes(const GossipConfig& config);

  GossipPeerSession() = default;
  GossipPeerSession(const GossipPeerSession&) = delete;
  GossipPeerSession& operator=(const GossipPeerSession&) = delete;

  // Validates `config` and `options`, takes every buffer from `arena` (ArenaBytes) and copies
  // the initial model. Frames received before Start are already accepted (for steps 0 and 1).
  // Reads its arguments; allocates from the arena only, never afterwards.
  // Errors (with a reason): kInvalidArgument (config, no gradient callback, model size or
  // non-finite model), kFailedPrecondition (already initialized, arena sealed),
  // kResourceExhausted (arena smaller than ArenaBytes; nothing is taken then).
  Status Init(Arena& arena, const GossipConfig& config, const GossipOptions& options);

  // ---- Session (InlineSession's forwarders) ----
  // Start begins round 0. OnFrame takes any bytes from any peer. None of these allocates.
  bool Finished() const override { return phase_ == GossipPhase::kFinished; }

  // As ServerSession's: the oldest undrained rejection / completed round, from logs of the last
  // kRejectLogCapacity / kRoundLogCapacity entries.
  bool PollRejectEvent(GossipRejectEvent& out);
  bool PollRoundEvent(GossipRoundEvent& out);

  // ---- State, for drivers and tests ----
  GossipPhase phase() const { return phase_; }
  const GossipConfig& config() const { return config_; }
  PeerId id() const { return config_.mixing.peer; }
  // x_i: the start model of round(), or the final model once finished (unchanged while the
  // round's R steps run).
  std::span<const float> model() const { return model_start_; }
  // y_i at the start of round() (tracking only; empty for D-PSGD and CHOCO). BEER: v_k.
  std::span<const float> tracker() const { return tracker_start_; }
  // CHOCO and BEER: the public copy this peer holds of `peer` (itself or a neighbour) of vector
  // `vector` (0 the model, 1 BEER's tracker), and how many of that peer's deltas it has applied
  // (rounds 0..n-1). Empty / 0 for another peer, vector or algorithm.
  std::span<const float> public_copy(PeerId peer, std::size_t vector = 0) const;
  std::uint64_t public_copy_rounds(PeerId peer, std::size_t vector = 0) const;
  // The round in progress (T once finished) and its exchange step (0..R-1).
  std::uint32_t round() const { return round_; }
  std::uint32_t step() const { return step_; }
  const GossipCounters& counters() const { return counters_; }
  // kOk, or why the run stopped early: kDataLoss (the model became non-finite), kInternal.
  Status status() const { return status_; }
  bool IsNeighbour(PeerId peer) const { return NeighbourIndex(peer) >= 0; }
  bool IsLive(PeerId peer) const;
  // Neighbours every vector of whose current step has been mixed in so far.
  std::uint32_t heard_count() const;
  // When the current step's deadline falls (kNever unless running).
  TimeNs round_deadline() const { return phase_ == GossipPhase::kRunning ? deadline_ : kNever; }

 private:
  // Per-neighbour state lives in fixed arrays indexed like config_.mixing.neighbours, with the
  // set-valued parts (live, heard) as bit masks: bit k is neighbour k.
  static_assert(kMaxNeighbours <= 64, "neighbour sets are 64-bit masks");
  static constexpr std::size_t kMaxVectors = 2;  // the model and the tracker
  // Pending bits per neighbour: the frame of (vector v, slot s) is bit 2v + s (slots by step
  // parity), then the Leave.
  using PendingBits = std::uint16_t;
  static constexpr PendingBits kPendingLeave = 16;
  static constexpr PendingBits PendingBit(std::size_t vector, std::size_t slot) {
    return static_cast<PendingBits>(1u << (2 * vector + slot));
  }
  // Resynchronisation frames of vector v's copies (CHOCO, BEER), sent before anything else to
  // the same neighbour.
  static constexpr PendingBits PendingCopy(std::size_t vector) {
    return static_cast<PendingBits>(32u << vector);
  }
  static constexpr PendingBits PendingRequest(std::size_t vector) {
    return static_cast<PendingBits>(128u << vector);
  }

  // One exchanged vector's working state.
  struct Exchanged {
    wire::GossipVector kind = wire::GossipVector::kModel;
    std::span<float> current;      // Z_r
    std::span<float> previous;     // Z_{r-1} (empty when eta_g = 0)
    std::span<float> mix;          // sum of W_ij Z_j,r over the neighbours heard this step
    std::span<float> next_mix;     // the same for next step's vectors received early
    std::uint64_t heard = 0;       // mixed into `mix` this step
    std::uint64_t heard_next = 0;  // mixed into `next_mix`
    std::array<std::optional<wire::FrameBuilder>, 2> builders;  // by step parity
    std::array<std::span<const std::byte>, 2> frames;

    // CHOCO and BEER: the public copies of this vector, of this peer and of each neighbour
    // (indexed like the mixing row), with the number of deltas applied to each (the round of
    // the next one). `mix` is the round's consensus sum sum_{j heard} W_ij (ẑ_j - ẑ_i).
    std::span<float> own_copy;
    std::array<std::span<float>, kMaxNeighbours> copies{};
    std::array<std::uint64_t, kMaxNeighbours> copy_rounds{};
    std::uint64_t own_rounds = 0;
    // Resynchronisation: neighbours asked for their copy (mask) and the round each was last
    // asked in; the builders and frames of this peer's copy and of its request.
    std::uint64_t awaiting_copy = 0;
    std::array<std::uint32_t, kMaxNeighbours> copy_requested_round{};
    std::optional<wire::FrameBuilder> copy_builder;
    std::optional<wire::FrameBuilder> request_builder;
    std::span<const std::byte> copy_frame;
    std::span<const std::byte> request_frame;
  };

  Status TakeBuffers(Arena& arena);

  friend class InlineSession<GossipPeerSession>;
  void DoStart(TimeNs now);
  void DoTimer(TimeNs now);
  void DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now);
  void DoPeerLost(PeerId peer, TimeNs now);
  bool DoPollFrame(OutgoingFrame& out);
  TimeNs DoNextWakeup() const;

  // Whether the exchange is deltas against public copies (false before Init).
  bool compressed() const;
  // The vectors as the rule updates them, at the current round and step.
  internal::GossipState RuleState();
  // Index of `peer` in the mixing row, or -1.
  int NeighbourIndex(PeerId peer) const;
  void HandleExchange(std::size_t index, const wire::FrameView& view, TimeNs now);
  // CHOCO, BEER: a neighbour's delta of exchanged vector `vector`, applied to its copy if it is
  // the copy's next round.
  void HandleDelta(std::size_t index, std::size_t vector, const wire::FrameView& view, TimeNs now);
  // CHOCO, BEER: a neighbour's CopyRequest for this peer's copy of `vector` (answered with that
  // copy) and its ModelCopy (replaces the copy of `vector` held of it).
  void HandleCopyRequest(std::size_t index, std::size_t vector, const wire::FrameView& view,
                         TimeNs now);
  void HandleCopy(std::size_t index, std::size_t vector, const wire::FrameView& view, TimeNs now);
  // CHOCO, BEER: asks neighbour `index` for its copy of `vector`, unless already asked in this
  // round.
  void RequestCopy(std::size_t index, std::size_t vector);
  // CHOCO, BEER: counts neighbour `index` in this round's consensus of `vector` if its copy holds
  // this round's delta and it has not been counted yet.
  void CountInIfAhead(std::size_t index, std::size_t vector);
  // A lost neighbour heard from for `step` is live again when the step shows it is back.
  void ReviveIfBack(std::size_t index, std::uint64_t step);
  void HandleLeave(std::size_t index);
  // Which exchanged vector a frame's (phase, step, vector) belongs to, or -1 when this
  // algorithm never sends it.
  int ExchangedIndex(const wire::GossipInfo& info) const;
  void MarkLost(std::size_t index);
  void Reject(PeerId peer, GossipRejectReason reason, std::uint32_t round, TimeNs now);

  // Global index of (round, step): round * R + step.
  std::uint64_t StepIndex(std::uint32_t round, std::uint32_t step) const {
    return std::uint64_t{round} * config_.gossip_steps + step;
  }
  std::uint64_t CurrentStep() const { return StepIndex(round_, step_); }
  std::span<Exchanged> exchanged() { return std::span<Exchanged>(exchanged_).first(vectors_); }
  std::span<const Exchanged> exchanged() const {
    return std::span<const Exchanged>(exchanged_).first(vectors_);
  }

  // Closes steps while the current one is complete or past its deadline, `started` steps having
  // started in this call already.
  void Advance(TimeNs now, std::uint32_t started);
  bool StepComplete() const;
  // The round's gradient at x_k (the mean of B calls) into gradient_; false if a call failed.
  bool ComputeGradient();
  void StartStep(TimeNs now);
  // `values` as a GossipExchange frame in `builder`. Errors: those of FrameBuilder.
  Result<std::span<const std::byte>> BuildFrame(wire::FrameBuilder& builder,
                                                const wire::FrameHeader& header,
                                                const wire::PayloadMessage& message,
                                                std::span<const float> values) const;
  void CloseStep(TimeNs now, bool deadline_passed);
  // CHOCO, BEER: q_i = C(z - ẑ_i) of exchanged vector `vector` as a frame in the builder of
  // `slot` (the rule's DeltaInput), and ẑ_i += decode(q_i) from the frame's bytes. Errors: the
  // codec's and the builder's.
  Result<std::span<const std::byte>> BuildDeltaFrame(std::size_t vector, std::size_t slot,
                                                     const wire::FrameHeader& header,
                                                     const wire::PayloadMessage& message);
  // CHOCO, BEER: `copy` += decode(payload) for `sender`'s delta of `round`, after the codec's
  // checks; the copy is untouched on error. Errors: kDataLoss (a payload the codec refuses).
  Status ApplyDelta(const CodecParams& params, const PayloadView& payload, std::uint32_t round,
                    PeerId sender, std::span<float> copy);
  // CHOCO, BEER: adds W_ik (ẑ_k - ẑ_i) of neighbour `index` to the round's consensus
  // accumulator of `vector`.
  void AddConsensusTerm(std::size_t index, std::size_t vector);
  // One accelerated-gossip step of `vector` with the row re-weighted for its misses.
  void MixStep(Exchanged& vector);
  void FinishRound(TimeNs now);
  void Finish(wire::LeaveReason reason, Status status);

  void SetPending(std::size_t index, PendingBits bits);
  void ClearPending(std::size_t index, PendingBits bits);

  GossipConfig config_;
  GossipOptions options_;
  GossipPhase phase_ = GossipPhase::kUninitialized;
  Status status_;
  GossipCounters counters_;
  EventLog<GossipRejectEvent, kRejectLogCapacity> reject_log_;
  EventLog<GossipRoundEvent, kRoundLogCapacity> round_log_;
  std::size_t max_receive_bytes_ = 0;
  std::uint64_t all_neighbours_ = 0;                       // mask of every neighbour
  std::uint64_t live_ = 0;                                 // mask of live neighbours
  std::array<std::uint64_t, kMaxNeighbours> lost_step_{};  // CurrentStep() when last marked lost
  std::array<PendingBits, kMaxNeighbours> pending_{};      // pending bits per neighbour
  std::size_t pending_frames_ = 0;                         // set bits over pending_

  const internal::GossipRule* rule_ = nullptr;  // the algorithm's update rule, set at Init
  std::array<Exchanged, kMaxVectors> exchanged_;
  std::size_t vectors_ = 1;             // exchanged vectors: 1, or 2 when tracking
  std::span<float> gradient_;           // g_k
  std::span<float> batch_gradient_;     // one call's gradient when B > 1
  std::span<float> previous_gradient_;  // g_{k-1} (tracking, BEER)
  // x_k and y_k: for R > 1 separate snapshots, for R = 1 the working copies (which do not change
  // until the round's single step closes).
  std::span<float> model_start_;
  std::span<float> tracker_start_;
  // The codec's scratch (CHOCO, BEER; the public copies live in Exchanged).
  std::span<std::byte> codec_scratch_;

  std::array<std::uint64_t, 2> frame_steps_{};  // the step each slot's frames belong to
  std::array<std::uint64_t, 2> frame_work_{};   // work_samples still to report for the slot
  std::optional<wire::FrameBuilder> leave_builder_;
  std::span<const std::byte> leave_frame_;

  std::uint32_t round_ = 0;
  std::uint32_t step_ = 0;
  TimeNs deadline_ = kNever;
  std::uint64_t sequence_ = 0;
  // The round so far, for its GossipRoundEvent.
  std::uint32_t round_heard_ = 0;
  std::uint32_t round_missed_ = 0;
  bool round_deadline_passed_ = false;
};

}  // namespace edgesgd::protocol
