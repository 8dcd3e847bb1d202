#pragma once

// First-order optimizers for a single device or a server that owns the model (docs/algorithms.md,
// section 4), plus the worker-side pieces of distributed Signum with majority vote.
//
//   kSgd       x -= eta * (g + wd * x)
//   kMomentum  m = beta * m + (g + wd * x);  x -= eta * m      (heavy ball, no dampening)
//   kSignum    m = beta * m + (1 - beta) * g;  x -= eta * (sign(m) + wd * x)
//
// sign(v) is +1 for v >= 0 and -1 otherwise: sign(0) = +1 (also for -0 and NaN), the same
// convention as SignCodec, so a Signum step and a 1-worker majority vote move x identically.
// Weight decay in Signum is applied outside the sign, as in the authors' code.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

enum class OptimizerKind : std::uint8_t { kSgd, kMomentum, kSignum };

struct OptimizerParams {
  OptimizerKind kind = OptimizerKind::kSgd;
  float learning_rate = 0.01f;  // eta > 0, finite
  float momentum = 0.9f;        // beta in [0, 1); read by kMomentum and kSignum
  float weight_decay = 0.0f;    // wd >= 0, finite

  friend constexpr bool operator==(const OptimizerParams&, const OptimizerParams&) = default;
};

// Checks the fields `params.kind` reads. Errors: kInvalidArgument. NaN fails every range check.
constexpr Status ValidateOptimizerParams(const OptimizerParams& params) {
  constexpr float kMaxFloat = std::numeric_limits<float>::max();
  switch (params.kind) {
    case OptimizerKind::kSgd:
      break;
    case OptimizerKind::kMomentum:
    case OptimizerKind::kSignum:
      if (!(params.momentum >= 0.0f && params.momentum < 1.0f)) {
        return Status::InvalidArgument("the momentum must be in [0, 1)");
      }
      break;
    default:
      return Status::InvalidArgument("unknown optimizer");
  }
  if (!(params.learning_rate > 0.0f && params.learning_rate <= kMaxFloat)) {
    return Status::InvalidArgument("the learning rate must be positive and finite");
  }
  if (!(params.weight_decay >= 0.0f && params.weight_decay <= kMaxFloat)) {
    return Status::InvalidArgument("the weight decay must be non-negative and finite");
  }
  return Status::Ok();
}

// One optimizer over a d-float model. SGD keeps no state; the others keep m (d floats).
class Optimizer {
 public:
  // Exact arena bytes Init takes: 0 for SGD, d floats otherwise; 0 for bad parameters.
  static constexpr std::size_t StateBytes(std::size_t dimension, const OptimizerParams& params) {
    if (dimension == 0 || !ValidateOptimizerParams(params).ok()) return 0;
    return params.kind == OptimizerKind::kSgd ? 0 : ArenaBytesFor<float>(dimension);
  }

  // Takes the momentum (zeroed) from `arena`. Allocates from the arena only.
  // Errors: kInvalidArgument (dimension 0, bad parameters), kFailedPrecondition (arena sealed),
  // kResourceExhausted (arena too small; nothing is taken then).
  Status Init(Arena& arena, std::size_t dimension, const OptimizerParams& params);

  // One step: reads `gradient` (d floats, without weight decay), updates the momentum and
  // `model` (d floats) as in the table above. Does not allocate.
  // Errors: kFailedPrecondition before Init, kInvalidArgument for wrong sizes.
  Status Step(std::span<float> model, std::span<const float> gradient);

  // Zeroes the momentum (a restart). Does not allocate.
  void Reset();

  // Changes eta between steps (schedules). Errors: kInvalidArgument unless > 0 and finite.
  Status SetLearningRate(float learning_rate);

  // The momentum (d floats); empty for SGD.
  std::span<const float> momentum() const { return momentum_; }
  const OptimizerParams& params() const { return params_; }
  std::size_t dimension() const { return dimension_; }

 private:
  OptimizerParams params_;
  std::span<float> momentum_;
  std::size_t dimension_ = 0;
  bool initialized_ = false;
};

// The Signum worker's momentum update of distributed signSGD with majority vote
// (docs/algorithms.md §4):
// state = beta * state + (1 - beta) * gradient, over d floats; the worker then sends
// sign(state) (SignCodec with SignScale::kUnit). beta = 0 gives plain signSGD. Does not
// allocate. Errors: kInvalidArgument for beta outside [0, 1) or sizes that differ.
Status SignumMomentumUpdate(float beta, std::span<const float> gradient, std::span<float> state);

// The Signum worker's model update from the vote V (docs/algorithms.md §4):
// x -= eta * (V + wd * x), V = +1 where the coordinate's bit is 1 and -1 where it is 0, in
// SignCodec's layout (bit j of a tensor's word w is its coordinate 32w + j; each tensor starts
// on a fresh word). Reads `vote_words`, writes `model` (layout.dimension() floats). Does not allocate.
// Errors: kInvalidArgument for bad eta/wd (as OptimizerParams) or a model of the wrong size;
// kDataLoss when the word count is not the layout's or a padding bit is set (the vote comes
// from the network). The model is untouched on error.
Status ApplySignVote(std::span<const std::uint32_t> vote_words, const TensorLayout& layout,
                     float learning_rate, float weight_decay, std::span<float> model);

}  // namespace edgesgd
