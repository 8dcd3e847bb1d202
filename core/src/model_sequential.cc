#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "edgesgd/core/model/loss_functions.h"
#include "edgesgd/core/model/sequential.h"
#include "layers/layer_type.h"
#include "layers/window.h"

namespace edgesgd {
namespace {

using layers::LayerKernels;
using layers::LayerPlan;
using layers::LayerScratch;

struct Plan {
  std::array<LayerPlan, kMaxSequentialLayers> layers{};
  std::size_t count = 0;
  std::size_t first_parametric = 0;  // backpropagation stops at its input
  std::span<float> gradients[2];     // d loss / d output of hidden layers, alternating
};

bool IsParametric(LayerKind kind) { return layers::FindLayerSchema(kind)->parametric(); }

LayerScratch ScratchOf(const LayerSpec& layer, Shape in, Shape out) {
  const LayerKernels& kernels = layers::KernelsOf(layer.kind);
  return kernels.scratch == nullptr ? LayerScratch{} : kernels.scratch(layer, in, out);
}

// Scratch floats by purpose, as ScratchFloats documents. In 64 bits: sixteen outputs of up to
// 2^32 - 1 values each overflow a 32-bit size_t.
struct ScratchSizes {
  std::uint64_t outputs = 0;
  std::uint64_t gradient = 0;  // each of the two gradient buffers
  std::uint64_t own = 0;       // every layer's own scratch (a conv layer's tile of fields)
  std::uint64_t shared = 0;    // the largest shared part (a conv product's fields' gradient)

  std::uint64_t total() const { return outputs + 2 * gradient + own + shared; }
};

ScratchSizes SizesOf(const SequentialSpec& spec, const SequentialShapes& shapes) {
  ScratchSizes sizes;
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    const std::uint64_t out = shapes.at[l + 1].size();
    sizes.outputs += out;
    if (l + 1 < spec.layer_count) sizes.gradient = std::max(sizes.gradient, out);
    const LayerScratch scratch = ScratchOf(spec.layers[l], shapes.at[l], shapes.at[l + 1]);
    sizes.own += scratch.own;
    sizes.shared = std::max(sizes.shared, scratch.shared);
  }
  return sizes;
}

// Lays the call out over a valid spec's layout and scratch (ScratchFloats(spec) floats).
void MakePlan(const SequentialSpec& spec, const TensorLayout& layout, std::span<float> scratch,
              Plan& plan) {
  // References into Results rather than copies: these are a few hundred bytes of stack each.
  const Result<SequentialShapes> shapes_result = InferSequentialShapes(spec);
  const SequentialShapes& shapes = *shapes_result;
  const ScratchSizes sizes = SizesOf(spec, shapes);
  // Every layer's output and own scratch in layer order, then the two gradient buffers and the
  // shared scratch. ScratchFloats(spec) fits in size_t (PrepareCall checked), and so does every
  // part of it.
  const auto gradient = static_cast<std::size_t>(sizes.gradient);
  const std::span<float> gradients =
      scratch.subspan(static_cast<std::size_t>(sizes.outputs + sizes.own));
  plan.gradients[0] = gradients.first(gradient);
  plan.gradients[1] = gradients.subspan(gradient, gradient);
  const std::span<float> shared = gradients.subspan(2 * gradient);
  plan.count = spec.layer_count;
  std::size_t used = 0;
  std::size_t tensor = 0;
  bool seen_parametric = false;
  for (std::size_t l = 0; l < plan.count; ++l) {
    LayerPlan& at = plan.layers[l];
    at.layer = spec.layers[l];
    at.kernels = &layers::KernelsOf(at.layer.kind);
    at.in = shapes.at[l];
    at.out = shapes.at[l + 1];
    if (IsParametric(at.layer.kind)) {
      if (!seen_parametric) plan.first_parametric = l;
      seen_parametric = true;
      at.weights = layout.offset(tensor);
      at.bias = layout.offset(tensor + 1);
      tensor += 2;
    }
    at.pad_top = layers::SamePadding(at.in.height, at.out.height, at.layer);
    at.pad_left = layers::SamePadding(at.in.width, at.out.width, at.layer);
    const auto out_size = static_cast<std::size_t>(at.out.size());
    at.output = scratch.subspan(used, out_size);
    used += out_size;
    const auto own = static_cast<std::size_t>(ScratchOf(at.layer, at.in, at.out).own);
    at.scratch = scratch.subspan(used, own);
    used += own;
    at.shared_scratch = shared;
  }
}

void Forward(const Plan& plan, std::span<const float> params, std::span<const float> sample) {
  std::span<const float> in = sample;
  for (std::size_t l = 0; l < plan.count; ++l) {
    const LayerPlan& at = plan.layers[l];
    at.kernels->forward(at, params, in);
    in = at.output;
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
    at.kernels->backward(at, params, in, out_gradient, gradient, in_gradient);
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

// Whether the values a layer outputs next pass through relu or relu6 (pooling and flatten
// commute with them, so they are looked past).
bool FeedsActivation(const SequentialSpec& spec, std::size_t layer) {
  for (std::size_t l = layer + 1; l < spec.layer_count; ++l) {
    const LayerKind kind = spec.layers[l].kind;
    if (layers::KernelsOf(kind).activation) return true;
    if (IsParametric(kind)) return false;
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
    if (IsParametric(spec.layers[l].kind)) last = l;
  }
  std::uint32_t tensor = 0;
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    const LayerSpec& layer = spec.layers[l];
    if (!IsParametric(layer.kind)) continue;
    const layers::Fans fans = layers::KernelsOf(layer.kind).fans(layer, shapes.at[l]);
    const bool he = l != last && FeedsActivation(spec, l);
    const float limit = he ? std::sqrt(6.0f / static_cast<float>(fans.in))
                           : std::sqrt(6.0f / static_cast<float>(fans.in + fans.out));
    internal::FillSymmetricUniform(layout.Slice(params, tensor), limit, seed, tensor);
    tensor += 2;
  }
  return Status::Ok();
}

}  // namespace edgesgd
