#include <cmath>

#include "edgesgd/core/check.h"
#include "edgesgd/core/data/random_variates.h"

namespace edgesgd {
namespace {

constexpr float kTwoPi = 6.28318530717958647692f;

// ln of a Gamma(shape >= 1) variate (Marsaglia-Tsang).
float LogGammaAtLeastOne(float shape, NormalRng& normal) {
  const float d = shape - 1.0f / 3.0f;
  const float c = 1.0f / std::sqrt(9.0f * d);
  for (;;) {
    float x = 0.0f;
    float v = 0.0f;
    do {
      x = normal.Next();
      v = 1.0f + c * x;
    } while (v <= 0.0f);
    v = v * v * v;
    const float u = normal.NextOpenUniform();
    const float x2 = x * x;
    if (u < 1.0f - 0.0331f * (x2 * x2)) return std::log(d) + std::log(v);
    const float log_v = std::log(v);
    if (std::log(u) < 0.5f * x2 + d * (1.0f - v + log_v)) return std::log(d) + log_v;
  }
}

}  // namespace

float NormalRng::Next() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const float u1 = OpenUniformFloat(rng_.NextU32());
  const float u2 = rng_.NextFloat();
  const float radius = std::sqrt(-2.0f * std::log(u1));
  const float angle = kTwoPi * u2;
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

float SampleLogGamma(float shape, NormalRng& normal) {
  EDGESGD_CHECK(shape > 0.0f && std::isfinite(shape));
  if (shape >= 1.0f) return LogGammaAtLeastOne(shape, normal);
  const float boosted = LogGammaAtLeastOne(shape + 1.0f, normal);
  return boosted + std::log(normal.NextOpenUniform()) / shape;
}

}  // namespace edgesgd
