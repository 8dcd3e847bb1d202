#include "edgesgd/core/eigen.h"
#include "edgesgd/core/model/loss_functions.h"
#include "edgesgd/core/model/mlp.h"

namespace edgesgd {
namespace {

// Offsets of the four tensors in the flat vector (bias offsets unused when spec.bias is false).
struct MlpOffsets {
  std::size_t w1 = 0;
  std::size_t b1 = 0;
  std::size_t w2 = 0;
  std::size_t b2 = 0;
};

MlpOffsets Offsets(const ModelSpec& spec) {
  MlpOffsets offsets;
  offsets.b1 = spec.hidden * spec.features;
  offsets.w2 = offsets.b1 + (spec.bias ? spec.hidden : 0);
  offsets.b2 = offsets.w2 + spec.classes * spec.hidden;
  return offsets;
}

}  // namespace

// Adds the cross-entropy and correct predictions of `data` to `totals`; when `gradient` is
// non-empty also accumulates the batch-mean gradient into it by per-sample backpropagation.
void Mlp::Accumulate(const ModelSpec& spec, std::span<const float> params, const DatasetView& data,
                     std::span<float> gradient, std::span<float> scratch, EvaluationSums& totals) {
  const std::size_t hidden_size = spec.hidden;
  const std::size_t classes = spec.classes;
  const auto h = static_cast<Eigen::Index>(hidden_size);
  const auto c = static_cast<Eigen::Index>(classes);
  const auto d = static_cast<Eigen::Index>(spec.features);
  const MlpOffsets at = Offsets(spec);
  const ConstRowMajorMap w1(params.data() + at.w1, h, d);
  const ConstRowMajorMap w2(params.data() + at.w2, c, h);
  const bool want_gradient = !gradient.empty();
  const float scale = 1.0f / static_cast<float>(data.num_samples);
  const std::span<float> hidden = scratch.first(hidden_size);
  const std::span<float> hidden_gradient = scratch.subspan(hidden_size, hidden_size);
  const std::span<float> logits = scratch.subspan(2 * hidden_size, classes);
  const ConstVectorMap hidden_map(hidden.data(), h);
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const ConstVectorMap x(data.Row(i).data(), d);
    for (std::size_t j = 0; j < hidden_size; ++j) {
      float pre = w1.row(static_cast<Eigen::Index>(j)).dot(x);
      if (spec.bias) pre += params[at.b1 + j];
      hidden[j] = pre > 0.0f ? pre : 0.0f;
    }
    for (std::size_t k = 0; k < classes; ++k) {
      logits[k] = w2.row(static_cast<Eigen::Index>(k)).dot(hidden_map);
      if (spec.bias) logits[k] += params[at.b2 + k];
    }
    const std::size_t label = data.labels[i];
    const SoftmaxCrossEntropyResult loss = SoftmaxCrossEntropyInPlace(logits, label);
    totals.loss += static_cast<double>(loss.loss);
    if (loss.argmax == label) ++totals.correct;
    if (!want_gradient) continue;

    logits[label] -= 1.0f;  // d loss / d z = p - onehot(label)
    RowMajorMap w2_gradient(gradient.data() + at.w2, c, h);
    VectorMap dh(hidden_gradient.data(), h);
    dh.setZero();
    for (std::size_t k = 0; k < classes; ++k) {
      const float slope = scale * logits[k];
      const auto row = static_cast<Eigen::Index>(k);
      w2_gradient.row(row) += slope * hidden_map.transpose();
      dh += slope * w2.row(row).transpose();
      if (spec.bias) gradient[at.b2 + k] += slope;
    }
    RowMajorMap w1_gradient(gradient.data() + at.w1, h, d);
    for (std::size_t j = 0; j < hidden_size; ++j) {
      // ReLU passes gradient only where it was active (subgradient 0 at the kink).
      if (!(hidden[j] > 0.0f)) continue;
      const float slope = hidden_gradient[j];
      w1_gradient.row(static_cast<Eigen::Index>(j)) += slope * x.transpose();
      if (spec.bias) gradient[at.b1 + j] += slope;
    }
  }
}

}  // namespace edgesgd
