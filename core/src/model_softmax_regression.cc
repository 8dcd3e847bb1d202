#include "edgesgd/core/eigen.h"
#include "edgesgd/core/model/loss_functions.h"
#include "edgesgd/core/model/softmax_regression.h"

namespace edgesgd {

// Adds the cross-entropy and correct predictions of `data` to `totals`; when `gradient` is
// non-empty also accumulates (1 / B) * sum_i (softmax(z_i) - onehot(y_i)) [x_i^T, 1] into it.
void SoftmaxRegression::Accumulate(const ModelSpec& spec, std::span<const float> params,
                                   const DatasetView& data, std::span<float> gradient,
                                   std::span<float> scratch, EvaluationSums& totals) {
  const std::size_t classes = spec.classes;
  const auto c = static_cast<Eigen::Index>(classes);
  const auto d = static_cast<Eigen::Index>(spec.features);
  const std::size_t weight_count = classes * spec.features;
  const ConstRowMajorMap weights(params.data(), c, d);
  const std::span<const float> bias =
      spec.bias ? params.subspan(weight_count, classes) : std::span<const float>();
  const bool want_gradient = !gradient.empty();
  const float scale = 1.0f / static_cast<float>(data.num_samples);
  const std::span<float> logits = scratch.first(classes);
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const ConstVectorMap x(data.Row(i).data(), d);
    for (std::size_t k = 0; k < classes; ++k) {
      logits[k] = weights.row(static_cast<Eigen::Index>(k)).dot(x);
      if (!bias.empty()) logits[k] += bias[k];
    }
    const std::size_t label = data.labels[i];
    const SoftmaxCrossEntropyResult loss = SoftmaxCrossEntropyInPlace(logits, label);
    totals.loss += static_cast<double>(loss.loss);
    if (loss.argmax == label) ++totals.correct;
    if (!want_gradient) continue;
    logits[label] -= 1.0f;  // d loss / d z = p - onehot(label)
    RowMajorMap weight_gradient(gradient.data(), c, d);
    for (std::size_t k = 0; k < classes; ++k) {
      const float slope = scale * logits[k];
      weight_gradient.row(static_cast<Eigen::Index>(k)) += slope * x.transpose();
      if (spec.bias) gradient[weight_count + k] += slope;
    }
  }
}

}  // namespace edgesgd
