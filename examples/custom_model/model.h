#pragma once

// The example's model, written by hand: a two-layer perceptron (inputs -> tanh hidden layer ->
// softmax over the classes) trained on cross-entropy. edgesgd knows nothing of it: it moves one
// flat vector of floats, split into tensors by Layout(), and asks the program for gradients.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "edgesgd/core/tensor_layout.h"

namespace custom_model {

struct MlpShape {
  std::size_t inputs = 0;
  std::size_t hidden = 0;
  std::size_t classes = 0;
};

// Views of the four tensors inside the flat parameter vector (T is float or const float).
template <typename T>
struct MlpTensors {
  std::span<T> w1;  // hidden x inputs, row-major
  std::span<T> b1;  // hidden
  std::span<T> w2;  // classes x hidden, row-major
  std::span<T> b2;  // classes
};

class Mlp {
 public:
  // Every size of `shape` must be at least 1. Takes the scratch one sample's forward and
  // backward pass need, so that the calls below do not allocate.
  explicit Mlp(MlpShape shape);

  // The parameters as edgesgd sees them: one tensor per weight matrix and bias vector, in the
  // order of MlpTensors, end to end. Codecs compress per tensor (top_k keeps its fraction of
  // each), so a small bias is not crowded out by a large weight matrix.
  edgesgd::TensorLayout Layout() const;

  MlpTensors<const float> Tensors(std::span<const float> parameters) const;
  MlpTensors<float> Tensors(std::span<float> parameters) const;

  // Starting parameters: weights uniform in +-1/sqrt(fan-in), biases zero.
  std::vector<float> InitialParameters(std::uint64_t seed) const;

  // Adds the gradient of one sample's cross-entropy loss to `gradient` (laid out like
  // `parameters`). `label` must be below the shape's class count.
  void AddSampleGradient(std::span<const float> parameters, std::span<const float> features,
                         std::uint32_t label, std::span<float> gradient);

  // The most likely class of one sample.
  std::uint32_t Predict(std::span<const float> parameters, std::span<const float> features);

 private:
  // Fills hidden_ and probabilities_ for one sample.
  void Forward(const MlpTensors<const float>& tensors, std::span<const float> features);

  MlpShape shape_;
  edgesgd::TensorLayout layout_;
  std::vector<float> hidden_;         // tanh activations
  std::vector<float> probabilities_;  // softmax outputs
};

}  // namespace custom_model
