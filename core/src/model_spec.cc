#include "edgesgd/core/model/model_spec.h"

#include <array>
#include <cstdint>
#include <limits>

#include "edgesgd/core/model/sequential.h"

namespace edgesgd {
namespace {

constexpr std::uint64_t kMaxParameters = std::numeric_limits<std::uint32_t>::max();

// Tensor sizes of the spec in layout order; returns how many were written (0 if invalid).
std::size_t TensorSizes(const ModelSpec& spec, std::array<std::uint64_t, 4>& sizes) {
  const std::uint64_t d = spec.features;
  const std::uint64_t c = spec.classes;
  const std::uint64_t h = spec.hidden;
  if (d == 0 || d > kMaxParameters) return 0;
  std::size_t count = 0;
  switch (spec.kind) {
    case ModelKind::kLinearRegression:
    case ModelKind::kLogisticRegression:
      sizes[count++] = d;
      if (spec.bias) sizes[count++] = 1;
      break;
    case ModelKind::kSoftmaxRegression:
      if (c < 2 || c > 256) return 0;
      sizes[count++] = c * d;
      if (spec.bias) sizes[count++] = c;
      break;
    case ModelKind::kMlp:
      if (c < 2 || c > 256 || h == 0 || h > kMaxParameters) return 0;
      sizes[count++] = h * d;  // both factors < 2^32: no overflow in 64 bits
      if (spec.bias) sizes[count++] = h;
      sizes[count++] = c * h;
      if (spec.bias) sizes[count++] = c;
      break;
    default:
      return 0;
  }
  std::uint64_t total = 0;
  for (std::size_t t = 0; t < count; ++t) {
    if (sizes[t] > kMaxParameters - total) return 0;
    total += sizes[t];
  }
  return count;
}

}  // namespace

Status ValidateModelSpec(const ModelSpec& spec) {
  if (spec.kind == ModelKind::kSequential) {
    EDGESGD_TRY(ValidateSequentialSpec(spec.network));
    return spec.features == spec.network.features() && spec.classes == spec.network.classes
               ? Status::Ok()
               : Status::InvalidArgument(
                     "the model's features or classes differ from its network's input or classes");
  }
  std::array<std::uint64_t, 4> sizes{};
  return TensorSizes(spec, sizes) == 0
             ? Status::InvalidArgument(
                   "the model's kind, features, classes or hidden width is out of range")
             : Status::Ok();
}

std::size_t ParameterCount(const ModelSpec& spec) {
  if (spec.kind == ModelKind::kSequential) {
    return ValidateModelSpec(spec).ok() ? ParameterCount(spec.network) : 0;
  }
  std::array<std::uint64_t, 4> sizes{};
  const std::size_t count = TensorSizes(spec, sizes);
  std::uint64_t total = 0;
  for (std::size_t t = 0; t < count; ++t) total += sizes[t];
  return static_cast<std::size_t>(total);
}

Result<TensorLayout> ModelLayout(const ModelSpec& spec) {
  if (spec.kind == ModelKind::kSequential) {
    EDGESGD_TRY(ValidateModelSpec(spec));
    return SequentialLayout(spec.network);
  }
  std::array<std::uint64_t, 4> sizes{};
  const std::size_t count = TensorSizes(spec, sizes);
  if (count == 0) {
    return Status::InvalidArgument(
        "the model's kind, features, classes or hidden width is out of range");
  }
  return TensorLayout::FromSizes(std::span<const std::uint64_t>(sizes.data(), count));
}

namespace internal {

Status CheckModelCall(const ModelSpec& spec, ModelKind kind, std::span<const float> params,
                      const DatasetView& data, std::span<const float> gradient, bool check_gradient,
                      std::span<const float> scratch, std::size_t scratch_floats) {
  if (spec.kind != kind) return Status::InvalidArgument("the spec is of another model kind");
  // The models that call this have a fixed set of tensors: their checks need no sequential
  // network's, which an image training one of them then does not link.
  std::array<std::uint64_t, 4> sizes{};
  const std::size_t tensors = kind == ModelKind::kSequential ? 0 : TensorSizes(spec, sizes);
  if (tensors == 0) {
    return Status::InvalidArgument(
        "the model's kind, features, classes or hidden width is out of range");
  }
  std::size_t count = 0;
  for (std::size_t t = 0; t < tensors; ++t) count += static_cast<std::size_t>(sizes[t]);
  if (params.size() != count) {
    return Status::InvalidArgument("the parameters' size differs from the model's parameter count");
  }
  if (check_gradient && gradient.size() != count) {
    return Status::InvalidArgument("the gradient's size differs from the model's parameter count");
  }
  if (scratch.size() < scratch_floats) {
    return Status::InvalidArgument("the scratch is smaller than the model's ScratchFloats");
  }
  if (data.has_byte_features()) {
    return Status::InvalidArgument("a model reads float features: gather byte rows first");
  }
  if (data.feature_dim != spec.features || data.num_samples == 0) {
    return Status::InvalidArgument(
        "the data's feature_dim differs from the model's features, or it has no samples");
  }
  // Shapes only here; label ranges are checked against the model, not data.num_classes.
  DatasetView shape = data;
  shape.num_classes = 0;
  EDGESGD_TRY(ValidateDataset(shape));
  if (kind == ModelKind::kLinearRegression) {
    if (!data.has_targets()) {
      return Status::InvalidArgument("linear regression needs data with targets");
    }
    return Status::Ok();
  }
  if (!data.has_labels()) return Status::InvalidArgument("a classifier needs data with labels");
  const std::size_t label_bound = kind == ModelKind::kLogisticRegression ? 2 : spec.classes;
  for (const std::uint8_t label : data.labels) {
    if (label >= label_bound) {
      return Status::OutOfRange("a label is not below the model's class count");
    }
  }
  return Status::Ok();
}

}  // namespace internal

}  // namespace edgesgd
