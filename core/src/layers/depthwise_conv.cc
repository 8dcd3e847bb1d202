#include <algorithm>

#include "edgesgd/core/eigen.h"
#include "layers/layer_type.h"
#include "layers/window.h"

// dwconv:KERNEL[:STRIDE[:same|valid]], one filter per channel, worked per tap on contiguous
// channel vectors.
namespace edgesgd::layers {
namespace {

LayerTensors Tensors(const LayerSpec& layer, Shape in) {
  return {std::uint64_t{layer.kernel} * layer.kernel * in.channels, in.channels};
}

// Each output sees one channel's kernel.
Fans FansOf(const LayerSpec& layer, Shape) {
  const std::size_t field = std::size_t{layer.kernel} * layer.kernel;
  return {field, field};
}

void Forward(const LayerPlan& at, std::span<const float> params, std::span<const float> in) {
  const std::size_t c = at.in.channels;
  const std::size_t k = at.layer.kernel;
  const auto channels = static_cast<Eigen::Index>(c);
  std::size_t pixel = 0;
  for (std::size_t oy = 0; oy < at.out.height; ++oy) {
    const WindowRange rows = Cover(oy, at.layer, at.pad_top, at.in.height);
    for (std::size_t ox = 0; ox < at.out.width; ++ox, ++pixel) {
      const WindowRange cols = Cover(ox, at.layer, at.pad_left, at.in.width);
      VectorMap out(at.output.data() + pixel * c, channels);
      out.setZero();
      for (std::size_t r = 0; r < rows.count; ++r) {
        for (std::size_t q = 0; q < cols.count; ++q) {
          const std::size_t tap = (rows.first + r) * k + cols.first + q;
          const std::size_t source = (rows.begin + r) * at.in.width + cols.begin + q;
          out += ConstVectorMap(params.data() + at.weights + tap * c, channels)
                     .cwiseProduct(ConstVectorMap(in.data() + source * c, channels));
        }
      }
      out += ConstVectorMap(params.data() + at.bias, channels);
    }
  }
}

void Backward(const LayerPlan& at, std::span<const float> params, std::span<const float> in,
              std::span<const float> out_gradient, std::span<float> gradient,
              std::span<float> in_gradient) {
  const std::size_t c = at.in.channels;
  const std::size_t k = at.layer.kernel;
  const auto channels = static_cast<Eigen::Index>(c);
  std::fill(in_gradient.begin(), in_gradient.end(), 0.0f);
  VectorMap bias_gradient(gradient.data() + at.bias, channels);
  std::size_t pixel = 0;
  for (std::size_t oy = 0; oy < at.out.height; ++oy) {
    const WindowRange rows = Cover(oy, at.layer, at.pad_top, at.in.height);
    for (std::size_t ox = 0; ox < at.out.width; ++ox, ++pixel) {
      const WindowRange cols = Cover(ox, at.layer, at.pad_left, at.in.width);
      const ConstVectorMap slopes(out_gradient.data() + pixel * c, channels);
      bias_gradient += slopes;
      for (std::size_t r = 0; r < rows.count; ++r) {
        for (std::size_t q = 0; q < cols.count; ++q) {
          const std::size_t tap = (rows.first + r) * k + cols.first + q;
          const std::size_t source = (rows.begin + r) * at.in.width + cols.begin + q;
          VectorMap(gradient.data() + at.weights + tap * c, channels) +=
              slopes.cwiseProduct(ConstVectorMap(in.data() + source * c, channels));
          if (in_gradient.empty()) continue;
          VectorMap(in_gradient.data() + source * c, channels) +=
              slopes.cwiseProduct(ConstVectorMap(params.data() + at.weights + tap * c, channels));
        }
      }
    }
  }
}

}  // namespace

const LayerSchema kDepthwiseConvSchema = {
    .fields = {.window = true, .padding = true},
    .output_shape = SweptShapePerChannel,
    .tensors = Tensors,
};

const LayerKernels kDepthwiseConvKernels = {
    .fans = FansOf,
    .forward = Forward,
    .backward = Backward,
};

}  // namespace edgesgd::layers
