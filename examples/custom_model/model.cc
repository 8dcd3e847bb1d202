#include "model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

namespace custom_model {

namespace {

// One tensor per weight matrix and bias vector, in the order of MlpTensors.
edgesgd::TensorLayout LayoutOf(const MlpShape& shape) {
  const std::array<std::uint64_t, 4> sizes = {shape.hidden * shape.inputs, shape.hidden,
                                              shape.classes * shape.hidden, shape.classes};
  return edgesgd::TensorLayout::FromSizes(sizes).value();  // a zero size is fatal
}

}  // namespace

Mlp::Mlp(MlpShape shape)
    : shape_(shape),
      layout_(LayoutOf(shape)),
      hidden_(shape.hidden),
      probabilities_(shape.classes) {}

edgesgd::TensorLayout Mlp::Layout() const { return layout_; }

MlpTensors<const float> Mlp::Tensors(std::span<const float> parameters) const {
  return {layout_.Slice(parameters, 0), layout_.Slice(parameters, 1), layout_.Slice(parameters, 2),
          layout_.Slice(parameters, 3)};
}

MlpTensors<float> Mlp::Tensors(std::span<float> parameters) const {
  return {layout_.Slice(parameters, 0), layout_.Slice(parameters, 1), layout_.Slice(parameters, 2),
          layout_.Slice(parameters, 3)};
}

std::vector<float> Mlp::InitialParameters(std::uint64_t seed) const {
  std::vector<float> parameters(layout_.dimension(), 0.0f);
  const MlpTensors<float> tensors = Tensors(std::span<float>(parameters));
  std::mt19937_64 random(seed);
  const auto fill = [&random](std::span<float> weights, std::size_t fan_in) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    std::uniform_real_distribution<float> uniform(-bound, bound);
    for (float& weight : weights) weight = uniform(random);
  };
  fill(tensors.w1, shape_.inputs);
  fill(tensors.w2, shape_.hidden);
  return parameters;
}

void Mlp::Forward(const MlpTensors<const float>& tensors, std::span<const float> features) {
  for (std::size_t j = 0; j < shape_.hidden; ++j) {
    float sum = tensors.b1[j];
    for (std::size_t i = 0; i < shape_.inputs; ++i) {
      sum += tensors.w1[j * shape_.inputs + i] * features[i];
    }
    hidden_[j] = std::tanh(sum);
  }
  for (std::size_t c = 0; c < shape_.classes; ++c) {
    float sum = tensors.b2[c];
    for (std::size_t j = 0; j < shape_.hidden; ++j) {
      sum += tensors.w2[c * shape_.hidden + j] * hidden_[j];
    }
    probabilities_[c] = sum;
  }
  // Softmax, shifted by the largest logit so that exp cannot overflow.
  const float largest = *std::max_element(probabilities_.begin(), probabilities_.end());
  float total = 0.0f;
  for (float& p : probabilities_) {
    p = std::exp(p - largest);
    total += p;
  }
  for (float& p : probabilities_) p /= total;
}

void Mlp::AddSampleGradient(std::span<const float> parameters, std::span<const float> features,
                            std::uint32_t label, std::span<float> gradient) {
  const MlpTensors<const float> tensors = Tensors(parameters);
  const MlpTensors<float> grad = Tensors(gradient);
  Forward(tensors, features);
  // Cross-entropy after softmax: d loss / d logit_c = p_c - [c == label], computed in place.
  std::span<float> d_logits(probabilities_);
  d_logits[label] -= 1.0f;
  for (std::size_t c = 0; c < shape_.classes; ++c) {
    grad.b2[c] += d_logits[c];
    for (std::size_t j = 0; j < shape_.hidden; ++j) {
      grad.w2[c * shape_.hidden + j] += d_logits[c] * hidden_[j];
    }
  }
  // Back through W2 and tanh (d tanh(z) / dz = 1 - tanh(z)^2) to the first layer.
  for (std::size_t j = 0; j < shape_.hidden; ++j) {
    float d_hidden = 0.0f;
    for (std::size_t c = 0; c < shape_.classes; ++c) {
      d_hidden += d_logits[c] * tensors.w2[c * shape_.hidden + j];
    }
    const float d_pre = d_hidden * (1.0f - hidden_[j] * hidden_[j]);
    grad.b1[j] += d_pre;
    for (std::size_t i = 0; i < shape_.inputs; ++i) {
      grad.w1[j * shape_.inputs + i] += d_pre * features[i];
    }
  }
}

std::uint32_t Mlp::Predict(std::span<const float> parameters, std::span<const float> features) {
  Forward(Tensors(parameters), features);
  const auto best = std::max_element(probabilities_.begin(), probabilities_.end());
  return static_cast<std::uint32_t>(best - probabilities_.begin());
}

}  // namespace custom_model
