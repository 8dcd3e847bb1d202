#pragma once

// The sampled Gaussian mechanism's RDP by numerical integration: an account independent of the
// accountant's series, for the tests that check it.

#include <algorithm>
#include <cmath>
#include <numbers>

namespace edgesgd::testing {

// A_alpha = integral of mu0 (mu / mu0)^alpha, by the trapezoidal rule on `points` intervals
// (TensorFlow Privacy checks its series the same way, with multi-precision quadrature).
// Integrates A_alpha - 1 so that small RDP keeps its digits. Past order ~ 2 z^2 log(1e300) the
// integrand overflows: keep orders moderate for small z.
inline double RdpByQuadrature(double q, double z, double order, int points = 400000) {
  // The integrand peaks between 0 and the order, with width z.
  const double half_width = 40 * std::max(z, 1.0) + order;
  const double h = 2 * half_width / points;
  double a_minus_1 = 0;
  for (int k = 0; k <= points; ++k) {
    const double x = -half_width + k * h;
    const double mu0 = std::exp(-x * x / (2 * z * z)) / (z * std::sqrt(2 * std::numbers::pi));
    const double log_ratio = std::log1p(q * std::expm1((2 * x - 1) / (2 * z * z)));
    a_minus_1 += (k == 0 || k == points ? 0.5 : 1.0) * mu0 * std::expm1(order * log_ratio);
  }
  return std::log1p(a_minus_1 * h) / (order - 1);
}

}  // namespace edgesgd::testing
