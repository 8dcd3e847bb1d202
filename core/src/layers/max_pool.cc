#include <algorithm>

#include "layers/layer_type.h"
#include "layers/window.h"

// maxpool:K[:STRIDE], valid windows, stride K by default. The gradient goes to the first tap
// (row-major within the window) holding the maximum, the one the forward pass picked.
namespace edgesgd::layers {
namespace {

void Forward(const LayerPlan& at, std::span<const float>, std::span<const float> in) {
  const std::size_t c = at.in.channels;
  ForEachPoolTap(at, [&](std::size_t pixel, std::size_t tap, std::size_t source) {
    float* out = at.output.data() + pixel * c;
    const float* value = in.data() + source * c;
    if (tap == 0) {
      for (std::size_t j = 0; j < c; ++j) out[j] = value[j];
      return;
    }
    // The first of equal maxima wins; Backward repeats this choice. A select rather than a
    // branch, so the loop over channels vectorizes.
    for (std::size_t j = 0; j < c; ++j) out[j] = value[j] > out[j] ? value[j] : out[j];
  });
}

void Backward(const LayerPlan& at, std::span<const float>, std::span<const float> in,
              std::span<const float> out_gradient, std::span<float>, std::span<float> in_gradient) {
  const std::size_t c = at.in.channels;
  const std::size_t k = at.layer.kernel;
  const std::size_t s = at.layer.stride;
  std::fill(in_gradient.begin(), in_gradient.end(), 0.0f);
  std::size_t pixel = 0;
  for (std::size_t oy = 0; oy < at.out.height; ++oy) {
    for (std::size_t ox = 0; ox < at.out.width; ++ox, ++pixel) {
      for (std::size_t j = 0; j < c; ++j) {
        // Same choice as Forward: the first tap holding the maximum. Selects rather than
        // branches, which random data would mispredict half the time.
        std::size_t best = (oy * s * at.in.width + ox * s) * c + j;
        float best_value = in[best];
        for (std::size_t ky = 0; ky < k; ++ky) {
          for (std::size_t kx = 0; kx < k; ++kx) {
            const std::size_t index = ((oy * s + ky) * at.in.width + ox * s + kx) * c + j;
            const bool greater = in[index] > best_value;
            best = greater ? index : best;
            best_value = greater ? in[index] : best_value;
          }
        }
        in_gradient[best] += out_gradient[pixel * c + j];
      }
    }
  }
}

}  // namespace

const LayerSchema kMaxPoolSchema = {
    .fields = {.window = true, .stride_is_kernel = true},
    .output_shape = SweptShapePerChannel,
};

const LayerKernels kMaxPoolKernels = {
    .forward = Forward,
    .backward = Backward,
};

}  // namespace edgesgd::layers
