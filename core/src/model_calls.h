#pragma once

// The two calls every fixed model kind answers, around its own accumulation: checks, then the
// batch's mean loss with its gradient, or the data's sums for an evaluation. Not part of the
// public API.

#include <cstddef>
#include <span>

#include "edgesgd/core/model/model_spec.h"

namespace edgesgd::internal {

// LossAndGradient of a model of `kind`: `accumulate(data, gradient, totals)` adds the batch's
// losses to `totals` and its gradient (scaled by 1 / B) into the zeroed `gradient`.
template <typename Accumulate>
Result<float> MeanLossAndGradient(ModelKind kind, const ModelSpec& spec,
                                  std::span<const float> params, const DatasetView& batch,
                                  std::span<float> gradient, std::span<float> scratch,
                                  std::size_t scratch_floats, Accumulate accumulate) {
  EDGESGD_TRY(CheckModelCall(spec, kind, params, batch, gradient, true, scratch, scratch_floats));
  for (float& value : gradient) value = 0.0f;
  EvaluationSums totals;
  accumulate(batch, gradient, totals);
  return static_cast<float>(totals.loss / static_cast<double>(batch.num_samples));
}

// AddToEvaluation of a model of `kind`: `accumulate(data, {}, sums)` adds losses and correct
// predictions only.
template <typename Accumulate>
Status AddEvaluation(ModelKind kind, const ModelSpec& spec, std::span<const float> params,
                     const DatasetView& data, std::span<float> scratch, std::size_t scratch_floats,
                     EvaluationSums& sums, Accumulate accumulate) {
  EDGESGD_TRY(CheckModelCall(spec, kind, params, data, {}, false, scratch, scratch_floats));
  accumulate(data, std::span<float>(), sums);
  sums.samples += data.num_samples;
  return Status::Ok();
}

}  // namespace edgesgd::internal
