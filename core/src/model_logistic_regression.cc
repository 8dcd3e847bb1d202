#include "edgesgd/core/model/logistic_regression.h"
#include "edgesgd/core/model/loss_functions.h"
#include "scalar_output_model.h"

namespace edgesgd {

// The logistic loss of each sample's logit z for its label; z > 0 predicts the label 1.
void LogisticRegression::Accumulate(const ModelSpec& spec, std::span<const float> params,
                                    const DatasetView& data, std::span<float> gradient,
                                    std::span<float> /*scratch*/, EvaluationSums& totals) {
  internal::AccumulateScalarOutput(
      spec, params, data, gradient, totals, [&data](float logit, std::size_t i) {
        const bool positive = data.labels[i] != 0;
        const LogisticLossResult loss = LogisticLoss(logit, positive);
        return internal::SampleLoss{loss.loss, loss.slope, (logit > 0.0f) == positive};
      });
}

}  // namespace edgesgd
