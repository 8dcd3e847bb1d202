#pragma once

#include <cstddef>

#include "edgesgd/core/model/fixed_model.h"

namespace edgesgd {

// Linear regression (ModelKind::kLinearRegression): mean squared error without the 1/2, as in
// the RegTop-k authors' code (torch mse_loss). Its evaluation adds the squared residuals (no
// accuracy: there are no classes).
struct LinearRegression : FixedModelCalls<LinearRegression, ModelKind::kLinearRegression> {
  // Needs no scratch.
  static constexpr std::size_t ScratchFloats(const ModelSpec& /*spec*/) { return 0; }
  static FixedModelAccumulate Accumulate;
};

}  // namespace edgesgd
