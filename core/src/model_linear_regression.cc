#include "edgesgd/core/model/linear_regression.h"
#include "model_calls.h"
#include "scalar_output_model.h"

namespace edgesgd {
namespace {

// Squared error over `data`: loss r^2 and slope 2 r for the residual r = z - target.
auto SquaredError(const ModelSpec& spec, std::span<const float> params) {
  return
      [&spec, params](const DatasetView& data, std::span<float> gradient, EvaluationSums& totals) {
        internal::AccumulateScalarOutput(
            spec, params, data, gradient, totals, [&data](float output, std::size_t i) {
              const float residual = output - data.targets[i];
              return internal::SampleLoss{residual * residual, 2.0f * residual, false};
            });
      };
}

}  // namespace

Result<float> LinearRegression::LossAndGradient(const ModelSpec& spec,
                                                std::span<const float> params,
                                                const DatasetView& batch, std::span<float> gradient,
                                                std::span<float> scratch) {
  return internal::MeanLossAndGradient(ModelKind::kLinearRegression, spec, params, batch, gradient,
                                       scratch, ScratchFloats(spec), SquaredError(spec, params));
}

Status LinearRegression::AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                         const DatasetView& data, std::span<float> scratch,
                                         EvaluationSums& sums) {
  return internal::AddEvaluation(ModelKind::kLinearRegression, spec, params, data, scratch,
                                 ScratchFloats(spec), sums, SquaredError(spec, params));
}

}  // namespace edgesgd
