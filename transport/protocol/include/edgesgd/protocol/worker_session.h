#pragma once

// A parameter-server worker as a sans-I/O state machine (see session.h). It joins (re-sending
// Join until a Welcome arrives), takes its training buffers from the arena on the first
// Welcome, and then answers every ModelBroadcast with an Update:
//
//   kMean      error feedback (ErrorFeedbackWorker): H local steps, each asking the gradient
//              callback for the gradient at GradientPoint(), then Compress straight into the
//              Update frame (no copy of the payload). A codec that chooses its parameters per
//              round (qsgd's quantization schedule: the level count from the norm of the round's
//              last local gradient) is asked first; the frame carries the choice. With
//              SCAFFOLD each local gradient is corrected by c - c_i, and the frame also carries
//              the compressed change of c_i (ScaffoldDevice); c arrives with each model.
//   kMajority  Signum: one gradient at the model, m = beta * m + (1 - beta) * g, and sign(m)
//              packed straight into the Update frame.
//
// With secure aggregation (RunConfig::secure, secure_aggregation.h) the update is computed the
// same way, but it never leaves the device as it is: its payload values are encoded in fixed
// point (its votes as 0/1 lanes, for majority vote) and masked, and the worker answers the
// broadcast with its round keys, then each of the server's SecureAggregation messages with the next
// phase's (shares, masked input, revealed shares). A message of a phase already answered gets the
// same answer again.
//
// A broadcast with content Model replaces the worker's model. One with content Aggregate is
// applied to the model the worker holds (mean: x -= decode(aggregate); majority: x -= lr * (V +
// wd * x)) only if that model is the previous round's; otherwise the worker skips the round and
// re-sends Join, and the server answers with a Welcome and, if the worker is a participant of
// the round, the full model. A broadcast of a round the worker already answered makes it
// re-send the same Update (its first one may have been lost). Leave from the server ends the
// session.
//
// A stateful selector (reg_top_k) needs the aggregate of the worker's last update: a full-model
// broadcast of round r that follows the worker's update of round r-1 reveals it as the model
// change x_{r-1} - x_r, over ModelBroadcast.participants contributors (see LearnAggregate).
//
// What a driver does: Init(arena, options); Start(now); feed OnFrame / OnPeerLost / OnTimer as
// for any Session (frames at 8-byte aligned addresses), and after every call PollFrame until
// false. The gradient callback runs inside OnFrame; OutgoingFrame::work_samples tells a
// simulator how much computation an Update cost.
//
// Memory: InitArenaBytes() at Init, WelcomeArenaBytes(config) on the first Welcome, nothing
// afterwards; ArenaBytes(config) is their sum. A Join advertises the bytes the worker can still
// spend, so a server rejects a device that is too small before it tries.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/idle_memory.h"
#include "edgesgd/core/scaffold.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_types.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/secagg/frame_stage.h"
#include "edgesgd/secagg/lanes.h"
#include "edgesgd/secagg/qsgd_levels.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol {

namespace internal {
struct SecureDevice;
class UpdateStage;
}  // namespace internal

// Computes the loss gradient (without weight decay) at `point` (the model's dimension) into
// `gradient` (same size) for local step `local_step` of round `round`. `user` is
// WorkerOptions::user. `point` is valid during the call only (it may be the received broadcast
// frame itself, see WorkerSession::KeepsModelCopy): copy it to keep the model. A non-ok Status
// makes the worker skip the round (counted).
using GradientFunction = Status (*)(void* user, std::span<const float> point, std::uint32_t round,
                                    std::uint32_t local_step, std::span<float> gradient);

// Fills `out` with fresh secret random bytes for round `round`'s secure aggregation keys. `user`
// is WorkerOptions::user. A non-ok Status makes the worker sit the round out (counted).
using EntropyFunction = Status (*)(void* user, std::uint32_t round, std::span<std::byte> out);

struct WorkerOptions {
  // This worker's peer id (1..n) if it has one, else wire::kUnassignedDevice (the server then
  // assigns the id of the link the Join came on). A Welcome assigning another id is rejected.
  std::uint32_t device_id = wire::kUnassignedDevice;
  GradientFunction gradient = nullptr;  // required
  // The codecs this device can run (required; must outlive the session). A Join advertises
  // them, and the server refuses a device that lacks the run's codec.
  const CodecRegistry* codecs = nullptr;
  void* user = nullptr;
  // Training samples behind one local step, reported in Update.samples and work_samples; 0
  // means the run's batch size.
  std::uint32_t samples_per_step = 0;
  // The most local steps this device takes in a round, for a device whose time budget fits
  // fewer than the run's H (a slow one); 0 or anything from H up: all H. Its Update says how
  // many it took (the mean ignores it; an aggregation may weigh by it).
  std::uint32_t local_step_limit = 0;
  TimeNs join_retry_ns = 1'000'000'000;  // Join is re-sent this often until a Welcome arrives
  // Heartbeats keep the server's liveness timer fed while the worker is not sampled; kNever
  // sends none (then the server must not use a liveness timeout).
  TimeNs heartbeat_interval_ns = 10'000'000'000;
  // Differential privacy's noise on the devices (PrivacyMode::kDistributed): the function that
  // draws it (edgesgd::AddNoiseShare; nullptr leaves the noise code out of the image) and a
  // 128-bit secret of this device (never all zero) that keys it, drawn from the operating
  // system's entropy by a real deployment (a simulator may derive it from its seed). A worker
  // without both does not advertise distributed noise in its Join and refuses such a run.
  // Clipping and the central mode need neither.
  NoiseShareFunction add_noise = nullptr;
  SecretKey noise_key{};
  // Secure aggregation (RunConfig::secure): the source of each round's secret keys — the
  // operating system's (getrandom) or a board's TRNG on a device; a simulator may derive them
  // from its seed. Without one the worker does not advertise secure aggregation in its Join and
  // refuses such a run.
  EntropyFunction secure_entropy = nullptr;
  // A round's roster with fewer neighbours than this and the device refuses to mask: a server
  // that isolated it with few (or invented) neighbours could otherwise learn its update. 1 here
  // trusts the server's rosters, as a simulation of the protocol may; a device facing a real
  // server wants 3 or more (`edgesgd worker` defaults to 3), which keeps the threshold at 3.
  std::uint32_t secure_minimum_neighbours = 1;
  // Signed secure rounds (SecureAggregationParams::signed_rounds): this device's signer and the
  // verifier of the other devices' keys, both from a source the server does not control
  // (`edgesgd keygen`'s files). A worker with them refuses a run whose secure rounds are not
  // signed (a lying server would simply not ask for the check); one without them refuses a
  // signed run. Both must outlive the session.
  secagg::DeviceSigning secure_signing{};
};

struct WorkerCounters {
  std::uint64_t frames_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t malformed = 0;             // DecodeFrame failed (incl. misaligned)
  std::uint64_t unknown_sender = 0;        // not from the server
  std::uint64_t unexpected = 0;            // a message a worker does not take, or out of phase
  std::uint64_t stale_broadcasts = 0;      // a broadcast of a round older than the last one
  std::uint64_t duplicate_broadcasts = 0;  // the last round's broadcast again (update re-sent)
  std::uint64_t bad_payloads = 0;          // a broadcast whose payload failed verification
  std::uint64_t rejected_welcomes = 0;     // refused, another id's, or not the first Welcome
  std::uint64_t resyncs = 0;               // aggregates that did not fit the held model
  std::uint64_t gradient_errors = 0;       // the callback returned an error
  std::uint64_t encode_errors = 0;         // the update could not be encoded (diverged)
  std::uint64_t secure_errors = 0;   // a secure aggregation message refused (the round is lost)
  std::uint64_t secure_clipped = 0;  // values clipped to the secure aggregation bound
  // Neighbours' sealed shares that did not open (tampered or misaddressed): dropped, the round
  // goes on without them.
  std::uint64_t secure_shares_unopened = 0;
  std::uint64_t joins_sent = 0;
  std::uint64_t heartbeats_sent = 0;
  std::uint64_t updates_sent = 0;  // distinct updates computed and queued
  std::uint64_t updates_resent = 0;
};

// Why a device that sent `join` cannot run `config` (kOk when it can): it lacks the run's codec,
// its memory is below WelcomeArenaBytes, or it cannot receive the largest broadcast. Zero fields
// of the Join mean "not stated" and are not checked. Does not allocate.
// `workers` is the run's worker count (it sizes secure aggregation's neighbourhood).
Status CheckWorkerCanRun(const RunConfig& config, const wire::JoinInfo& join,
                         std::uint32_t workers = kMaxWorkers);

enum class WorkerPhase : std::uint8_t { kUninitialized, kIdle, kJoining, kTraining, kFinished };

class WorkerSession final : public InlineSession<WorkerSession> {
 public:
  // The builder buffer of one control frame (Join, Heartbeat, Leave).
  static constexpr std::size_t kControlBuilderBytes =
      wire::kMaxControlFrameBytes + wire::kBuilderScratchBytes;

  // Arena bytes Init takes: two control-frame builders.
  static constexpr std::size_t InitArenaBytes() {
    return 2 * edgesgd::ArenaBytes(kControlBuilderBytes);
  }

  // Whether the worker keeps a copy of the model between rounds. It keeps none when every round
  // brings the whole model and nothing reads it once the round's update is built: the model
  // downlink with mean aggregation and a codec that does not select by the last aggregate. The
  // update is computed inside the OnFrame that delivers the broadcast, so the round reads the
  // model in the frame itself: d floats fewer to copy each round and to hold.
  static constexpr bool KeepsModelCopy(const RunConfig& config) {
    return config.downlink != DownlinkKind::kModel ||
           config.aggregation != AggregationKind::kMean ||
           ErrorFeedbackWorker::SelectionStateBytes(config.layout, config.codec) != 0;
  }

  // Exact arena bytes the first Welcome of `config` takes: a gradient and, when the worker keeps
  // one (KeepsModelCopy), the model (d floats each); error feedback state, SCAFFOLD's control
  // variates when the run keeps them and, for the aggregate downlink, the codec's scratch (kMean)
  // or the Signum momentum (kMajority); the Update frame's builder; with secure aggregation its
  // device stage and frame builder, for a run of `workers` workers. 0 when the configuration
  // cannot be sized (see ValidateRunConfig for the full checks).
  static constexpr std::size_t WelcomeArenaBytes(const RunConfig& config,
                                                 std::uint32_t workers = kMaxWorkers) {
    const TensorLayout& layout = config.layout;
    const std::size_t d = layout.dimension();
    if (d == 0) return 0;
    const std::size_t builder = BuilderBytesFor(UpdateFrameBytes(config));
    if (builder == 0) return 0;
    const std::size_t vectors = KeepsModelCopy(config) ? 2 : 1;
    std::size_t bytes = vectors * ArenaBytesFor<float>(d) + edgesgd::ArenaBytes(builder);
    if (config.aggregation == AggregationKind::kMajority) {
      bytes += ArenaBytesFor<float>(d);
    } else {
      const std::size_t feedback =
          ErrorFeedbackWorker::StateBytes(layout, config.codec, config.feedback);
      if (feedback == 0) return 0;
      bytes += feedback;
      if (kScaffold && config.scaffold) {
        const std::size_t control = ScaffoldDevice::StateBytes(layout, config.codec);
        if (control == 0) return 0;
        bytes += edgesgd::ArenaBytes(sizeof(ScaffoldDevice)) + control;
      }
      if (config.downlink == DownlinkKind::kAggregate) {
        bytes += edgesgd::ArenaBytes(CodecScratchBytes(config.codec, layout));
      }
    }
    if (wire::kSecureAggregationFrames && config.secure.enabled) {
      const std::size_t secure = SecureArenaBytes(config, workers);
      if (secure == 0) return 0;
      bytes += secure;
    }
    return bytes;
  }

  // Arena bytes a worker needs for a run of `config` with `workers` workers: Init plus the
  // first Welcome.
  static constexpr std::size_t ArenaBytes(const RunConfig& config,
                                          std::uint32_t workers = kMaxWorkers) {
    const std::size_t welcome = WelcomeArenaBytes(config, workers);
    return welcome == 0 ? 0 : InitArenaBytes() + welcome;
  }

  WorkerSession() = default;
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Keeps `arena` (it must outlive the session) for the first Welcome and takes the control
  // builders from it. Allocates from the arena only. Errors (with a reason):
  // kInvalidArgument (no gradient callback or codec registry, device id 0, zero join retry or
  // heartbeat interval), kFailedPrecondition (already initialized, arena sealed),
  // kResourceExhausted (arena smaller than InitArenaBytes()).
  Status Init(Arena& arena, const WorkerOptions& options);

  // ---- Session (InlineSession's forwarders) ----
  // Start sends the first Join. None of these allocates; the first Welcome takes
  // WelcomeArenaBytes from the arena (if the arena is too small the worker sends Leave{Failure}
  // and finishes with status() kResourceExhausted).
  bool Finished() const override { return phase_ == WorkerPhase::kFinished; }

  // ---- State, for drivers and tests ----
  WorkerPhase phase() const { return phase_; }
  bool configured() const { return configured_; }
  // The run's configuration (meaningful once configured()).
  const RunConfig& config() const { return config_; }
  // The id the server assigned (options' device id before the Welcome).
  std::uint32_t id() const { return id_; }
  // Workers in the run, from the Welcome (meaningful once configured()): a worker that draws
  // its data shard by id needs to know how many shards there are.
  std::uint32_t workers() const { return welcome_.workers; }
  // The worker's copy of the model (empty before the Welcome and in runs where the worker keeps
  // none, see KeepsModelCopy), and the round whose start model it is (kNoRound before the first
  // broadcast). Not meaningful between rounds once a driver has released IdleBuffers(), which
  // can include it.
  std::span<const float> model() const { return model_; }
  static constexpr std::uint32_t kNoRound = 0xFFFFFFFFu;
  std::uint32_t model_round() const { return model_round_; }
  // Buffers the worker rewrites before it reads them when its next round starts (see
  // IdleMemory): the gradient, the error-feedback worker's IdleBuffers once the update is
  // compressed, the decode scratch of the aggregate downlink, and the model copy with the model
  // downlink (which brings the whole model every round) where the worker keeps one and the codec
  // does not select with the last aggregate (reg_top_k reads it off the model change): majority
  // vote. Never the residual, the momentum or the update frame, which the server may ask for
  // again. Empty before the Welcome.
  IdleMemory IdleBuffers() const;
  const WorkerCounters& counters() const { return counters_; }
  // kOk, or why the worker stopped: kResourceExhausted (arena too small for the run), or the
  // code of an Error the server answered the Join with.
  Status status() const { return status_; }
  // One line explaining a non-ok status() (the server's Error text, copied), "" otherwise.
  const char* failure_reason() const { return failure_reason_.data(); }
  // Why the server ended the session (meaningful once Finished() after a Leave).
  wire::LeaveReason leave_reason() const { return leave_reason_; }
  // The error-feedback state (kMean, once configured), for DEF-A read-outs and tests.
  const ErrorFeedbackWorker& error_feedback() const { return feedback_; }
  // SCAFFOLD's control variates (c_i and the round's c); nullptr outside SCAFFOLD runs.
  const ScaffoldDevice* scaffold() const { return scaffold_; }
  // Secure aggregation's device side; nullptr outside secure runs.
  const secagg::DeviceStage* secure_stage() const;

 private:
  // Secure aggregation's share of WelcomeArenaBytes: the device stage and its frame builder.
  static std::size_t SecureArenaBytes(const RunConfig& config, std::uint32_t workers);
  static secagg::DeviceStageLimits SecureLimits(const RunConfig& config, std::uint32_t workers,
                                                std::uint32_t minimum_neighbours);

  static constexpr std::uint8_t kPendingControl = 1;  // Join or Leave (control builder 0)
  static constexpr std::uint8_t kPendingUpdate = 2;
  static constexpr std::uint8_t kPendingHeartbeat = 4;

  friend class InlineSession<WorkerSession>;
  void DoStart(TimeNs now);
  void DoFrame(PeerId from, std::span<const std::byte> frame, TimeNs now);
  void DoPeerLost(PeerId peer, TimeNs now);
  void DoTimer(TimeNs now);
  bool DoPollFrame(OutgoingFrame& out);
  TimeNs DoNextWakeup() const;

  void HandleWelcome(const wire::FrameView& view, TimeNs now);
  void HandleBroadcast(const wire::FrameView& view, TimeNs now);
  void HandleError(const wire::FrameView& view);
  // Secure aggregation (worker_session_secure.cc): takes the device stage and its frame builder
  // from the arena; answers a secure aggregation message of the server with the round's next
  // phase.
  Status ConfigureSecure(const RunConfig& config, std::uint32_t workers);
  void HandleSecure(const wire::FrameView& view);
  // Takes the run's buffers from the arena for `workers` workers. Errors: kResourceExhausted,
  // kInternal.
  Status Configure(const RunConfig& config, std::uint32_t workers);
  // Applies a broadcast's payload to the model and returns the round's model: the worker's copy,
  // or the frame's own values when it keeps none (valid while the frame is). Errors: kDataLoss
  // (bad payload), kFailedPrecondition (an aggregate that does not fit the held model).
  Result<std::span<const float>> ApplyBroadcast(const wire::FrameView& view);
  // Reports the aggregate of this worker's last update, as far as a full-model broadcast (not
  // yet applied) reveals it, to the error-feedback worker's selector (reg_top_k).
  void LearnAggregate(const wire::FrameView& view);
  // Computes this round's update from the round's `model` with the run's chain of stages
  // (worker_stages/update_stage.h) into the Update frame, and queues it.
  void ComputeUpdate(std::uint32_t round, std::span<const float> model);
  bool Scaffold() const { return kScaffold && scaffold_ != nullptr; }
  bool AddsNoise() const { return options_.add_noise != nullptr && !options_.noise_key.empty(); }
  // Secure aggregation, once the chain has masked the update: the round's keys (its first
  // message) replace the Update in the frame to send.
  Status StartSecureRound(std::uint32_t round);
  bool Secure() const { return wire::kSecureAggregationFrames && secure_ != nullptr; }
  void SendJoin(TimeNs now);
  void SendHeartbeat(TimeNs now);
  void Resync(TimeNs now);
  // Finishes with `status`, keeping `reason`, and queues a Leave giving `leave`.
  void Fail(Status status, const char* reason, wire::LeaveReason leave);
  wire::FrameHeader NextHeader(std::uint32_t round);
  std::uint32_t StepSamples() const;

  WorkerOptions options_;
  WorkerPhase phase_ = WorkerPhase::kUninitialized;
  Arena* arena_ = nullptr;
  bool configured_ = false;
  bool resyncing_ = false;
  wire::WelcomeInfo welcome_;
  RunConfig config_;
  std::uint32_t id_ = wire::kUnassignedDevice;

  std::span<float> model_;  // empty when the worker keeps no copy (KeepsModelCopy)
  std::span<float> gradient_;
  std::span<float> momentum_;     // kMajority
  std::span<std::byte> scratch_;  // codec scratch for applying aggregates (kMean)
  // SCAFFOLD runs only, in the arena (a member would cost every worker image its constructor).
  ScaffoldDevice* scaffold_ = nullptr;
  ErrorFeedbackWorker feedback_;
  // Secure runs only, in the arena like scaffold_ (worker_stages/update_stage.h).
  internal::SecureDevice* secure_ = nullptr;
  // The stages that compute the update, chosen on the Welcome (worker_stages/update_stage.h).
  std::array<const internal::UpdateStage*, 6> stages_{};
  std::uint8_t stage_count_ = 0;
  // The phase of the server's last message this round's answer (update_frame_) answers.
  static constexpr std::uint8_t kNoSecurePhase = 0xFF;
  std::uint8_t secure_answered_ = kNoSecurePhase;

  std::optional<wire::FrameBuilder> control_builder_;  // Join or Leave
  std::optional<wire::FrameBuilder> heartbeat_builder_;
  std::optional<wire::FrameBuilder> update_builder_;
  std::span<const std::byte> control_frame_;
  std::span<const std::byte> heartbeat_frame_;
  std::span<const std::byte> update_frame_;
  std::uint64_t update_work_ = 0;  // work_samples of the queued update (0 for a re-send)
  std::uint8_t pending_ = 0;

  std::uint32_t model_round_ = kNoRound;
  std::uint32_t broadcast_round_ = kNoRound;  // last broadcast acted on
  std::uint32_t update_round_ = kNoRound;     // round of the Update in update_frame_
  TimeNs next_join_ = kNever;
  TimeNs next_heartbeat_ = kNever;
  std::uint64_t sequence_ = 0;

  WorkerCounters counters_;
  Status status_;
  std::array<char, wire::kMaxErrorReasonBytes + 1> failure_reason_{};
  wire::LeaveReason leave_reason_ = wire::LeaveReason::kDone;
};

}  // namespace edgesgd::protocol
