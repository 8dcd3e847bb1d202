#include "edgesgd/core/model/linear_regression.h"

#include "scalar_output_model.h"

namespace edgesgd {
namespace {

// Squared error: loss r^2 and slope 2 r for the residual r = z - target.
internal::SampleLoss SquaredError(const DatasetView& data, float output, std::size_t i) {
  const float residual = output - data.targets[i];
  return {residual * residual, 2.0f * residual, false};
}

}  // namespace

Result<float> LinearRegression::LossAndGradient(const ModelSpec& spec,
                                                std::span<const float> params,
                                                const DatasetView& batch, std::span<float> gradient,
                                                std::span<float> scratch) {
  return internal::ScalarOutputLossAndGradient(
      ModelKind::kLinearRegression, spec, params, batch, gradient, scratch, ScratchFloats(spec),
      [&batch](float output, std::size_t i) { return SquaredError(batch, output, i); });
}

Status LinearRegression::AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                         const DatasetView& data, std::span<float> scratch,
                                         EvaluationSums& sums) {
  return internal::AddScalarOutputEvaluation(
      ModelKind::kLinearRegression, spec, params, data, scratch, ScratchFloats(spec), sums,
      [&data](float output, std::size_t i) { return SquaredError(data, output, i); });
}

}  // namespace edgesgd
