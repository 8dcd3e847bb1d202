#pragma once

// The worker's update as a chain of stages (not part of the public API). WorkerSession picks
// the run's stages once, on its Welcome (BuildUpdateChain), and each round runs them in order
// (Run); the stages that correct a gradient also act inside every local step (CorrectGradient).
//
//   kMean      local steps (error feedback)  [FedProx's proximal term]  [SCAFFOLD]
//              compression (error feedback)  [privacy: clipping's indicator, noise]  [masking]
//   kMajority  Signum vote  [vote masking]
//
// A stage is a stateless constant: what it works on (the session's buffers, the state of a
// feature the run uses, the Update frame being built) comes with the round. The first stage
// begins the Update frame; the session finishes it, or hands the masked input to secure
// aggregation, once every stage has run. A stage counts its own errors; on one the session drops
// the frame and the round. Stages a build leaves out (kScaffold, kDifferentialPrivacy,
// wire::kSecureAggregationFrames false) are never named, so they are not linked.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/scaffold.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/secagg/fixed_point.h"
#include "edgesgd/secagg/frame_stage.h"
#include "edgesgd/secagg/qsgd_levels.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol::internal {

// Secure runs only, in the arena (members would cost every worker image their initialisation):
// the device stage, its frame builder and the round input's encoding.
struct SecureDevice {
  secagg::DeviceStage stage;
  std::optional<wire::FrameBuilder> builder;
  secagg::FixedPoint format;         // mean
  secagg::SharedScaleLevels levels;  // mean of qsgd levels (lane_bits 0 otherwise)
  std::uint32_t lane_bits = 0;       // majority vote
};

class UpdateStage;

// One round's update in the making.
struct UpdateRound {
  const RunConfig& config;
  const WorkerOptions& options;
  std::uint32_t workers;
  std::uint32_t id;
  std::uint32_t round;
  std::uint32_t local_steps;     // this round's: H, or the device's smaller limit
  std::span<const float> model;  // the round's start model
  std::span<float> gradient;
  std::span<float> momentum;      // kMajority
  ErrorFeedbackWorker& feedback;  // kMean
  ScaffoldDevice* scaffold;
  SecureDevice* secure;
  WorkerCounters& counters;
  std::span<const UpdateStage* const> stages;
  // The Update frame: its header and message, and the payload the stages write.
  wire::FrameBuilder& builder;
  wire::FrameHeader header;
  wire::PayloadMessage message;
  PayloadSpans payload;
  PayloadShape shape;  // what the compression wrote into the payload
};

class UpdateStage {
 public:
  // The stage's part of the round, in chain order.
  virtual Status Run(UpdateRound& /*round*/) const { return Status::Ok(); }
  // A local step's gradient, before the step.
  virtual Status CorrectGradient(const UpdateRound& /*round*/,
                                 std::span<float> /*gradient*/) const {
    return Status::Ok();
  }

 protected:
  constexpr UpdateStage() = default;
  ~UpdateStage() = default;
};

// kMean: error feedback's BeginRound, the round's H local steps, each with the callback's
// gradient corrected by the chain, and the Update frame begun with the codec's choice for the
// round. A dense update without a residual is accumulated in the frame itself.
class LocalSteps final : public UpdateStage {
 public:
  Status Run(UpdateRound& round) const override;
};

// FedProx: mu * (y - x) added to each local gradient (runs whose mu is not 0).
class ProximalTerm final : public UpdateStage {
 public:
  Status CorrectGradient(const UpdateRound& round, std::span<float> gradient) const override;
};

// SCAFFOLD: each local gradient corrected by c - c_i, and after the steps the change of c_i
// compressed into the Update frame's control payload.
class ControlVariates final : public UpdateStage {
 public:
  // Takes the device's control variates from the arena.
  static Result<ScaffoldDevice*> Configure(Arena& arena, const CodecRegistry& codecs,
                                           const RunConfig& config);
  Status Run(UpdateRound& round) const override;
  Status CorrectGradient(const UpdateRound& round, std::span<float> gradient) const override;
};

// Error feedback's Compress (clipping first in private runs), straight into the frame.
class Compression final : public UpdateStage {
 public:
  Status Run(UpdateRound& round) const override;
};

// Differential privacy after the compression: the device's noise share on the values it sends
// (distributed noise) and adaptive clipping's indicator in the Update's fields.
class PrivacyNoise final : public UpdateStage {
 public:
  Status Run(UpdateRound& round) const override;
};

// kMajority: one gradient at the model, m = beta * m + (1 - beta) * g, and sign(m) packed into
// the Update frame.
class SignumVote final : public UpdateStage {
 public:
  Status Run(UpdateRound& round) const override;
};

// Secure aggregation's input from the payload: its values in fixed point, or its qsgd levels in
// lanes. Errors: a payload the lanes refuse.
class Masking final : public UpdateStage {
 public:
  Status Run(UpdateRound& round) const override;
};

// Secure aggregation's input from a vote: each sign a 0 or 1 in its lane.
class VoteMasking final : public UpdateStage {
 public:
  Status Run(UpdateRound& round) const override;
};

inline constexpr std::size_t kMaxUpdateStages = 6;

// The stages of a run of `config`, in order, into `chain`; returns how many.
std::size_t BuildUpdateChain(const RunConfig& config,
                             std::span<const UpdateStage*, kMaxUpdateStages> chain);

}  // namespace edgesgd::protocol::internal
