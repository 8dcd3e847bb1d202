#pragma once

#include <cstddef>

#include "edgesgd/core/model/fixed_model.h"

namespace edgesgd {

// One-hidden-layer perceptron with ReLU and a softmax output (ModelKind::kMlp); its evaluation
// counts argmax z == label as correct.
struct Mlp : FixedModelCalls<Mlp, ModelKind::kMlp> {
  // Hidden activations, their gradient, the logits.
  static constexpr std::size_t ScratchFloats(const ModelSpec& spec) {
    return 2 * spec.hidden + spec.classes;
  }
  static FixedModelAccumulate Accumulate;
};

}  // namespace edgesgd
