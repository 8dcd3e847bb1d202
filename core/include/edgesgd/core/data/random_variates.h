#pragma once

#include <cstdint>

#include "edgesgd/core/random.h"

namespace edgesgd {

// Continuous random variates for data generation and partitioning (never for anything workers
// exchange: those use integer draws only). Built on CounterRng, so a stream is fixed by its
// (seed, round, tensor, stream) counter. The uniform bits are identical everywhere; the
// transforms use logf/sqrtf/cosf/sinf, and sqrtf is exact while glibc's logf/cosf/sinf are
// correctly rounded in practice but not guaranteed so by every libm (newlib, musl may differ in
// the last ulp). With -ffp-contract=off the remaining arithmetic is identical on x86-64 and
// ARM, so a stream is bit-identical across architectures sharing a libm and within an ulp-level
// tolerance otherwise. A rejection sampler (Gamma) can amplify a last-ulp difference into a
// different accepted draw; callers that need agreement across libms keep one stream per item.

// Uniform float in the open interval (0, 1): odd multiples of 2^-24, exact (no rounding), so
// log() of it is always finite.
constexpr float OpenUniformFloat(std::uint32_t bits) {
  return static_cast<float>(((bits >> 9) << 1) | 1u) * 0x1.0p-24f;
}

// Standard normal variates by the Box-Muller transform: two uniforms u1 in (0,1), u2 in [0,1)
// give r = sqrt(-2 ln u1) and the pair (r cos 2*pi*u2, r sin 2*pi*u2), returned one at a time.
// Chosen over Ziggurat for having no tables (flash on a MCU) and no data-dependent loop. Since
// u1 >= 2^-24 the magnitude is capped at sqrt(2 * 24 ln 2) ~= 5.77 sigma (mass beyond it is
// ~8e-9): irrelevant for synthetic data. Holds 40 bytes; does not allocate.
class NormalRng {
 public:
  explicit constexpr NormalRng(const CounterRng& rng) : rng_(rng) {}

  // Next N(0, 1) variate.
  float Next();

  // Next uniform in [0, 1) and in (0, 1) from the same stream (shared so that one stream
  // serves samplers that mix uniforms and normals, like Gamma's).
  float NextUniform() { return rng_.NextFloat(); }
  float NextOpenUniform() { return OpenUniformFloat(rng_.NextU32()); }
  CounterRng& rng() { return rng_; }

 private:
  CounterRng rng_;
  float spare_ = 0.0f;
  bool has_spare_ = false;
};

// Natural log of a Gamma(shape, 1) variate, shape > 0 (a programmer error otherwise), by
// Marsaglia and Tsang (2000): for shape >= 1, d = shape - 1/3, c = 1/sqrt(9d); draw x ~ N(0,1),
// v = (1 + c x)^3, accept d*v when v > 0 and ln u < x^2/2 + d - d v + d ln v (with the cheap
// squeeze u < 1 - 0.0331 x^4 first). For shape < 1 it uses Gamma(shape) = Gamma(shape + 1) *
// U^(1/shape), kept in the log domain: with shape = 0.01 the variate itself underflows float
// (U^100), but its log (ln U / shape, ~ -100s) does not, and Dirichlet weights are normalised
// from logs. Does not allocate.
float SampleLogGamma(float shape, NormalRng& normal);

}  // namespace edgesgd
