#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "layers/layer_type.h"

// Geometry of the kinds that sweep a square window over the input: convolutions and pools.
namespace edgesgd::layers {

// Output shape of the layer's window swept over `in`, with `channels` channels; a zero shape if
// the window is larger than its input.
Shape SweptShape(const LayerSpec& layer, Shape in, std::uint32_t channels);

// SweptShape with the input's channels: the output_shape of pools and depthwise convolutions.
Shape SweptShapePerChannel(const LayerSpec& layer, Shape in);

// Zeros before the input along one side (above or left) under same padding; 0 for valid
// padding and for kinds without a window.
std::size_t SamePadding(std::uint32_t in, std::uint32_t out, const LayerSpec& layer);

// The input rows or columns a window covers along one side, clipped to the input.
struct WindowRange {
  std::size_t begin = 0;  // first covered input index
  std::size_t first = 0;  // its offset inside the window
  std::size_t count = 0;  // covered indices
};

// The range the window of output index `out_index` covers, with `pad` zeros before the input's
// `in_side` values.
inline WindowRange Cover(std::size_t out_index, const LayerSpec& layer, std::size_t pad,
                         std::uint32_t in_side) {
  const std::size_t start = out_index * layer.stride;  // in padded coordinates
  const std::size_t first = start < pad ? pad - start : 0;
  const std::size_t end = std::min(start + layer.kernel, pad + in_side);  // padded, exclusive
  WindowRange range;
  range.first = first;
  range.begin = start + first - pad;
  range.count = end > start + first ? end - start - first : 0;
  return range;
}

// Visits every tap of a pool's (unpadded) windows: visit(output position, tap index row-major
// within the window, input position).
template <typename Visit>
void ForEachPoolTap(const LayerPlan& at, Visit visit) {
  const std::size_t k = at.layer.kernel;
  const std::size_t s = at.layer.stride;
  std::size_t pixel = 0;
  for (std::size_t oy = 0; oy < at.out.height; ++oy) {
    for (std::size_t ox = 0; ox < at.out.width; ++ox, ++pixel) {
      for (std::size_t ky = 0; ky < k; ++ky) {
        for (std::size_t kx = 0; kx < k; ++kx) {
          visit(pixel, ky * k + kx, (oy * s + ky) * at.in.width + ox * s + kx);
        }
      }
    }
  }
}

}  // namespace edgesgd::layers
