#pragma once

#include <cstddef>

#include "edgesgd/core/model/fixed_model.h"

namespace edgesgd {

// Binary logistic regression (ModelKind::kLogisticRegression), labels in {0, 1}; its evaluation
// counts z > 0 as class 1.
struct LogisticRegression : FixedModelCalls<LogisticRegression, ModelKind::kLogisticRegression> {
  static FixedModelAccumulate Accumulate;
  // Needs no scratch.
  static constexpr std::size_t ScratchFloats(const ModelSpec& /*spec*/) { return 0; }
};

}  // namespace edgesgd
