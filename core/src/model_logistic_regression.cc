#include "edgesgd/core/eigen.h"
#include "edgesgd/core/model/logistic_regression.h"
#include "edgesgd/core/model/loss_functions.h"

namespace edgesgd {
namespace {

// Adds the losses and correct predictions of `data` to `totals`; when `gradient` is non-empty also
// accumulates (1 / B) * sum_i (sigmoid(z_i) - y_i) [x_i, 1] into it.
void Accumulate(const ModelSpec& spec, std::span<const float> params, const DatasetView& data,
                std::span<float> gradient, EvaluationSums& totals) {
  const auto d = static_cast<Eigen::Index>(spec.features);
  const ConstVectorMap w(params.data(), d);
  const float bias = spec.bias ? params[spec.features] : 0.0f;
  const bool want_gradient = !gradient.empty();
  const float scale = 1.0f / static_cast<float>(data.num_samples);
  float bias_gradient = 0.0f;
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const ConstVectorMap x(data.Row(i).data(), d);
    const float logit = w.dot(x) + bias;
    const bool positive = data.labels[i] != 0;
    const LogisticLossResult loss = LogisticLoss(logit, positive);
    totals.loss += static_cast<double>(loss.loss);
    if ((logit > 0.0f) == positive) ++totals.correct;
    if (want_gradient) {
      const float slope = scale * loss.slope;
      VectorMap(gradient.data(), d) += slope * x;
      bias_gradient += slope;
    }
  }
  if (want_gradient && spec.bias) gradient[spec.features] = bias_gradient;
}

}  // namespace

Result<float> LogisticRegression::LossAndGradient(const ModelSpec& spec,
                                                  std::span<const float> params,
                                                  const DatasetView& batch,
                                                  std::span<float> gradient,
                                                  std::span<float> scratch) {
  EDGESGD_TRY(internal::CheckModelCall(spec, ModelKind::kLogisticRegression, params, batch,
                                       gradient, true, scratch, ScratchFloats(spec)));
  for (float& value : gradient) value = 0.0f;
  EvaluationSums totals;
  Accumulate(spec, params, batch, gradient, totals);
  return static_cast<float>(totals.loss / static_cast<double>(batch.num_samples));
}

Status LogisticRegression::AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                           const DatasetView& data, std::span<float> scratch,
                                           EvaluationSums& sums) {
  EDGESGD_TRY(internal::CheckModelCall(spec, ModelKind::kLogisticRegression, params, data, {},
                                       false, scratch, ScratchFloats(spec)));
  Accumulate(spec, params, data, {}, sums);
  sums.samples += data.num_samples;
  return Status::Ok();
}

}  // namespace edgesgd
