// FedProx's proximal term (docs/algorithms.md): local steps pulled towards the round's model.
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return config.feedback.prox_mu != 0.0f; }

// The value itself (finite, non-negative) is checked with the other feedback parameters.
Status Validate(const RunConfig& config) {
  if (config.feedback.local_steps < 2) {
    return Status::InvalidArgument(
        "--prox-mu needs --local-steps 2 or more: with one step the local model never leaves "
        "the round's model, so the proximal term is zero");
  }
  return Status::Ok();
}

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "--prox-mu shapes local steps: majority vote takes one gradient per round, with no "
     "proximal term (use --aggregate mean)"},
};

constexpr FeatureField kFields[] = {
    GroupField<&RunConfig::feedback, &FeedbackParams::prox_mu>(
        "prox_mu",
        "FedProx's mu: the local steps of a round minimise the loss plus (mu / 2) ||y - x||^2, "
        "keeping the local model y near the round's model x on heterogeneous data (needs "
        "--local-steps > 1; 0 = plain local SGD)"),
};

}  // namespace

constinit const RunFeature kProximalFeature{"--prox-mu", Enabled, Validate, kExcludes};
constinit const FeatureFields kProximalFields{&kProximalFeature, kFields};

}  // namespace edgesgd::protocol
