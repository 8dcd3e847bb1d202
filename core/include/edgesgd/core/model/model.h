#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/model_spec.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// Floats of scratch the kernel of `spec.kind` needs (0 for an invalid spec).
std::size_t ModelScratchFloats(const ModelSpec& spec);

// Writes the initial parameters of `spec` for `seed` into params (ParameterCount(spec) floats).
// Linear, logistic and softmax regression start at zero (convex: the optimum does not depend
// on the start, and the reference experiments start there; seed unused). The MLP draws W1 ~
// U(-a, a), a = sqrt(6 / features) (He, for the ReLU that follows) and W2 ~ U(-b, b), b =
// sqrt(6 / (hidden + classes)) (Glorot), biases zero, tensor t from CounterRng(seed, 0, t,
// StreamId(RandomPurpose::kModelInit)); uniforms are exact and the scaling is one IEEE
// multiply, so every worker and architecture gets the same bits. Errors: kInvalidArgument for
// an invalid spec or a wrong params size. Does not allocate.
Status InitModelParameters(const ModelSpec& spec, std::uint64_t seed, std::span<float> params);

// A model of any ModelKind behind one interface, dispatched by a switch (no virtual calls).
// Holds the spec, its layout and scratch taken from an Arena at Init; parameters and gradients
// are the caller's flat vectors. LossAndGradient and Evaluate use the scratch, so one Model
// serves one thread.
class Model {
 public:
  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Persistent bytes beyond scratch: none (parameters are the caller's).
  static constexpr std::size_t StateBytes(const ModelSpec&) { return 0; }
  // Arena bytes Init takes. Independent of the batch size: kernels stream samples one at a
  // time, so the same scratch serves any batch and whole-dataset evaluation.
  static std::size_t ScratchBytes(const ModelSpec& spec) {
    return ArenaBytesFor<float>(ModelScratchFloats(spec));
  }

  // Validates `spec` and takes ScratchBytes(spec) from `arena`. Errors: kInvalidArgument for an
  // invalid spec, kFailedPrecondition if already initialised or the arena is sealed,
  // kResourceExhausted if the arena is too small. Allocates from the arena only.
  Status Init(const ModelSpec& spec, Arena& arena);

  // InitModelParameters for this model's spec. Errors: kFailedPrecondition before Init, else
  // as InitModelParameters. Does not allocate.
  Status InitParameters(std::uint64_t seed, std::span<float> params) const;

  // Reads params and batch, writes gradient (both parameter_count() floats) with the gradient of
  // the mean batch loss; returns that loss. Errors: kFailedPrecondition before Init, otherwise
  // those of the kind's kernel (kInvalidArgument shape mismatch, kOutOfRange label).
  // Does not allocate.
  Result<float> LossAndGradient(std::span<const float> params, const DatasetView& batch,
                                std::span<float> gradient);

  // Mean loss and accuracy over `data` (accuracy NaN for linear regression). Byte features are
  // gathered into `staging` as many rows at a time as it holds, float ones read in place; the
  // figures are the same bits either way. Same errors as LossAndGradient, plus
  // kInvalidArgument for byte features without staging room for one row. Does not allocate.
  Result<Evaluation> Evaluate(std::span<const float> params, const DatasetView& data,
                              const BatchBuffers& staging = {});

  bool initialized() const { return initialized_; }
  const ModelSpec& spec() const { return spec_; }
  const TensorLayout& layout() const { return layout_; }
  std::size_t parameter_count() const { return layout_.dimension(); }

 private:
  Status AddToEvaluation(std::span<const float> params, const DatasetView& data,
                         EvaluationSums& sums);

  ModelSpec spec_;
  TensorLayout layout_;
  std::span<float> scratch_;
  bool initialized_ = false;
};

}  // namespace edgesgd
