#include "edgesgd/core/model/model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "edgesgd/core/model/linear_regression.h"
#include "edgesgd/core/model/logistic_regression.h"
#include "edgesgd/core/model/mlp.h"
#include "edgesgd/core/model/sequential.h"
#include "edgesgd/core/model/softmax_regression.h"
#include "edgesgd/core/random.h"

namespace edgesgd {
namespace internal {

// 2u - 1 is exact for u a multiple of 2^-24 in [0, 1), so only the final multiply rounds.
void FillSymmetricUniform(std::span<float> values, float limit, std::uint64_t seed,
                          std::uint32_t tensor) {
  CounterRng rng(seed, 0, tensor, StreamId(RandomPurpose::kModelInit));
  for (float& value : values) value = (2.0f * rng.NextFloat() - 1.0f) * limit;
}

}  // namespace internal

std::size_t ModelScratchFloats(const ModelSpec& spec) {
  if (!ValidateModelSpec(spec).ok()) return 0;
  switch (spec.kind) {
    case ModelKind::kLinearRegression:
      return LinearRegression::ScratchFloats(spec);
    case ModelKind::kLogisticRegression:
      return LogisticRegression::ScratchFloats(spec);
    case ModelKind::kSoftmaxRegression:
      return SoftmaxRegression::ScratchFloats(spec);
    case ModelKind::kMlp:
      return Mlp::ScratchFloats(spec);
    case ModelKind::kSequential:
      return Sequential::ScratchFloats(spec.network);
  }
  return 0;
}

Status InitModelParameters(const ModelSpec& spec, std::uint64_t seed, std::span<float> params) {
  if (spec.kind == ModelKind::kSequential) {
    EDGESGD_TRY(ValidateModelSpec(spec));
    return InitSequentialParameters(spec.network, seed, params);
  }
  EDGESGD_TRY_ASSIGN(const TensorLayout layout, ModelLayout(spec));
  if (params.size() != layout.dimension()) {
    return Status::InvalidArgument("the parameters' size differs from the model's parameter count");
  }
  for (float& value : params) value = 0.0f;
  if (spec.kind != ModelKind::kMlp) return Status::Ok();
  const std::size_t w2_tensor = spec.bias ? 2 : 1;
  const float w1_limit = std::sqrt(6.0f / static_cast<float>(spec.features));
  const float w2_limit = std::sqrt(6.0f / static_cast<float>(spec.hidden + spec.classes));
  internal::FillSymmetricUniform(layout.Slice(params, 0), w1_limit, seed, 0);
  internal::FillSymmetricUniform(layout.Slice(params, w2_tensor), w2_limit, seed,
                       static_cast<std::uint32_t>(w2_tensor));
  return Status::Ok();
}

Status Model::Init(const ModelSpec& spec, Arena& arena) {
  if (initialized_) return Status::FailedPrecondition("the model is already initialized");
  EDGESGD_TRY_ASSIGN(const TensorLayout layout, ModelLayout(spec));
  EDGESGD_TRY_ASSIGN(const std::span<float> scratch,
                     arena.Allocate<float>(ModelScratchFloats(spec)));
  spec_ = spec;
  layout_ = layout;
  scratch_ = scratch;
  initialized_ = true;
  return Status::Ok();
}

Status Model::InitParameters(std::uint64_t seed, std::span<float> params) const {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  return InitModelParameters(spec_, seed, params);
}

Result<float> Model::LossAndGradient(std::span<const float> params, const DatasetView& batch,
                                     std::span<float> gradient) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  switch (spec_.kind) {
    case ModelKind::kLinearRegression:
      return LinearRegression::LossAndGradient(spec_, params, batch, gradient, scratch_);
    case ModelKind::kLogisticRegression:
      return LogisticRegression::LossAndGradient(spec_, params, batch, gradient, scratch_);
    case ModelKind::kSoftmaxRegression:
      return SoftmaxRegression::LossAndGradient(spec_, params, batch, gradient, scratch_);
    case ModelKind::kMlp:
      return Mlp::LossAndGradient(spec_, params, batch, gradient, scratch_);
    case ModelKind::kSequential:
      return Sequential::LossAndGradient(spec_.network, params, batch, gradient, scratch_);
  }
  return Status::Internal("unknown model kind");
}

Result<Evaluation> Model::Evaluate(std::span<const float> params, const DatasetView& data,
                                   const BatchBuffers& staging) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  EvaluationSums sums;
  if (data.has_byte_features()) {
    const std::size_t chunk =
        data.feature_dim == 0 ? 0 : staging.features.size() / data.feature_dim;
    if (chunk == 0 || data.num_samples == 0) {
      return Status::InvalidArgument("no samples, or no staging room for one row of byte features");
    }
    for (std::size_t first = 0; first < data.num_samples; first += chunk) {
      EDGESGD_TRY_ASSIGN(const DatasetView rows,
                         SliceRows(data, first, std::min(chunk, data.num_samples - first)));
      EDGESGD_TRY_ASSIGN(const DatasetView batch, GatherRows(rows, {}, staging));
      EDGESGD_TRY(AddToEvaluation(params, batch, sums));
    }
  } else {
    EDGESGD_TRY(AddToEvaluation(params, data, sums));
  }
  const auto samples = static_cast<double>(sums.samples);
  Evaluation evaluation;
  evaluation.loss = static_cast<float>(sums.loss / samples);
  evaluation.accuracy = spec_.kind == ModelKind::kLinearRegression
                            ? std::numeric_limits<float>::quiet_NaN()
                            : static_cast<float>(static_cast<double>(sums.correct) / samples);
  return evaluation;
}

Status Model::AddToEvaluation(std::span<const float> params, const DatasetView& data,
                              EvaluationSums& sums) {
  switch (spec_.kind) {
    case ModelKind::kLinearRegression:
      return LinearRegression::AddToEvaluation(spec_, params, data, scratch_, sums);
    case ModelKind::kLogisticRegression:
      return LogisticRegression::AddToEvaluation(spec_, params, data, scratch_, sums);
    case ModelKind::kSoftmaxRegression:
      return SoftmaxRegression::AddToEvaluation(spec_, params, data, scratch_, sums);
    case ModelKind::kMlp:
      return Mlp::AddToEvaluation(spec_, params, data, scratch_, sums);
    case ModelKind::kSequential:
      return Sequential::AddToEvaluation(spec_.network, params, data, scratch_, sums);
  }
  return Status::Internal("unknown model kind");
}

}  // namespace edgesgd
