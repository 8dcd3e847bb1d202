#pragma once

// What linear and logistic regression share: one output z = w . x + b per sample, whose loss and
// slope dloss/dz a model-specific rule gives. Not part of the public API.

#include <cstddef>
#include <span>

#include "edgesgd/core/eigen.h"
#include "edgesgd/core/model/model_spec.h"

namespace edgesgd::internal {

// One sample's loss at output z, its slope dloss/dz, and whether z predicts its label.
struct SampleLoss {
  float loss;
  float slope;
  bool correct;
};

// Adds the losses and correct predictions of `data` to `totals`; when `gradient` is non-empty
// also accumulates (1 / B) * sum_i slope_i [x_i, 1] into it. `rule(z, i)` scores sample i.
template <typename Rule>
void AccumulateScalarOutput(const ModelSpec& spec, std::span<const float> params,
                            const DatasetView& data, std::span<float> gradient,
                            EvaluationSums& totals, Rule rule) {
  const auto d = static_cast<Eigen::Index>(spec.features);
  const ConstVectorMap w(params.data(), d);
  const float bias = spec.bias ? params[spec.features] : 0.0f;
  const bool want_gradient = !gradient.empty();
  const float scale = 1.0f / static_cast<float>(data.num_samples);
  float bias_gradient = 0.0f;
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const ConstVectorMap x(data.Row(i).data(), d);
    const SampleLoss sample = rule(w.dot(x) + bias, i);
    totals.loss += static_cast<double>(sample.loss);
    if (sample.correct) ++totals.correct;
    if (want_gradient) {
      const float slope = scale * sample.slope;
      VectorMap(gradient.data(), d) += slope * x;
      bias_gradient += slope;
    }
  }
  if (want_gradient && spec.bias) gradient[spec.features] = bias_gradient;
}

}  // namespace edgesgd::internal
