#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace edgesgd {

// A sequential network of small layers (small CNNs) ending in softmax cross-entropy, described
// by a fixed-size value (no heap) so that a ModelSpec can later carry one. Activations are
// NHWC without the batch axis: a sample of shape H x W x C is H * W * C floats, value (y, x, c)
// at (y * W + x) * C + c, which is how a dataset row of row-major pixels is read. A flat
// feature vector of D values is the shape 1 x 1 x D. See docs/models.md.

// Height x width x channels of one sample's activation.
struct Shape {
  std::uint32_t height = 0;
  std::uint32_t width = 0;
  std::uint32_t channels = 0;

  // Values of one sample (fits in 64 bits: each factor is below 2^32 and valid specs keep the
  // product below 2^32).
  constexpr std::uint64_t size() const {
    return std::uint64_t{height} * width * std::uint64_t{channels};
  }
  friend constexpr bool operator==(const Shape&, const Shape&) = default;
};

enum class LayerKind : std::uint8_t {
  kDense,          // dense:UNITS. Reads its input as a flat vector (an implicit flatten).
  kConv,           // conv:FILTERS:KERNEL[:STRIDE[:same|valid]], square kernel.
  kDepthwiseConv,  // dwconv:KERNEL[:STRIDE[:same|valid]], one filter per channel.
  kMaxPool,        // maxpool:K[:STRIDE], valid windows, stride K by default.
  kAvgPool,        // avgpool:K[:STRIDE], valid windows, stride K by default.
  kRelu,           // relu: max(0, x).
  kRelu6,          // relu6: min(max(0, x), 6).
  kFlatten,        // flatten: H x W x C -> 1 x 1 x HWC (same values, same order).
};

enum class Padding : std::uint8_t {
  kValid,  // windows lie inside the input: out = (in - kernel) / stride + 1, rounded down
  kSame,   // out = ceil(in / stride); zeros around, the odd one at the bottom / right
};

// One layer. Fields a kind does not use are 0 (padding kValid), so equal layers compare equal.
struct LayerSpec {
  LayerKind kind = LayerKind::kRelu;
  Padding padding = Padding::kValid;  // conv, dwconv
  std::uint32_t units = 0;            // dense outputs, conv filters
  std::uint32_t kernel = 0;           // conv, dwconv, pool window side
  std::uint32_t stride = 0;           // conv, dwconv, pools
  friend constexpr bool operator==(const LayerSpec&, const LayerSpec&) = default;
};

inline constexpr std::size_t kMaxSequentialLayers = 16;

// Longest canonical text of a spec: 16 layers of at most "conv:", three 10-digit fields, three
// colons, "valid" and a comma.
inline constexpr std::size_t kMaxSequentialSpecChars = kMaxSequentialLayers * 44;

struct SequentialSpec {
  Shape input;
  std::uint32_t classes = 0;      // 2..256; the last layer's output has this many values
  std::uint32_t layer_count = 0;  // 1..kMaxSequentialLayers
  std::array<LayerSpec, kMaxSequentialLayers> layers{};

  std::size_t features() const { return static_cast<std::size_t>(input.size()); }
  std::span<const LayerSpec> used_layers() const {
    return std::span<const LayerSpec>(layers).first(layer_count);
  }
  // Layers past layer_count take part too, so build specs from a zeroed value (as Parse does).
  friend constexpr bool operator==(const SequentialSpec&, const SequentialSpec&) = default;
};
static_assert(std::is_trivially_copyable_v<SequentialSpec>);

}  // namespace edgesgd
