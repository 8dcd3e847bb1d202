#include "edgesgd/core/model/logistic_regression.h"
#include "edgesgd/core/model/loss_functions.h"
#include "model_calls.h"
#include "scalar_output_model.h"

namespace edgesgd {
namespace {

// The logistic loss of each sample's logit z for its label; z > 0 predicts the label 1.
auto Logistic(const ModelSpec& spec, std::span<const float> params) {
  return
      [&spec, params](const DatasetView& data, std::span<float> gradient, EvaluationSums& totals) {
        internal::AccumulateScalarOutput(
            spec, params, data, gradient, totals, [&data](float logit, std::size_t i) {
              const bool positive = data.labels[i] != 0;
              const LogisticLossResult loss = LogisticLoss(logit, positive);
              return internal::SampleLoss{loss.loss, loss.slope, (logit > 0.0f) == positive};
            });
      };
}

}  // namespace

Result<float> LogisticRegression::LossAndGradient(const ModelSpec& spec,
                                                  std::span<const float> params,
                                                  const DatasetView& batch,
                                                  std::span<float> gradient,
                                                  std::span<float> scratch) {
  return internal::MeanLossAndGradient(ModelKind::kLogisticRegression, spec, params, batch,
                                       gradient, scratch, ScratchFloats(spec),
                                       Logistic(spec, params));
}

Status LogisticRegression::AddToEvaluation(const ModelSpec& spec, std::span<const float> params,
                                           const DatasetView& data, std::span<float> scratch,
                                           EvaluationSums& sums) {
  return internal::AddEvaluation(ModelKind::kLogisticRegression, spec, params, data, scratch,
                                 ScratchFloats(spec), sums, Logistic(spec, params));
}

}  // namespace edgesgd
