#include <algorithm>

#include "layers/layer_type.h"
#include "layers/window.h"

// avgpool:K[:STRIDE], valid windows, stride K by default.
namespace edgesgd::layers {
namespace {

float InverseArea(const LayerSpec& layer) {
  return 1.0f / static_cast<float>(layer.kernel * layer.kernel);
}

void Forward(const LayerPlan& at, std::span<const float>, std::span<const float> in) {
  const std::size_t c = at.in.channels;
  const float inverse_area = InverseArea(at.layer);
  std::fill(at.output.begin(), at.output.end(), 0.0f);
  ForEachPoolTap(at, [&](std::size_t pixel, std::size_t, std::size_t source) {
    for (std::size_t j = 0; j < c; ++j) at.output[pixel * c + j] += in[source * c + j];
  });
  for (float& value : at.output) value *= inverse_area;
}

void Backward(const LayerPlan& at, std::span<const float>, std::span<const float>,
              std::span<const float> out_gradient, std::span<float>, std::span<float> in_gradient) {
  const std::size_t c = at.in.channels;
  const float inverse_area = InverseArea(at.layer);
  std::fill(in_gradient.begin(), in_gradient.end(), 0.0f);
  ForEachPoolTap(at, [&](std::size_t pixel, std::size_t, std::size_t source) {
    for (std::size_t j = 0; j < c; ++j) {
      in_gradient[source * c + j] += out_gradient[pixel * c + j] * inverse_area;
    }
  });
}

}  // namespace

const LayerSchema kAvgPoolSchema = {
    .fields = {.window = true, .stride_is_kernel = true},
    .output_shape = SweptShapePerChannel,
};

const LayerKernels kAvgPoolKernels = {
    .forward = Forward,
    .backward = Backward,
};

}  // namespace edgesgd::layers
