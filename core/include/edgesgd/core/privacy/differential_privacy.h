#pragma once

// DP-FedAvg's pieces (docs/algorithms.md#differential-privacy): each device clips the vector it
// compresses to an L2 norm C, and Gaussian noise of standard deviation z * C is added to the
// sum of the round's updates — by the server (central) or as n shares of z * C / sqrt(n), one
// per device of the expected cohort (distributed). With adaptive clipping (Andrew et al. 2021)
// C follows a target quantile of the devices' update norms, learnt from a noised count of the
// updates that needed no clipping. The accountant that turns z, the sampling rate and the
// rounds into (epsilon, delta) is privacy/rdp_accountant.h.

#include <cstdint>
#include <limits>
#include <span>

#include "edgesgd/core/random.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

// Builds short of flash define EDGESGD_DIFFERENTIAL_PRIVACY=0 (the bare-metal builds do): their
// workers then clip nothing, advertise no privacy in their Join, and refuse private runs, and
// about 2.5 KB of a Cortex-M4 worker image stay out.
#if defined(EDGESGD_DIFFERENTIAL_PRIVACY) && !EDGESGD_DIFFERENTIAL_PRIVACY
inline constexpr bool kDifferentialPrivacy = false;
#else
inline constexpr bool kDifferentialPrivacy = true;
#endif

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
  // Adaptive clipping: the fraction gamma in (0, 1) of updates C should leave unclipped; 0 keeps
  // C fixed at `clip` (which is then only the starting bound).
  float target_quantile = 0.0f;
  float clip_learning_rate = 0.2f;  // eta_C > 0: C <- C * exp(-eta_C * (b - gamma))
  // sigma_b >= 0: standard deviation of the noise on the count of unclipped updates (0.5 is
  // one device's influence on it, as each counts b_i - 1/2); above z / 2 when z > 0.
  float count_noise = 0.0f;

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
  if (params.target_quantile == 0.0f) return Status::Ok();
  if (!(params.target_quantile > 0.0f && params.target_quantile < 1.0f)) {
    return Status::InvalidArgument("the target quantile of adaptive clipping must be in (0, 1)");
  }
  if (!(params.clip_learning_rate > 0.0f && params.clip_learning_rate <= kMaxFloat)) {
    return Status::InvalidArgument(
        "the clipping bound's learning rate must be positive and finite");
  }
  if (!(params.count_noise >= 0.0f && params.count_noise <= kMaxFloat)) {
    return Status::InvalidArgument("the count noise must be non-negative and finite");
  }
  if (params.noise_multiplier > 0.0f && !(2.0f * params.count_noise > params.noise_multiplier)) {
    return Status::InvalidArgument(
        "the count noise must exceed half the noise multiplier: the count of unclipped updates "
        "spends part of the privacy budget");
  }
  return Status::Ok();
}

// Whether a run of `params` is private in this build.
constexpr bool IsPrivate(const PrivacyParams& params) {
  return kDifferentialPrivacy && params.mode != PrivacyMode::kOff;
}

constexpr bool AdaptsClipping(const PrivacyParams& params) {
  return IsPrivate(params) && params.target_quantile > 0.0f;
}

// `params` with the fields its mode does not read at their defaults (all of them when off,
// adaptive clipping's when the bound is fixed): two runs that differ only there are one run.
constexpr PrivacyParams NormalizedPrivacyParams(const PrivacyParams& params) {
  if (params.mode == PrivacyMode::kOff) return PrivacyParams{};
  PrivacyParams normalized = params;
  if (!AdaptsClipping(params)) {
    const PrivacyParams defaults;
    normalized.target_quantile = defaults.target_quantile;
    normalized.clip_learning_rate = defaults.clip_learning_rate;
    normalized.count_noise = defaults.count_noise;
  }
  return normalized;
}

// The noise multiplier of the updates' sum: z, or with adaptive clipping the part of z that the
// count's noise leaves, (z^-2 - (2 sigma_b)^-2)^(-1/2), so that the two releases of a round
// together are a Gaussian mechanism of multiplier z (Andrew et al. 2021, Theorem 1).
double UpdateNoiseMultiplier(const PrivacyParams& params);

// Adaptive clipping's step: bound * exp(-eta_C * (unclipped_fraction - gamma)), the fraction
// being the noised count of unclipped updates over the expected cohort.
float NextClipBound(float bound, double unclipped_fraction, const PrivacyParams& params);

// Scales `values` by min(1, bound / |values|_2) so its L2 norm is at most `bound` (> 0); returns
// the norm before clipping. Float arithmetic with a compensated sum of squares, so the bound
// holds up to float rounding without pulling double-precision routines into a microcontroller
// image.
float ClipToNorm(std::span<float> values, float bound);

// Where a draw of noise comes from: a Philox4x64 stream keyed by a 128-bit secret the caller
// holds (the run's shared seed would let every participant subtract the noise), one per round,
// holder (0 the server, a worker's id) and part (what the noise is for: kNoiseOnValues,
// kNoiseOnCount).
struct NoiseStream {
  SecretKey key;
  std::uint32_t round = 0;
  std::uint32_t holder = 0;
  std::uint32_t part = 0;
};
inline constexpr std::uint32_t kNoiseOnValues = 0;
inline constexpr std::uint32_t kNoiseOnCount = 1;

// A source of standard normal draws (Box-Muller over the stream's Philox4x64 words).
class GaussianNoise {
 public:
  explicit GaussianNoise(const NoiseStream& stream)
      : rng_(stream.key, stream.round, stream.part,
             StreamId(RandomPurpose::kPrivacyNoise, stream.holder)) {}

  // Adds N(0, stddev^2) to every element of `values`.
  void AddTo(std::span<float> values, double stddev);

 private:
  double NextUnitOpen();  // uniform in (0, 1]

  SecretRng rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Distributed noise: one device's share of a round's noise, added to `values` — of the noise on
// the updates' sum (stream.part kNoiseOnValues: z' * bound) or on adaptive clipping's count
// (kNoiseOnCount: sigma_b) — with standard deviation over sqrt(cohort), so that the `cohort`
// devices of a round add up to it. A function a device is handed (WorkerOptions::add_noise):
// the noise code and the double-precision logarithm and cosine it needs are linked only into
// images that take its address.
void AddNoiseShare(const PrivacyParams& params, float bound, std::uint32_t cohort,
                   const NoiseStream& stream, std::span<float> values);
using NoiseShareFunction = void (*)(const PrivacyParams& params, float bound,
                                    std::uint32_t cohort, const NoiseStream& stream,
                                    std::span<float> values);

// The standard deviation of the noise a round's sum of updates clipped to `bound` gets.
inline double SumNoiseStddev(const PrivacyParams& params, float bound) {
  return UpdateNoiseMultiplier(params) * static_cast<double>(bound);
}

}  // namespace edgesgd
