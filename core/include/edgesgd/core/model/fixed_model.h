#pragma once

// The calls every model with fixed tensors has (LinearRegression, LogisticRegression,
// SoftmaxRegression, Mlp): LossAndGradient and AddToEvaluation below, which each inherits from
// FixedModelCalls. A model declares `static constexpr std::size_t ScratchFloats(const ModelSpec&
// spec)`, the floats of scratch one call needs, and its own pass over the data, Accumulate.
//
// Samples are processed one at a time, so scratch does not grow with the batch: a batch of any
// size (or a whole test set) runs in ScratchFloats(spec) floats. Only Eigen dot products and
// coefficient-wise updates over Maps are used, never an Eigen matrix product, whose blocking
// buffers fall back to malloc beyond 128 KiB and would pull malloc into MCU builds.

#include <cstddef>
#include <span>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/model_spec.h"
#include "edgesgd/core/result.h"

namespace edgesgd {

// Adds the losses of `data` (and, for a model with classes, its correct predictions) to
// `totals`; when `gradient` is not empty, also adds the gradient of the mean loss over `data`
// into it. Called by FixedModelCalls on arguments it has checked.
using FixedModelAccumulate = void(const ModelSpec& spec, std::span<const float> params,
                                  const DatasetView& data, std::span<float> gradient,
                                  std::span<float> scratch, EvaluationSums& totals);

// LossAndGradient and AddToEvaluation of `Model`, of kind `kKind`, from its Accumulate.
template <typename Model, ModelKind kKind>
struct FixedModelCalls {
  // Reads params (ParameterCount(spec) floats) and batch; writes gradient (same size) with the
  // gradient of the mean loss over the batch and returns that mean loss. Uses scratch (at
  // least ScratchFloats(spec) floats). Errors, with gradient untouched: kInvalidArgument for a
  // spec of another kind or a size/shape mismatch (see internal::CheckModelCall), kOutOfRange
  // for a label out of range. Non-finite parameters give a non-finite loss, not an error.
  // Does not allocate.
  static Result<float> LossAndGradient(const ModelSpec& spec, std::span<const float> params,
                                       const DatasetView& batch, std::span<float> gradient,
                                       std::span<float> scratch) {
    EDGESGD_TRY(internal::CheckModelCall(spec, kKind, params, batch, gradient, true, scratch,
                                         Model::ScratchFloats(spec)));
    for (float& value : gradient) value = 0.0f;
    EvaluationSums totals;
    Model::Accumulate(spec, params, batch, gradient, scratch, totals);
    return static_cast<float>(totals.loss / static_cast<double>(batch.num_samples));
  }

  // Adds the losses (and, for a model with classes, the correct predictions) and the samples of
  // `data` to `sums`. Reads params and data; uses scratch. Same errors as LossAndGradient, with
  // sums untouched. Does not allocate.
  static Status AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                const DatasetView& data, std::span<float> scratch,
                                EvaluationSums& sums) {
    EDGESGD_TRY(internal::CheckModelCall(spec, kKind, params, data, {}, false, scratch,
                                         Model::ScratchFloats(spec)));
    Model::Accumulate(spec, params, data, {}, scratch, sums);
    sums.samples += data.num_samples;
    return Status::Ok();
  }
};

}  // namespace edgesgd
