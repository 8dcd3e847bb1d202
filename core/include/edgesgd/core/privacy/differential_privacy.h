#pragma once

// DP-FedAvg's pieces (docs/algorithms.md#differential-privacy): each device clips the vector it
// compresses to an L2 norm C, and Gaussian noise of standard deviation z * C is added to the
// sum of the round's updates — by the server (central) or as n shares of z * C / sqrt(n), one
// per device of the expected cohort (distributed). The accountant that turns z, the sampling
// rate and the rounds into (epsilon, delta) is privacy/rdp_accountant.h.

#include <cstdint>
#include <limits>
#include <span>

#include "edgesgd/core/random.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

enum class PrivacyMode : std::uint8_t {
  kOff = 0,
  kCentral = 1,      // the server adds N(0, (zC)^2) to the sum: devices trust the server
  kDistributed = 2,  // each device adds its share N(0, (zC)^2 / n) to what it sends
};

struct PrivacyParams {
  PrivacyMode mode = PrivacyMode::kOff;
  float clip = 1.0f;              // C > 0: the L2 bound of one device's update
  float noise_multiplier = 1.0f;  // z >= 0: noise standard deviation over C
  float delta = 1e-5f;            // the accountant's delta, in (0, 1)

  friend constexpr bool operator==(const PrivacyParams&, const PrivacyParams&) = default;
};

// Checks the fields of an enabled mode (kOff reads none). Errors: kInvalidArgument.
constexpr Status ValidatePrivacyParams(const PrivacyParams& params) {
  constexpr float kMaxFloat = std::numeric_limits<float>::max();
  switch (params.mode) {
    case PrivacyMode::kOff:
      return Status::Ok();
    case PrivacyMode::kCentral:
    case PrivacyMode::kDistributed:
      break;
    default:
      return Status::InvalidArgument("unknown privacy mode");
  }
  if (!(params.clip > 0.0f && params.clip <= kMaxFloat)) {
    return Status::InvalidArgument("the clipping bound must be positive and finite");
  }
  if (!(params.noise_multiplier >= 0.0f && params.noise_multiplier <= kMaxFloat)) {
    return Status::InvalidArgument("the noise multiplier must be non-negative and finite");
  }
  if (!(params.delta > 0.0f && params.delta < 1.0f)) {
    return Status::InvalidArgument("delta must be in (0, 1)");
  }
  return Status::Ok();
}

// Scales `values` by min(1, bound / |values|_2) so its L2 norm is at most `bound` (> 0); returns
// the norm before clipping. Accumulates in double so the bound holds up to float rounding.
double ClipToNorm(std::span<float> values, float bound);

// A private source of standard normal draws (Box-Muller over a Philox stream keyed by a secret
// the caller holds: the run's shared seed would let every participant subtract the noise).
class GaussianNoise {
 public:
  // One stream per (key, round, holder).
  GaussianNoise(std::uint64_t key, std::uint32_t round, std::uint32_t holder)
      : rng_(key, round, 0, StreamId(RandomPurpose::kPrivacyNoise, holder)) {}

  // Adds N(0, stddev^2) to every element of `values`.
  void AddTo(std::span<float> values, double stddev);

 private:
  double NextUnitOpen();  // uniform in (0, 1]

  CounterRng rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// The standard deviation of the noise one round's sum gets: z * C.
constexpr double SumNoiseStddev(const PrivacyParams& params) {
  return static_cast<double>(params.noise_multiplier) * static_cast<double>(params.clip);
}

}  // namespace edgesgd
