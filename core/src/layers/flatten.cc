#include <algorithm>

#include "layers/layer_type.h"

// flatten: H x W x C -> 1 x 1 x HWC (same values, same order).
namespace edgesgd::layers {
namespace {

Shape OutputShape(const LayerSpec&, Shape in) {
  return {1, 1, static_cast<std::uint32_t>(in.size())};
}

void Forward(const LayerPlan& at, std::span<const float>, std::span<const float> in) {
  std::copy(in.begin(), in.end(), at.output.begin());
}

void Backward(const LayerPlan&, std::span<const float>, std::span<const float>,
              std::span<const float> out_gradient, std::span<float>, std::span<float> in_gradient) {
  std::copy(out_gradient.begin(), out_gradient.end(), in_gradient.begin());
}

}  // namespace

const LayerSchema kFlattenSchema = {
    .fields = {},
    .output_shape = OutputShape,
};

const LayerKernels kFlattenKernels = {
    .forward = Forward,
    .backward = Backward,
};

}  // namespace edgesgd::layers
