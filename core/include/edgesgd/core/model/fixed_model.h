#pragma once

// The calls every model with fixed tensors has (LinearRegression, LogisticRegression,
// SoftmaxRegression, Mlp): each declares `static constexpr std::size_t ScratchFloats(const
// ModelSpec& spec)`, the floats of scratch one call needs, and the two functions below as its
// static members LossAndGradient and AddToEvaluation.
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

// Reads params (ParameterCount(spec) floats) and batch; writes gradient (same size) with the
// gradient of the mean loss over the batch and returns that mean loss. Uses scratch (at
// least ScratchFloats(spec) floats). Errors, with gradient untouched: kInvalidArgument for a
// spec of another kind or a size/shape mismatch (see internal::CheckModelCall), kOutOfRange
// for a label out of range. Non-finite parameters give a non-finite loss, not an error.
// Does not allocate.
using FixedModelLossAndGradient = Result<float>(const ModelSpec& spec,
                                                std::span<const float> params,
                                                const DatasetView& batch,
                                                std::span<float> gradient,
                                                std::span<float> scratch);

// Adds the losses (and, for a model with classes, the correct predictions) and the samples of
// `data` to `sums`. Reads params and data; uses scratch. Same errors as LossAndGradient, with
// sums untouched. Does not allocate.
using FixedModelEvaluation = Status(const ModelSpec& spec, std::span<const float> params,
                                    const DatasetView& data, std::span<float> scratch,
                                    EvaluationSums& sums);

}  // namespace edgesgd
