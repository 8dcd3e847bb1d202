#include "edgesgd/core/eigen.h"
#include "layers/layer_type.h"

// dense:UNITS. Reads its input as a flat vector (an implicit flatten).
namespace edgesgd::layers {
namespace {

Shape OutputShape(const LayerSpec& layer, Shape) { return {1, 1, layer.units}; }

LayerTensors Tensors(const LayerSpec& layer, Shape in) {
  return {in.size() * layer.units, layer.units};
}

Fans FansOf(const LayerSpec& layer, Shape in) {
  return {static_cast<std::size_t>(in.size()), layer.units};
}

void Forward(const LayerPlan& at, std::span<const float> params, std::span<const float> in) {
  const auto units = static_cast<Eigen::Index>(at.out.channels);
  const auto inputs = static_cast<Eigen::Index>(in.size());
  const ConstRowMajorMap weights(params.data() + at.weights, units, inputs);
  const ConstVectorMap x(in.data(), inputs);
  for (Eigen::Index o = 0; o < units; ++o) {
    float value = weights.row(o).dot(x);
    value += params[at.bias + static_cast<std::size_t>(o)];
    at.output[static_cast<std::size_t>(o)] = value;
  }
}

void Backward(const LayerPlan& at, std::span<const float> params, std::span<const float> in,
              std::span<const float> out_gradient, std::span<float> gradient,
              std::span<float> in_gradient) {
  const auto units = static_cast<Eigen::Index>(at.out.channels);
  const auto inputs = static_cast<Eigen::Index>(in.size());
  const ConstRowMajorMap weights(params.data() + at.weights, units, inputs);
  RowMajorMap weight_gradient(gradient.data() + at.weights, units, inputs);
  const ConstVectorMap x(in.data(), inputs);
  VectorMap dx(in_gradient.data(), in_gradient.empty() ? 0 : inputs);
  dx.setZero();
  for (Eigen::Index o = 0; o < units; ++o) {
    const float slope = out_gradient[static_cast<std::size_t>(o)];
    if (slope == 0.0f) continue;
    weight_gradient.row(o) += slope * x.transpose();
    if (!in_gradient.empty()) dx += slope * weights.row(o).transpose();
    gradient[at.bias + static_cast<std::size_t>(o)] += slope;
  }
}

}  // namespace

const LayerSchema kDenseSchema = {
    .fields = {.units = true},
    .output_shape = OutputShape,
    .tensors = Tensors,
};

const LayerKernels kDenseKernels = {
    .fans = FansOf,
    .forward = Forward,
    .backward = Backward,
};

}  // namespace edgesgd::layers
