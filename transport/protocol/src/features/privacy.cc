// Differential privacy (docs/privacy.md): every worker clips its update, and the server or the
// workers add Gaussian noise.
#include <iterator>
#include <string_view>

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

// The modes by name, in PrivacyMode's order (the words of --dp-mode).
constexpr std::string_view kModeNames[] = {"off", "central", "distributed"};
static_assert(static_cast<std::size_t>(PrivacyMode::kDistributed) + 1 == std::size(kModeNames));

const char* UnlessPrivate(const RunConfig& config) {
  return config.privacy.mode != PrivacyMode::kOff
             ? nullptr
             : "the --dp-* flags need --dp-mode central or distributed";
}

const char* UnlessAdaptive(const RunConfig& config) {
  if (const char* reason = UnlessPrivate(config)) return reason;
  return config.privacy.target_quantile != 0.0f
             ? nullptr
             : "--dp-clip-lr and --dp-count-noise tune adaptive clipping: they need "
               "--dp-target-quantile";
}

template <auto Member>
constexpr FeatureField PrivacyField(std::string_view name, std::string_view help,
                                    const char* (*unused_because)(const RunConfig&)) {
  return GroupField<&RunConfig::privacy, Member>(name, help, unused_because);
}

constexpr FeatureField kFields[] = {
    GroupField<&RunConfig::privacy, &PrivacyParams::mode>(
        "dp_mode",
        "Differential privacy (DP-FedAvg): off; central (the server adds Gaussian noise to each "
        "round's sum: devices trust the server); or distributed (each sampled device adds its "
        "share of the noise to what it sends). Workers clip their updates to --dp-clip either "
        "way",
        nullptr, kModeNames),
    PrivacyField<&PrivacyParams::clip>(
        "dp_clip", "L2 norm C every worker clips the update it compresses to", UnlessPrivate),
    PrivacyField<&PrivacyParams::noise_multiplier>(
        "dp_noise_multiplier",
        "z: the noise on a round's sum has standard deviation z * C (edgesgd privacy-budget "
        "finds the z of a target epsilon)",
        UnlessPrivate),
    PrivacyField<&PrivacyParams::delta>(
        "dp_delta",
        "delta of the (epsilon, delta) guarantee the metrics report; keep it below 1 / (number "
        "of devices)",
        UnlessPrivate),
    PrivacyField<&PrivacyParams::target_quantile>(
        "dp_target_quantile",
        "Adaptive clipping (Andrew et al. 2021): the fraction of updates in (0, 1) the bound "
        "should leave unclipped, learnt from a noised count each round starting at --dp-clip; 0 "
        "keeps --dp-clip fixed",
        UnlessPrivate),
    PrivacyField<&PrivacyParams::clip_learning_rate>(
        "dp_clip_lr", "Adaptive clipping's step: C <- C * exp(-lr * (unclipped fraction - target))",
        UnlessAdaptive),
    PrivacyField<&PrivacyParams::count_noise>(
        "dp_count_noise",
        "Adaptive clipping: standard deviation of the noise on the count of unclipped updates "
        "(0 = the sampled devices / 20); must exceed half of --dp-noise-multiplier, whose budget "
        "it shares",
        UnlessAdaptive),
};

}  // namespace

constinit const RunFeature kPrivacyFeature{"--dp-mode", Enabled, Validate, kExcludes};
constinit const FeatureFields kPrivacyFields{&kPrivacyFeature, kFields};

}  // namespace edgesgd::protocol
