#include "edgesgd/core/model/linear_regression.h"
#include "scalar_output_model.h"

namespace edgesgd {

// Squared error: loss r^2 and slope 2 r for the residual r = z - target.
void LinearRegression::Accumulate(const ModelSpec& spec, std::span<const float> params,
                                  const DatasetView& data, std::span<float> gradient,
                                  std::span<float> /*scratch*/, EvaluationSums& totals) {
  internal::AccumulateScalarOutput(
      spec, params, data, gradient, totals, [&data](float output, std::size_t i) {
        const float residual = output - data.targets[i];
        return internal::SampleLoss{residual * residual, 2.0f * residual, false};
      });
}

}  // namespace edgesgd
