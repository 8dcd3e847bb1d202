#pragma once

#include <cstddef>
#include <span>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/model_spec.h"
#include "edgesgd/core/result.h"

namespace edgesgd {

// Linear regression (ModelKind::kLinearRegression): mean squared error without the 1/2, as in
// the RegTop-k authors' code (torch mse_loss).
// Samples are processed one at a time, so scratch does not grow with the batch: a batch of any
// size (or a whole test set) runs in ScratchFloats(spec) floats. Only Eigen dot products and
// coefficient-wise updates over Maps are used, never an Eigen matrix product, whose blocking
// buffers fall back to malloc beyond 128 KiB and would pull malloc into MCU builds.
struct LinearRegression {
  // Floats of scratch one call needs. Needs none.
  static constexpr std::size_t ScratchFloats(const ModelSpec& spec) {
    static_cast<void>(spec);
    return 0;
  }

  // Reads params (ParameterCount(spec) floats) and batch; writes gradient (same size) with the
  // gradient of the mean loss over the batch and returns that mean loss. Uses scratch (at
  // least ScratchFloats(spec) floats). Errors, with gradient untouched: kInvalidArgument for a
  // spec of another kind or a size/shape mismatch (see internal::CheckModelCall), kOutOfRange
  // for a label out of range. Non-finite parameters give a non-finite loss, not an error.
  // Does not allocate.
  static Result<float> LossAndGradient(const ModelSpec& spec, std::span<const float> params,
                                       const DatasetView& batch, std::span<float> gradient,
                                       std::span<float> scratch);

  // Adds the squared residuals of `data` to sums.loss and its samples to sums.samples (no
  // accuracy: there are no classes). Reads params and data; uses scratch. Same errors as
  // LossAndGradient, with sums untouched. Does not allocate.
  static Status AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                const DatasetView& data, std::span<float> scratch,
                                EvaluationSums& sums);
};

}  // namespace edgesgd
