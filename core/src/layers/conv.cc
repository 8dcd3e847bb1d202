#include <algorithm>

#include "dense_products.h"
#include "edgesgd/core/eigen.h"
#include "layers/layer_type.h"
#include "layers/receptive_fields.h"
#include "layers/window.h"

// conv:FILTERS:KERNEL[:STRIDE[:same|valid]], square kernel: the receptive fields times the
// filters, in products of up to kProductPixels output positions.
namespace edgesgd::layers {
namespace {

Shape OutputShape(const LayerSpec& layer, Shape in) { return SweptShape(layer, in, layer.units); }

LayerTensors Tensors(const LayerSpec& layer, Shape in) {
  return {std::uint64_t{layer.kernel} * layer.kernel * in.channels * layer.units, layer.units};
}

Fans FansOf(const LayerSpec& layer, Shape in) {
  const std::size_t field = std::size_t{layer.kernel} * layer.kernel;
  return {field * in.channels, field * layer.units};
}

void Forward(const LayerPlan& at, std::span<const float> params, std::span<const float> in) {
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

void Backward(const LayerPlan& at, std::span<const float> params, std::span<const float> in,
              std::span<const float> out_gradient, std::span<float> gradient,
              std::span<float> in_gradient) {
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
    std::fill_n(at.shared_scratch.begin(), block.count * field_size, 0.0f);
    dense_products::AddRowCombinations(at.shared_scratch.data(), {slopes, filters, 1},
                                       params.data() + at.weights, block.count, filters,
                                       field_size);
    ScatterAddFields(at, block, at.shared_scratch.data(), in_gradient);
  });
}

}  // namespace

const LayerSchema kConvSchema = {
    .fields = {.units = true, .window = true, .padding = true},
    .output_shape = OutputShape,
    .tensors = Tensors,
};

const LayerKernels kConvKernels = {
    .fans = FansOf,
    .scratch = FieldScratch,
    .forward = Forward,
    .backward = Backward,
};

}  // namespace edgesgd::layers
