#include <limits>

#include "layers/layer_type.h"

// relu: max(0, x), and relu6: min(max(0, x), 6). The gradient passes where the input is
// strictly inside the linear piece (subgradient 0 at the kinks).
namespace edgesgd::layers {
namespace {

Shape OutputShape(const LayerSpec&, Shape in) { return in; }

template <bool kCapped>
void Forward(const LayerPlan& at, std::span<const float>, std::span<const float> in) {
  for (std::size_t j = 0; j < in.size(); ++j) at.output[j] = in[j] > 0.0f ? in[j] : 0.0f;
  if (!kCapped) return;
  for (float& value : at.output) value = value < 6.0f ? value : 6.0f;
}

template <bool kCapped>
void Backward(const LayerPlan&, std::span<const float>, std::span<const float> in,
              std::span<const float> out_gradient, std::span<float>, std::span<float> in_gradient) {
  // Both operands are loaded unconditionally so the select vectorizes instead of branching.
  const float cap = kCapped ? 6.0f : std::numeric_limits<float>::infinity();
  for (std::size_t j = 0; j < in.size(); ++j) {
    const float value = in[j];
    const float slope = out_gradient[j];
    in_gradient[j] = value > 0.0f && value < cap ? slope : 0.0f;
  }
}

}  // namespace

const LayerSchema kReluSchema = {
    .fields = {},
    .output_shape = OutputShape,
};

const LayerKernels kReluKernels = {
    .activation = true,
    .forward = Forward<false>,
    .backward = Backward<false>,
};

const LayerSchema kRelu6Schema = {
    .fields = {},
    .output_shape = OutputShape,
};

const LayerKernels kRelu6Kernels = {
    .activation = true,
    .forward = Forward<true>,
    .backward = Backward<true>,
};

}  // namespace edgesgd::layers
