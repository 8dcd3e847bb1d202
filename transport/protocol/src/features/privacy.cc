// Differential privacy (docs/privacy.md): every worker clips its update, and the server or the
// workers add Gaussian noise.
#include "edgesgd/core/privacy/differential_privacy.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return config.privacy.mode != PrivacyMode::kOff; }

Status Validate(const RunConfig& config) {
  const PrivacyParams& privacy = config.privacy;
  if (!kDifferentialPrivacy) {
    return Status::InvalidArgument("this build leaves differential privacy out");
  }
  EDGESGD_TRY(ValidatePrivacyParams(privacy));
  if (!KeepsNormBound(config.codec)) {
    return Status::InvalidArgument(
        "differential privacy needs a codec that never lengthens the clipped update; this one "
        "rounds stochastically or rescales (see docs/privacy.md for the codecs that qualify)");
  }
  if (privacy.mode == PrivacyMode::kCentral && !KnownAggregations::AddsCentralNoise(config)) {
    return Status::InvalidArgument(
        "central noise needs the model downlink, or the aggregate downlink with a codec whose "
        "payloads sum: a re-compressed aggregate would keep unnoised sums in the server's "
        "residual");
  }
  if (privacy.mode == PrivacyMode::kDistributed && !TraitsOf(config.codec).payload_sum) {
    return Status::InvalidArgument(
        "distributed noise needs every device to send the same coordinates (identity, rand_k "
        "or random_block), so that the shares of noise add up on each of them");
  }
  return Status::Ok();
}

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "differential privacy (--dp-mode) bounds and noises a mean "
     "of updates: majority vote is not "
     "one (use --aggregate mean)"},
    {&kScaffoldFeature,
     "--scaffold and --dp-mode: differential privacy bounds the model update alone, and "
     "SCAFFOLD's control change would leave it unclipped"},
};

}  // namespace

constinit const RunFeature kPrivacyFeature{"--dp-mode", Enabled, Validate, kExcludes};

}  // namespace edgesgd::protocol
