#include "edgesgd/core/model/logistic_regression.h"

#include "edgesgd/core/model/loss_functions.h"
#include "scalar_output_model.h"

namespace edgesgd {
namespace {

// The logistic loss of logit z for sample i's label, and whether z > 0 predicts it.
internal::SampleLoss Logistic(const DatasetView& data, float logit, std::size_t i) {
  const bool positive = data.labels[i] != 0;
  const LogisticLossResult loss = LogisticLoss(logit, positive);
  return {loss.loss, loss.slope, (logit > 0.0f) == positive};
}

}  // namespace

Result<float> LogisticRegression::LossAndGradient(const ModelSpec& spec,
                                                  std::span<const float> params,
                                                  const DatasetView& batch,
                                                  std::span<float> gradient,
                                                  std::span<float> scratch) {
  return internal::ScalarOutputLossAndGradient(
      ModelKind::kLogisticRegression, spec, params, batch, gradient, scratch, ScratchFloats(spec),
      [&batch](float logit, std::size_t i) { return Logistic(batch, logit, i); });
}

Status LogisticRegression::AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                           const DatasetView& data, std::span<float> scratch,
                                           EvaluationSums& sums) {
  return internal::AddScalarOutputEvaluation(
      ModelKind::kLogisticRegression, spec, params, data, scratch, ScratchFloats(spec), sums,
      [&data](float logit, std::size_t i) { return Logistic(data, logit, i); });
}

}  // namespace edgesgd
