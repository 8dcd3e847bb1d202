#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "dense_products.h"
#include "edgesgd/core/eigen.h"
#include "edgesgd/core/model/loss_functions.h"
#include "edgesgd/core/model/sequential.h"

namespace edgesgd {
namespace {

bool HasParameters(LayerKind kind) {
  return kind == LayerKind::kDense || kind == LayerKind::kConv || kind == LayerKind::kDepthwiseConv;
}

bool IsActivation(LayerKind kind) { return kind == LayerKind::kRelu || kind == LayerKind::kRelu6; }

// Values of a conv layer's receptive field, gathered for one output position (below 2^32 in
// a valid spec: the layer has more weights than that).
std::size_t FieldSize(const LayerSpec& layer, Shape in) {
  return layer.kind == LayerKind::kConv
             ? static_cast<std::size_t>(std::uint64_t{layer.kernel} * layer.kernel * in.channels)
             : 0;
}

// A conv layer gathers the receptive fields of a tile of output positions into the rows of a
// matrix and multiplies it by the weights, which is where the time goes. The tile holds as
// many fields as fit in this many floats (at least one), so the scratch stays bounded however
// large the image; a layer whose fields all fit keeps them from the forward pass for the
// backward one.
constexpr std::size_t kConvTileFloats = 16384;

// The backward products take at most this many output positions at a time, which bounds the
// scratch for their receptive fields' gradient.
constexpr std::size_t kProductPixels = 256;

// Output positions per tile of a conv layer (0 for other layers).
std::size_t ConvTilePixels(const LayerSpec& layer, Shape in, Shape out) {
  const std::size_t field = FieldSize(layer, in);
  if (field == 0) return 0;
  const std::uint64_t pixels = std::uint64_t{out.height} * out.width;
  return static_cast<std::size_t>(
      std::min<std::uint64_t>(pixels, std::max<std::size_t>(1, kConvTileFloats / field)));
}

// Floats of one tile of a conv layer's receptive fields (0 for other layers).
std::uint64_t ConvTileFloats(const LayerSpec& layer, Shape in, Shape out) {
  return std::uint64_t{ConvTilePixels(layer, in, out)} * FieldSize(layer, in);
}

// Output positions per product of a conv layer (0 for other layers).
std::size_t ConvProductPixels(const LayerSpec& layer, Shape in, Shape out) {
  return std::min(ConvTilePixels(layer, in, out), kProductPixels);
}

// Floats of the receptive fields' gradient for one product (0 for other layers).
std::uint64_t ConvProductFloats(const LayerSpec& layer, Shape in, Shape out) {
  return std::uint64_t{ConvProductPixels(layer, in, out)} * FieldSize(layer, in);
}

// One layer with its shapes, parameter offsets and output buffer, resolved once per call.
struct LayerPlan {
  LayerSpec layer;
  Shape in;
  Shape out;
  std::size_t weights = 0;  // offsets into params / gradient (parametric layers)
  std::size_t bias = 0;
  std::size_t pad_top = 0;  // zeros above and left of the input (same padding)
  std::size_t pad_left = 0;
  std::span<float> output;
  std::span<float> fields;  // a conv layer's gathered receptive fields, one tile
};

struct Plan {
  std::array<LayerPlan, kMaxSequentialLayers> layers{};
  std::size_t count = 0;
  std::size_t first_parametric = 0;  // backpropagation stops at its input
  std::span<float> gradients[2];     // d loss / d output of hidden layers, alternating
  std::span<float> field_gradients;  // their gradient, for the conv layer at hand
};

// Scratch floats by purpose, as ScratchFloats documents. In 64 bits: sixteen outputs of up to
// 2^32 - 1 values each overflow a 32-bit size_t.
struct ScratchSizes {
  std::uint64_t outputs = 0;
  std::uint64_t gradient = 0;  // each of the two gradient buffers
  std::uint64_t fields = 0;           // every conv layer's tile of fields
  std::uint64_t field_gradients = 0;  // the largest product's

  std::uint64_t total() const { return outputs + 2 * gradient + fields + field_gradients; }
};

ScratchSizes SizesOf(const SequentialSpec& spec, const SequentialShapes& shapes) {
  ScratchSizes sizes;
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    const std::uint64_t out = shapes.at[l + 1].size();
    sizes.outputs += out;
    if (l + 1 < spec.layer_count) sizes.gradient = std::max(sizes.gradient, out);
    const LayerSpec& layer = spec.layers[l];
    sizes.fields += ConvTileFloats(layer, shapes.at[l], shapes.at[l + 1]);
    sizes.field_gradients = std::max(sizes.field_gradients,
                                     ConvProductFloats(layer, shapes.at[l], shapes.at[l + 1]));
  }
  return sizes;
}

std::size_t SamePadding(std::uint32_t in, std::uint32_t out, const LayerSpec& layer) {
  if (layer.padding != Padding::kSame) return 0;
  const std::size_t span = (std::size_t{out} - 1) * layer.stride + layer.kernel;
  return span > in ? (span - in) / 2 : 0;
}

// Lays the call out over a valid spec's layout and scratch (ScratchFloats(spec) floats).
void MakePlan(const SequentialSpec& spec, const TensorLayout& layout, std::span<float> scratch,
              Plan& plan) {
  // References into Results rather than copies: these are a few hundred bytes of stack each.
  const Result<SequentialShapes> shapes_result = InferSequentialShapes(spec);
  const SequentialShapes& shapes = *shapes_result;
  const ScratchSizes sizes = SizesOf(spec, shapes);
  plan.count = spec.layer_count;
  std::size_t used = 0;
  std::size_t tensor = 0;
  bool seen_parametric = false;
  for (std::size_t l = 0; l < plan.count; ++l) {
    LayerPlan& at = plan.layers[l];
    at.layer = spec.layers[l];
    at.in = shapes.at[l];
    at.out = shapes.at[l + 1];
    if (HasParameters(at.layer.kind)) {
      if (!seen_parametric) plan.first_parametric = l;
      seen_parametric = true;
      at.weights = layout.offset(tensor);
      at.bias = layout.offset(tensor + 1);
      tensor += 2;
    }
    at.pad_top = SamePadding(at.in.height, at.out.height, at.layer);
    at.pad_left = SamePadding(at.in.width, at.out.width, at.layer);
    const auto out_size = static_cast<std::size_t>(at.out.size());
    at.output = scratch.subspan(used, out_size);
    used += out_size;
    const auto tile = static_cast<std::size_t>(ConvTileFloats(at.layer, at.in, at.out));
    at.fields = scratch.subspan(used, tile);
    used += tile;
  }
  // ScratchFloats(spec) fits in size_t (PrepareCall checked), and so does every part of it.
  const auto gradient = static_cast<std::size_t>(sizes.gradient);
  plan.gradients[0] = scratch.subspan(used, gradient);
  plan.gradients[1] = scratch.subspan(used + gradient, gradient);
  used += 2 * gradient;
  plan.field_gradients = scratch.subspan(used, static_cast<std::size_t>(sizes.field_gradients));
}

// The input rows and columns a window at output (oy, ox) covers, clipped to the input; `first`
// is the window offset of the first covered one.
struct WindowRange {
  std::size_t begin = 0;  // first covered input index
  std::size_t first = 0;  // its offset inside the window
  std::size_t count = 0;  // covered indices
};

WindowRange Cover(std::size_t out_index, const LayerSpec& layer, std::size_t pad,
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

// Copies the receptive field of output (oy, ox) into `field` as [ky][kx][channel], with zeros
// where the window hangs over the padding.
void GatherField(const LayerPlan& at, std::span<const float> in, std::size_t oy, std::size_t ox,
                 std::span<float> field) {
  const std::size_t k = at.layer.kernel;
  const std::size_t c = at.in.channels;
  const WindowRange rows = Cover(oy, at.layer, at.pad_top, at.in.height);
  const WindowRange cols = Cover(ox, at.layer, at.pad_left, at.in.width);
  // Plain loops rather than fill and copy: rows are a few floats, too short for memcpy calls.
  const std::size_t row_floats = k * c;
  const std::size_t lead = cols.first * c;
  const std::size_t covered = cols.count * c;
  for (std::size_t ky = 0; ky < k; ++ky) {
    float* target = field.data() + ky * row_floats;
    if (ky < rows.first || ky >= rows.first + rows.count) {
      for (std::size_t j = 0; j < row_floats; ++j) target[j] = 0.0f;
      continue;
    }
    const float* source =
        in.data() + ((rows.begin + ky - rows.first) * at.in.width + cols.begin) * c;
    for (std::size_t j = 0; j < lead; ++j) target[j] = 0.0f;
    for (std::size_t j = 0; j < covered; ++j) target[lead + j] = source[j];
    for (std::size_t j = lead + covered; j < row_floats; ++j) target[j] = 0.0f;
  }
}

// Adds a receptive field's gradient back onto the input positions it was gathered from.
void ScatterAddField(const LayerPlan& at, std::span<const float> field_gradient, std::size_t oy,
                     std::size_t ox, std::span<float> in_gradient) {
  const std::size_t k = at.layer.kernel;
  const std::size_t c = at.in.channels;
  const WindowRange rows = Cover(oy, at.layer, at.pad_top, at.in.height);
  const WindowRange cols = Cover(ox, at.layer, at.pad_left, at.in.width);
  const auto length = static_cast<Eigen::Index>(cols.count * c);
  for (std::size_t r = 0; r < rows.count; ++r) {
    VectorMap target(in_gradient.data() + ((rows.begin + r) * at.in.width + cols.begin) * c,
                     length);
    target +=
        ConstVectorMap(field_gradient.data() + ((rows.first + r) * k + cols.first) * c, length);
  }
}

// ---- Forward: output of one layer from its input. ----

void DenseForward(const LayerPlan& at, std::span<const float> params, std::span<const float> in) {
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

// Output positions of a conv layer: `count` of them from position `first` (row-major).
struct ConvPixels {
  std::size_t first = 0;
  std::size_t count = 0;
};

// Gathers the receptive fields of a tile's positions into consecutive rows of `fields`. Most
// windows lie inside the image and are copied row by row without GatherField's padding checks.
void GatherFields(const LayerPlan& at, std::span<const float> in, ConvPixels tile,
                  std::span<float> fields) {
  const std::size_t k = at.layer.kernel;
  const std::size_t c = at.in.channels;
  const std::size_t row_floats = k * c;
  const std::size_t in_row_floats = std::size_t{at.in.width} * c;
  float* target = fields.data();
  std::size_t oy = tile.first / at.out.width;
  std::size_t ox = tile.first % at.out.width;
  WindowRange rows = Cover(oy, at.layer, at.pad_top, at.in.height);
  for (std::size_t p = 0; p < tile.count; ++p, target += k * row_floats) {
    const WindowRange cols = Cover(ox, at.layer, at.pad_left, at.in.width);
    if (rows.count == k && cols.count == k) {
      const float* source = in.data() + rows.begin * in_row_floats + cols.begin * c;
      for (std::size_t ky = 0; ky < k; ++ky) {
        const float* from = source + ky * in_row_floats;
        float* to = target + ky * row_floats;
        for (std::size_t j = 0; j < row_floats; ++j) to[j] = from[j];
      }
    } else {
      GatherField(at, in, oy, ox, std::span<float>(target, k * row_floats));
    }
    if (++ox == at.out.width) {
      ox = 0;
      rows = Cover(++oy, at.layer, at.pad_top, at.in.height);
    }
  }
}

// Calls visit(block, fields) for consecutive blocks of ConvProductPixels output positions of a
// conv layer (the last of each tile fewer), with the block's receptive fields (one row of FieldSize values per position).
// Fields are gathered a tile at a time into at.fields, unless the backward pass finds the
// forward pass's still there: one tile covering the whole output.
enum class ConvPass { kForward, kBackward };

template <typename Visit>
void ForEachConvBlock(const LayerPlan& at, std::span<const float> in, ConvPass pass,
                      Visit visit) {
  const std::size_t field_size = FieldSize(at.layer, at.in);
  const std::size_t pixels = std::size_t{at.out.height} * at.out.width;
  const std::size_t tile_pixels = at.fields.size() / field_size;
  const std::size_t block_pixels = ConvProductPixels(at.layer, at.in, at.out);
  const bool kept = pass == ConvPass::kBackward && tile_pixels == pixels;
  for (ConvPixels tile; tile.first < pixels; tile.first += tile_pixels) {
    tile.count = std::min(tile_pixels, pixels - tile.first);
    if (!kept) GatherFields(at, in, tile, at.fields);
    for (std::size_t done = 0; done < tile.count; done += block_pixels) {
      const ConvPixels block{tile.first + done, std::min(block_pixels, tile.count - done)};
      visit(block, at.fields.data() + done * field_size);
    }
  }
}

void ConvForward(const LayerPlan& at, std::span<const float> params, std::span<const float> in) {
  const std::size_t filters = at.out.channels;
  const std::size_t field_size = FieldSize(at.layer, at.in);
  const Eigen::Map<const Eigen::RowVectorXf> bias(params.data() + at.bias,
                                                  static_cast<Eigen::Index>(filters));
  ForEachConvBlock(at, in, ConvPass::kForward, [&](ConvPixels block, const float* fields) {
    RowMajorMap out(at.output.data() + block.first * filters,
                    static_cast<Eigen::Index>(block.count), static_cast<Eigen::Index>(filters));
    out.rowwise() = bias;
    dense_products::AddProductWithTransposed(out.data(), fields, params.data() + at.weights,
                                             block.count, filters, field_size);
  });
}

void DepthwiseForward(const LayerPlan& at, std::span<const float> params,
                      std::span<const float> in) {
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

// Visits every pooling window: visit(pixel, input position of each tap in order).
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

void MaxPoolForward(const LayerPlan& at, std::span<const float> in) {
  const std::size_t c = at.in.channels;
  ForEachPoolTap(at, [&](std::size_t pixel, std::size_t tap, std::size_t source) {
    float* out = at.output.data() + pixel * c;
    const float* value = in.data() + source * c;
    if (tap == 0) {
      for (std::size_t j = 0; j < c; ++j) out[j] = value[j];
      return;
    }
    // The first of equal maxima wins; MaxPoolBackward repeats this choice. A select rather than
    // a branch, so the loop over channels vectorizes.
    for (std::size_t j = 0; j < c; ++j) out[j] = value[j] > out[j] ? value[j] : out[j];
  });
}

void AvgPoolForward(const LayerPlan& at, std::span<const float> in) {
  const std::size_t c = at.in.channels;
  const float inverse_area = 1.0f / static_cast<float>(at.layer.kernel * at.layer.kernel);
  std::fill(at.output.begin(), at.output.end(), 0.0f);
  ForEachPoolTap(at, [&](std::size_t pixel, std::size_t, std::size_t source) {
    for (std::size_t j = 0; j < c; ++j) at.output[pixel * c + j] += in[source * c + j];
  });
  for (float& value : at.output) value *= inverse_area;
}

void ActivationForward(const LayerPlan& at, std::span<const float> in) {
  for (std::size_t j = 0; j < in.size(); ++j) at.output[j] = in[j] > 0.0f ? in[j] : 0.0f;
  if (at.layer.kind != LayerKind::kRelu6) return;
  for (float& value : at.output) value = value < 6.0f ? value : 6.0f;
}

void Forward(const Plan& plan, std::span<const float> params, std::span<const float> sample) {
  std::span<const float> in = sample;
  for (std::size_t l = 0; l < plan.count; ++l) {
    const LayerPlan& at = plan.layers[l];
    switch (at.layer.kind) {
      case LayerKind::kDense:
        DenseForward(at, params, in);
        break;
      case LayerKind::kConv:
        ConvForward(at, params, in);
        break;
      case LayerKind::kDepthwiseConv:
        DepthwiseForward(at, params, in);
        break;
      case LayerKind::kMaxPool:
        MaxPoolForward(at, in);
        break;
      case LayerKind::kAvgPool:
        AvgPoolForward(at, in);
        break;
      case LayerKind::kRelu:
      case LayerKind::kRelu6:
        ActivationForward(at, in);
        break;
      case LayerKind::kFlatten:
        std::copy(in.begin(), in.end(), at.output.begin());
        break;
    }
    in = at.output;
  }
}

// ---- Backward: from d loss / d output, add the parameter gradients and (unless in_gradient
// is empty, for the first layer that needs none) write d loss / d input. A zero output
// gradient adds nothing, so those rows are skipped (most of them behind a ReLU). ----

void DenseBackward(const LayerPlan& at, std::span<const float> params, std::span<const float> in,
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

void ConvBackward(const LayerPlan& at, std::span<const float> params, std::span<const float> in,
                  std::span<const float> out_gradient, std::span<float> gradient,
                  std::span<float> in_gradient, std::span<float> field_gradients) {
  const std::size_t filters = at.out.channels;
  const std::size_t field_size = FieldSize(at.layer, at.in);
  Eigen::Map<Eigen::RowVectorXf> bias_gradient(gradient.data() + at.bias,
                                               static_cast<Eigen::Index>(filters));
  std::fill(in_gradient.begin(), in_gradient.end(), 0.0f);
  ForEachConvBlock(at, in, ConvPass::kBackward, [&](ConvPixels block, const float* fields) {
    const float* slopes = out_gradient.data() + block.first * filters;
    // Weight gradient (filters x field) += slopes^T * fields: row f sums the fields weighted by
    // filter f's slopes, so the factors are the slopes read down a column.
    dense_products::AddRowCombinations(gradient.data() + at.weights, {slopes, 1, filters}, fields,
                                       filters, block.count, field_size);
    bias_gradient += ConstRowMajorMap(slopes, static_cast<Eigen::Index>(block.count),
                                      static_cast<Eigen::Index>(filters))
                         .colwise()
                         .sum();
    if (in_gradient.empty()) return;
    // Fields' gradient (positions x field) = slopes * weights.
    std::fill_n(field_gradients.begin(), block.count * field_size, 0.0f);
    dense_products::AddRowCombinations(field_gradients.data(), {slopes, filters, 1},
                                       params.data() + at.weights, block.count, filters,
                                       field_size);
    for (std::size_t p = 0; p < block.count; ++p) {
      const std::size_t pixel = block.first + p;
      ScatterAddField(at, field_gradients.subspan(p * field_size, field_size),
                      pixel / at.out.width, pixel % at.out.width, in_gradient);
    }
  });
}

void DepthwiseBackward(const LayerPlan& at, std::span<const float> params,
                       std::span<const float> in, std::span<const float> out_gradient,
                       std::span<float> gradient, std::span<float> in_gradient) {
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

void MaxPoolBackward(const LayerPlan& at, std::span<const float> in,
                     std::span<const float> out_gradient, std::span<float> in_gradient) {
  const std::size_t c = at.in.channels;
  const std::size_t k = at.layer.kernel;
  const std::size_t s = at.layer.stride;
  std::fill(in_gradient.begin(), in_gradient.end(), 0.0f);
  std::size_t pixel = 0;
  for (std::size_t oy = 0; oy < at.out.height; ++oy) {
    for (std::size_t ox = 0; ox < at.out.width; ++ox, ++pixel) {
      for (std::size_t j = 0; j < c; ++j) {
        // Same choice as MaxPoolForward: the first tap holding the maximum. Selects rather
        // than branches, which random data would mispredict half the time.
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

void AvgPoolBackward(const LayerPlan& at, std::span<const float> out_gradient,
                     std::span<float> in_gradient) {
  const std::size_t c = at.in.channels;
  const float inverse_area = 1.0f / static_cast<float>(at.layer.kernel * at.layer.kernel);
  std::fill(in_gradient.begin(), in_gradient.end(), 0.0f);
  ForEachPoolTap(at, [&](std::size_t pixel, std::size_t, std::size_t source) {
    for (std::size_t j = 0; j < c; ++j) {
      in_gradient[source * c + j] += out_gradient[pixel * c + j] * inverse_area;
    }
  });
}

void ActivationBackward(const LayerPlan& at, std::span<const float> in,
                        std::span<const float> out_gradient, std::span<float> in_gradient) {
  // Gradient passes where the unit is on its slope (subgradient 0 at the kinks). Both operands
  // are loaded unconditionally so the select vectorizes instead of branching.
  const float cap =
      at.layer.kind == LayerKind::kRelu6 ? 6.0f : std::numeric_limits<float>::infinity();
  for (std::size_t j = 0; j < in.size(); ++j) {
    const float value = in[j];
    const float slope = out_gradient[j];
    in_gradient[j] = value > 0.0f && value < cap ? slope : 0.0f;
  }
}

// Backpropagates from the logits' gradient (in the last layer's output) down to the first
// parametric layer, adding into `gradient`.
void Backward(const Plan& plan, std::span<const float> params, std::span<const float> sample,
              std::span<float> gradient) {
  std::span<const float> out_gradient = plan.layers[plan.count - 1].output;
  for (std::size_t l = plan.count; l-- > plan.first_parametric;) {
    const LayerPlan& at = plan.layers[l];
    const std::span<const float> in = l == 0 ? sample : plan.layers[l - 1].output;
    const std::span<float> in_gradient =
        l == plan.first_parametric
            ? std::span<float>()
            : plan.gradients[l % 2].first(static_cast<std::size_t>(at.in.size()));
    switch (at.layer.kind) {
      case LayerKind::kDense:
        DenseBackward(at, params, in, out_gradient, gradient, in_gradient);
        break;
      case LayerKind::kConv:
        ConvBackward(at, params, in, out_gradient, gradient, in_gradient, plan.field_gradients);
        break;
      case LayerKind::kDepthwiseConv:
        DepthwiseBackward(at, params, in, out_gradient, gradient, in_gradient);
        break;
      case LayerKind::kMaxPool:
        MaxPoolBackward(at, in, out_gradient, in_gradient);
        break;
      case LayerKind::kAvgPool:
        AvgPoolBackward(at, out_gradient, in_gradient);
        break;
      case LayerKind::kRelu:
      case LayerKind::kRelu6:
        ActivationBackward(at, in, out_gradient, in_gradient);
        break;
      case LayerKind::kFlatten:
        std::copy(out_gradient.begin(), out_gradient.end(), in_gradient.begin());
        break;
    }
    out_gradient = in_gradient;
  }
}

// Adds the cross-entropy and correct predictions of `data` to `totals`; when `gradient` is
// non-empty also accumulates the batch-mean gradient into it, one sample at a time.
void Accumulate(const Plan& plan, std::span<const float> params, const DatasetView& data,
                std::span<float> gradient, EvaluationSums& totals) {
  const std::span<float> logits = plan.layers[plan.count - 1].output;
  const float scale = 1.0f / static_cast<float>(data.num_samples);
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const std::span<const float> sample = data.Row(i);
    Forward(plan, params, sample);
    const std::size_t label = data.labels[i];
    const SoftmaxCrossEntropyResult loss = SoftmaxCrossEntropyInPlace(logits, label);
    totals.loss += static_cast<double>(loss.loss);
    if (loss.argmax == label) ++totals.correct;
    if (gradient.empty()) continue;
    logits[label] -= 1.0f;  // d loss / d z = p - onehot(label), then the batch mean's 1 / B
    for (float& value : logits) value *= scale;
    Backward(plan, params, sample, gradient);
  }
}

// Checks a kernel call's arguments and lays it out in `plan` (filled in place: a plan is about
// 1 KB, which a Cortex-M stack should hold once, not in copies).
Status PrepareCall(const SequentialSpec& spec, std::span<const float> params,
                   const DatasetView& data, std::span<const float> gradient, bool check_gradient,
                   std::span<float> scratch, Plan& plan) {
  const Result<TensorLayout> layout_result = SequentialLayout(spec);
  EDGESGD_TRY(layout_result);
  const TensorLayout& layout = *layout_result;
  if (params.size() != layout.dimension()) {
    return Status::InvalidArgument("the parameters' size differs from the model's parameter count");
  }
  if (check_gradient && gradient.size() != layout.dimension()) {
    return Status::InvalidArgument("the gradient's size differs from the model's parameter count");
  }
  const std::size_t scratch_floats = Sequential::ScratchFloats(spec);
  if (scratch_floats == 0) {
    return Status::InvalidArgument("the network's scratch does not fit in this machine's memory");
  }
  if (scratch.size() < scratch_floats) {
    return Status::InvalidArgument("the scratch is smaller than the model's ScratchFloats");
  }
  if (data.has_byte_features()) {
    return Status::InvalidArgument("a model reads float features: gather byte rows first");
  }
  if (data.feature_dim != spec.features() || data.num_samples == 0) {
    return Status::InvalidArgument(
        "the data's feature_dim differs from the model's features, or it has no samples");
  }
  // Shapes only here; label ranges are checked against the model, not data.num_classes.
  DatasetView shape = data;
  shape.num_classes = 0;
  EDGESGD_TRY(ValidateDataset(shape));
  if (!data.has_labels()) return Status::InvalidArgument("a classifier needs data with labels");
  for (const std::uint8_t label : data.labels) {
    if (label >= spec.classes) {
      return Status::OutOfRange("a label is not below the model's class count");
    }
  }
  MakePlan(spec, layout, scratch.first(scratch_floats), plan);
  return Status::Ok();
}

// Fan-in and fan-out of a parametric layer's weights.
struct Fans {
  std::size_t in = 0;
  std::size_t out = 0;
};

Fans FansOf(const LayerSpec& layer, Shape in) {
  const std::size_t field = std::size_t{layer.kernel} * layer.kernel;
  switch (layer.kind) {
    case LayerKind::kDense:
      return {static_cast<std::size_t>(in.size()), layer.units};
    case LayerKind::kConv:
      return {field * in.channels, field * layer.units};
    default:  // depthwise: each output sees one channel's kernel
      return {field, field};
  }
}

// Whether the values a layer outputs next pass through relu or relu6 (pooling and flatten
// commute with them, so they are looked past).
bool FeedsActivation(const SequentialSpec& spec, std::size_t layer) {
  for (std::size_t l = layer + 1; l < spec.layer_count; ++l) {
    const LayerKind kind = spec.layers[l].kind;
    if (IsActivation(kind)) return true;
    if (HasParameters(kind)) return false;
  }
  return false;
}

}  // namespace

std::size_t Sequential::ScratchFloats(const SequentialSpec& spec) {
  if (!ValidateSequentialSpec(spec).ok()) return 0;
  const std::uint64_t total = SizesOf(spec, *InferSequentialShapes(spec)).total();
  return total > std::numeric_limits<std::size_t>::max() / sizeof(float)
             ? 0
             : static_cast<std::size_t>(total);
}

Result<float> Sequential::LossAndGradient(const SequentialSpec& spec, std::span<const float> params,
                                          const DatasetView& batch, std::span<float> gradient,
                                          std::span<float> scratch) {
  Plan plan;
  EDGESGD_TRY(PrepareCall(spec, params, batch, gradient, true, scratch, plan));
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  EvaluationSums totals;
  Accumulate(plan, params, batch, gradient, totals);
  return static_cast<float>(totals.loss / static_cast<double>(batch.num_samples));
}

Status Sequential::AddToEvaluation(const SequentialSpec& spec, std::span<const float> params,
                                   const DatasetView& data, std::span<float> scratch,
                                   EvaluationSums& sums) {
  Plan plan;
  EDGESGD_TRY(PrepareCall(spec, params, data, {}, false, scratch, plan));
  Accumulate(plan, params, data, {}, sums);
  sums.samples += data.num_samples;
  return Status::Ok();
}

Status InitSequentialParameters(const SequentialSpec& spec, std::uint64_t seed,
                                std::span<float> params) {
  const Result<TensorLayout> layout_result = SequentialLayout(spec);
  EDGESGD_TRY(layout_result);
  const TensorLayout& layout = *layout_result;
  if (params.size() != layout.dimension()) {
    return Status::InvalidArgument("the parameters' size differs from the model's parameter count");
  }
  std::fill(params.begin(), params.end(), 0.0f);
  const Result<SequentialShapes> shapes_result = InferSequentialShapes(spec);
  const SequentialShapes& shapes = *shapes_result;
  std::size_t last = 0;
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    if (HasParameters(spec.layers[l].kind)) last = l;
  }
  std::uint32_t tensor = 0;
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    if (!HasParameters(spec.layers[l].kind)) continue;
    const Fans fans = FansOf(spec.layers[l], shapes.at[l]);
    const bool he = l != last && FeedsActivation(spec, l);
    const float limit = he ? std::sqrt(6.0f / static_cast<float>(fans.in))
                           : std::sqrt(6.0f / static_cast<float>(fans.in + fans.out));
    internal::FillSymmetricUniform(layout.Slice(params, tensor), limit, seed, tensor);
    tensor += 2;
  }
  return Status::Ok();
}

}  // namespace edgesgd
