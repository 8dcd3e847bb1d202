#pragma once

#include <cstddef>

#include "edgesgd/core/model/fixed_model.h"

namespace edgesgd {

// Multinomial logistic (softmax) regression (ModelKind::kSoftmaxRegression); its evaluation
// counts argmax z == label as correct.
struct SoftmaxRegression : FixedModelCalls<SoftmaxRegression, ModelKind::kSoftmaxRegression> {
  // One logit per class.
  static constexpr std::size_t ScratchFloats(const ModelSpec& spec) { return spec.classes; }
  static FixedModelAccumulate Accumulate;
};

}  // namespace edgesgd
