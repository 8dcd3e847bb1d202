#include "layers/window.h"

namespace edgesgd::layers {
namespace {

// Output side of a window sweep, or 0 if the window does not fit.
std::uint64_t SweptSide(std::uint32_t in, std::uint32_t kernel, std::uint32_t stride,
                        Padding padding) {
  if (kernel > in) return 0;
  if (padding == Padding::kSame) return (std::uint64_t{in} + stride - 1) / stride;
  return (in - kernel) / stride + 1;
}

}  // namespace

Shape SweptShape(const LayerSpec& layer, Shape in, std::uint32_t channels) {
  const std::uint64_t height = SweptSide(in.height, layer.kernel, layer.stride, layer.padding);
  const std::uint64_t width = SweptSide(in.width, layer.kernel, layer.stride, layer.padding);
  if (height == 0 || width == 0) return Shape{};
  return Shape{static_cast<std::uint32_t>(height), static_cast<std::uint32_t>(width), channels};
}

Shape SweptShapePerChannel(const LayerSpec& layer, Shape in) {
  return SweptShape(layer, in, in.channels);
}

std::size_t SamePadding(std::uint32_t in, std::uint32_t out, const LayerSpec& layer) {
  if (layer.padding != Padding::kSame) return 0;
  const std::size_t span = (std::size_t{out} - 1) * layer.stride + layer.kernel;
  return span > in ? (span - in) / 2 : 0;
}

}  // namespace edgesgd::layers
