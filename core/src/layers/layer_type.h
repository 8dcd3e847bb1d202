#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "edgesgd/core/model/sequential_spec.h"
#include "edgesgd/core/result.h"

// What the sequential model knows of a layer kind: the parser, formatter, shape inference,
// layout, initialisation, scratch sizing and the forward and backward passes all go through a
// kind's LayerSchema and LayerKernels, looked up in the table of layer_types.cc. Each kind is
// defined in its own file of this folder.
namespace edgesgd::layers {

// The LayerSpec fields a kind uses, in the order its text gives them after the name: units
// (required), a window's kernel (required) and stride (optional), then padding (optional).
// Fields a kind does not use stay 0 (padding kValid).
struct LayerFields {
  bool units = false;             // dense outputs, conv filters
  bool window = false;            // kernel and stride
  bool stride_is_kernel = false;  // a stride left out is the kernel (pools) rather than 1
  bool padding = false;           // same | valid
};

// Weight and bias counts of a parametric layer.
struct LayerTensors {
  std::uint64_t weights = 0;
  std::uint64_t bias = 0;
};

// Fan-in and fan-out of a parametric layer's weights, for their initialisation.
struct Fans {
  std::size_t in = 0;
  std::size_t out = 0;
};

// Floats of scratch a layer needs besides its output: its own, kept from the forward pass to
// the backward one, and a part of one area that every layer of a call reuses.
struct LayerScratch {
  std::uint64_t own = 0;
  std::uint64_t shared = 0;
};

struct LayerKernels;

// One layer of a call with its shapes, parameter offsets and buffers, resolved once per call.
struct LayerPlan {
  const LayerKernels* kernels = nullptr;
  LayerSpec layer;
  Shape in;
  Shape out;
  std::size_t weights = 0;  // offsets into params / gradient (parametric layers)
  std::size_t bias = 0;
  std::size_t pad_top = 0;  // zeros above and left of the input (same padding)
  std::size_t pad_left = 0;
  std::span<float> output;
  std::span<float> scratch;         // LayerScratch::own floats
  std::span<float> shared_scratch;  // LayerScratch::shared floats
};

// A kind's part in the spec: its fields, shapes and tensors. Kept apart from its kernels, so
// that an image that only validates specs (a worker checking its ModelSpec) links no kernel.
// The functions are called with fields checked against `fields`.
struct LayerSchema {
  LayerFields fields;
  // Output shape for input `in`, or a zero shape if the kind's window is larger than its input.
  Shape (*output_shape)(const LayerSpec& layer, Shape in) = nullptr;
  // Parametric kinds only (null for the others): weights then bias in the layout.
  LayerTensors (*tensors)(const LayerSpec& layer, Shape in) = nullptr;

  bool parametric() const { return tensors != nullptr; }
};

// A kind's initialisation, scratch and passes, called for valid specs only.
struct LayerKernels {
  // relu-like: a parametric layer whose output next meets one starts with He's initialisation
  // (kinds neither parametric nor activations, such as pooling, are looked past).
  bool activation = false;
  // Parametric kinds only.
  Fans (*fans)(const LayerSpec& layer, Shape in) = nullptr;
  // Kinds that need scratch besides their output.
  LayerScratch (*scratch)(const LayerSpec& layer, Shape in, Shape out) = nullptr;

  // Writes at.output from the layer's input.
  void (*forward)(const LayerPlan& at, std::span<const float> params,
                  std::span<const float> in) = nullptr;
  // From d loss / d output, adds the parameter gradients into `gradient` and writes d loss /
  // d input into in_gradient, unless it is empty (the first parametric layer's input needs
  // none). A zero output gradient adds nothing, so kinds may skip those rows.
  void (*backward)(const LayerPlan& at, std::span<const float> params, std::span<const float> in,
                   std::span<const float> out_gradient, std::span<float> gradient,
                   std::span<float> in_gradient) = nullptr;
};

// The kinds, each defined in its own file of this folder and listed in layer_types.cc.
extern const LayerSchema kDenseSchema;
extern const LayerKernels kDenseKernels;
extern const LayerSchema kConvSchema;
extern const LayerKernels kConvKernels;
extern const LayerSchema kDepthwiseConvSchema;
extern const LayerKernels kDepthwiseConvKernels;
extern const LayerSchema kMaxPoolSchema;
extern const LayerKernels kMaxPoolKernels;
extern const LayerSchema kAvgPoolSchema;
extern const LayerKernels kAvgPoolKernels;
extern const LayerSchema kReluSchema;
extern const LayerKernels kReluKernels;
extern const LayerSchema kRelu6Schema;
extern const LayerKernels kRelu6Kernels;
extern const LayerSchema kFlattenSchema;
extern const LayerKernels kFlattenKernels;

// The schema of `kind`, or null if it is not a known value (a spec may come from outside).
const LayerSchema* FindLayerSchema(LayerKind kind);

// The kernels of a known kind.
const LayerKernels& KernelsOf(LayerKind kind);

// The kind a spec's text names. Errors: kInvalidArgument listing the known names.
Result<LayerKind> ParseLayerKind(std::string_view name);

// The name of a known kind in a spec's text.
std::string_view LayerKindName(LayerKind kind);

}  // namespace edgesgd::layers
