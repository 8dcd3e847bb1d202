#pragma once

// Softmax regression as compile-time constants, for device images that size every buffer at
// compile time: its ModelSpec and its layout (weights, then biases), which equals
// ModelLayout(spec) (not constexpr; an image checks the two agree, or refuses other layouts).

#include <cstddef>
#include <cstdint>

#include "edgesgd/core/model/model_spec.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd::mcu {

constexpr ModelSpec SoftmaxRegressionSpec(std::size_t features, std::size_t classes) {
  return ModelSpec{.kind = ModelKind::kSoftmaxRegression,
                   .features = features,
                   .classes = classes,
                   .hidden = 0,
                   .bias = true};
}

constexpr TensorLayout SoftmaxRegressionLayout(const ModelSpec& spec) {
  const std::uint64_t sizes[] = {spec.features * spec.classes, spec.classes};
  return TensorLayout::FromSizes(sizes).value();
}

}  // namespace edgesgd::mcu
