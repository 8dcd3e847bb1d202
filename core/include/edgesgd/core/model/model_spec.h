#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/sequential_spec.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// The small models edgesgd trains on devices. Parameters live in one flat float vector laid out
// by ModelLayout (weights then bias per layer, matrices row-major: row o holds the weights of
// output o), so codecs, error feedback and the wire see one vector with per-tensor extents.
enum class ModelKind : std::uint8_t {
  // y_hat = w . x (+ b). Loss = mean_i (y_hat_i - y_i)^2 — torch's mse_loss, the RegTop-k
  // authors' loss (no 1/2), so gradient = (2/B) sum_i r_i x_i. Needs DatasetView::targets.
  kLinearRegression,
  // Binary: z = w . x (+ b), p = sigmoid(z). Labels are bytes in {0, 1} (1 = positive; +/-1
  // labels map as -1 -> 0). Loss = mean_i ln(1 + e^z_i) - y_i z_i (binary cross-entropy on
  // logits, computed stably). Predicts 1 iff z > 0.
  kLogisticRegression,
  // z = W x (+ b) with W classes x features; loss = mean cross-entropy of softmax(z) computed
  // with log-sum-exp; predicts argmax z (ties: lowest class).
  kSoftmaxRegression,
  // One hidden ReLU layer: h = max(0, W1 x (+ b1)), z = W2 h (+ b2), softmax cross-entropy.
  // Layout W1 (hidden x features), b1, W2 (classes x hidden), b2.
  kMlp,
  // A network of layers (dense, conv, pools, ...) with a softmax cross-entropy loss, described
  // by ModelSpec::network (sequential.h, docs/models.md); features and classes repeat its input
  // size and class count, hidden and bias are unused (every parametric layer has a bias).
  kSequential,
};

struct ModelSpec {
  ModelKind kind = ModelKind::kSoftmaxRegression;
  std::size_t features = 0;  // D, >= 1
  std::size_t classes = 0;   // C, 2..256 for softmax and MLP; ignored by linear and logistic
  std::size_t hidden = 0;    // H, >= 1 for MLP; ignored otherwise
  bool bias = true;          // experiments A and B use bias = false
  SequentialSpec network{};  // kSequential only
};

// Mean loss and accuracy over a dataset. accuracy is the fraction of correct predictions in
// [0, 1]; it is NaN for linear regression, which has none.
struct Evaluation {
  float loss = 0.0f;
  float accuracy = 0.0f;
};

// The sums behind an Evaluation, carried from batch to batch: a dataset scored in parts (e.g.
// byte features gathered into float batches) adds its samples in the order one pass would, so
// its figures are bit-identical to that pass's.
struct EvaluationSums {
  double loss = 0.0;
  std::size_t correct = 0;
  std::size_t samples = 0;
};

// kOk if the spec describes a model (sizes as documented above, parameter count below 2^32; a
// sequential spec valid and agreeing with features and classes); kInvalidArgument otherwise.
// Does not allocate.
Status ValidateModelSpec(const ModelSpec& spec);

// Number of parameters of a valid spec (0 for an invalid one).
std::size_t ParameterCount(const ModelSpec& spec);

// The tensors of the model in order: linear/logistic {w, b}, softmax {W, b}, MLP {W1, b1, W2,
// b2}, bias tensors absent when spec.bias is false; a sequential network's SequentialLayout.
// Errors: kInvalidArgument for an invalid spec. Does not allocate.
Result<TensorLayout> ModelLayout(const ModelSpec& spec);

namespace internal {

// Fills `values` with U(-limit, limit) from CounterRng(seed, 0, tensor,
// StreamId(RandomPurpose::kModelInit)): every model kind's initial weights, the same bits on
// every architecture.
void FillSymmetricUniform(std::span<float> values, float limit, std::uint64_t seed,
                          std::uint32_t tensor);

// Shared argument check of every model kernel: spec valid and of `kind`; params (and gradient,
// unless `check_gradient` is false) hold ParameterCount(spec) floats; data is a valid view
// of float features with feature_dim == spec.features, at least one sample, and targets
// (linear) or labels in range (logistic {0,1}, others < classes); scratch holds at least
// `scratch_floats`.
// Errors: kInvalidArgument for a shape mismatch, kOutOfRange for a label out of range.
Status CheckModelCall(const ModelSpec& spec, ModelKind kind, std::span<const float> params,
                      const DatasetView& data, std::span<const float> gradient, bool check_gradient,
                      std::span<const float> scratch, std::size_t scratch_floats);

}  // namespace internal

}  // namespace edgesgd
