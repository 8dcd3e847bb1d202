#pragma once

// Helpers the model tests share: random datasets that own their storage, numeric gradients.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "edgesgd/core/data/dataset.h"

namespace edgesgd::test_util {

// A labelled (or, without classes, regression) dataset that owns its storage.
struct OwnedData {
  std::vector<float> features;
  std::vector<std::uint8_t> labels;
  std::vector<float> targets;
  std::size_t samples = 0;
  std::size_t dim = 0;
  std::size_t classes = 0;

  DatasetView View() const {
    DatasetView view;
    view.features = features;
    view.labels = labels;
    view.targets = targets;
    view.num_samples = samples;
    view.feature_dim = dim;
    view.num_classes = classes;
    return view;
  }
};

// `samples` rows of `dim` normal features (standard deviation `stddev`) with labels below
// `classes`, or with normal targets when `classes` is 0.
inline OwnedData RandomData(std::size_t samples, std::size_t dim, std::size_t classes,
                            std::uint32_t seed, float stddev = 1.0f) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  OwnedData data;
  data.samples = samples;
  data.dim = dim;
  data.classes = classes;
  data.features.resize(samples * dim);
  for (float& value : data.features) value = normal(engine);
  if (classes == 0) {
    data.targets.resize(samples);
    for (float& value : data.targets) value = normal(engine);
  } else {
    std::uniform_int_distribution<int> label(0, static_cast<int>(classes) - 1);
    data.labels.resize(samples);
    for (auto& value : data.labels) value = static_cast<std::uint8_t>(label(engine));
  }
  return data;
}

// Central differences of `loss` at `at` with step `step`, on every `stride`th coordinate (the
// others are 0).
inline std::vector<double> NumericGradient(
    const std::function<double(const std::vector<double>&)>& loss, const std::vector<double>& at,
    double step, std::size_t stride = 1) {
  std::vector<double> numeric(at.size());
  for (std::size_t j = 0; j < at.size(); j += stride) {
    std::vector<double> plus = at;
    std::vector<double> minus = at;
    plus[j] += step;
    minus[j] -= step;
    numeric[j] = (loss(plus) - loss(minus)) / (2.0 * step);
  }
  return numeric;
}

inline double MaxAbs(const std::vector<double>& values) {
  double max_abs = 0.0;
  for (const double value : values) max_abs = std::max(max_abs, std::fabs(value));
  return max_abs;
}

}  // namespace edgesgd::test_util
