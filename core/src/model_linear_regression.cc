#include "edgesgd/core/eigen.h"
#include "edgesgd/core/model/linear_regression.h"

namespace edgesgd {
namespace {

// Adds the squared residuals of `data` to `loss`; when `gradient` is non-empty also
// accumulates (2 / B) * sum_i r_i [x_i, 1] into it.
void Accumulate(const ModelSpec& spec, std::span<const float> params, const DatasetView& data,
                std::span<float> gradient, double& loss) {
  const auto d = static_cast<Eigen::Index>(spec.features);
  const ConstVectorMap w(params.data(), d);
  const float bias = spec.bias ? params[spec.features] : 0.0f;
  const bool want_gradient = !gradient.empty();
  const float scale = 2.0f / static_cast<float>(data.num_samples);
  float bias_gradient = 0.0f;
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const ConstVectorMap x(data.Row(i).data(), d);
    const float residual = w.dot(x) + bias - data.targets[i];
    loss += static_cast<double>(residual * residual);
    if (want_gradient) {
      const float slope = scale * residual;
      VectorMap(gradient.data(), d) += slope * x;
      bias_gradient += slope;
    }
  }
  if (want_gradient && spec.bias) gradient[spec.features] = bias_gradient;
}

}  // namespace

Result<float> LinearRegression::LossAndGradient(const ModelSpec& spec,
                                                std::span<const float> params,
                                                const DatasetView& batch, std::span<float> gradient,
                                                std::span<float> scratch) {
  EDGESGD_TRY(internal::CheckModelCall(spec, ModelKind::kLinearRegression, params, batch, gradient,
                                       true, scratch, ScratchFloats(spec)));
  for (float& value : gradient) value = 0.0f;
  double loss = 0.0;
  Accumulate(spec, params, batch, gradient, loss);
  return static_cast<float>(loss / static_cast<double>(batch.num_samples));
}

Status LinearRegression::AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                         const DatasetView& data, std::span<float> scratch,
                                         EvaluationSums& sums) {
  EDGESGD_TRY(internal::CheckModelCall(spec, ModelKind::kLinearRegression, params, data, {}, false,
                                       scratch, ScratchFloats(spec)));
  Accumulate(spec, params, data, {}, sums.loss);
  sums.samples += data.num_samples;
  return Status::Ok();
}

}  // namespace edgesgd
