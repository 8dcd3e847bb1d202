// What the gossip rules share: the default delta input, parameter checks and update pieces.

#include "gossip_rule.h"

#include <algorithm>

namespace edgesgd::protocol::internal {

void GossipRule::DeltaInput(const GossipState& /*state*/, std::span<const float> z,
                            std::span<const float> own_copy, std::span<float> input) const {
  for (std::size_t i = 0; i < z.size(); ++i) input[i] = z[i] - own_copy[i];
}

Status CheckDenseExchange(const GossipConfig& config) {
  if (config.codec != ModelCodec()) {
    return Status::InvalidArgument(
        "D-PSGD, gradient tracking and DeTAG exchange dense models: the codec must be "
        "identity (CHOCO and BEER compress)");
  }
  if (config.consensus_step != 1.0f) {
    return Status::InvalidArgument(
        "the consensus step gamma is CHOCO's and BEER's: it must be 1 here");
  }
  return Status::Ok();
}

Status CheckCompressedExchange(const GossipConfig& config) {
  EDGESGD_TRY(ValidateCodecParams(config.codec));
  EDGESGD_TRY(CheckChocoCodec(config.codec));
  if (!(config.consensus_step > 0.0f && config.consensus_step <= 1.0f)) {
    return Status::InvalidArgument("the consensus step gamma must be in (0, 1]");
  }
  return Status::Ok();
}

Status CheckPublicCopies(const GossipConfig& config) {
  if (!config.public_copies) {
    return Status::InvalidArgument("only CHOCO can run without public copies (its naive baseline)");
  }
  return Status::Ok();
}

Status CheckOnePlainStep(const GossipConfig& config) {
  if (config.gossip_steps != 1 || config.accel != 0.0f) {
    return Status::InvalidArgument(
        "D-PSGD, gradient tracking, CHOCO and BEER take one plain gossip step per round (R = 1, "
        "eta_g = 0)");
  }
  return Status::Ok();
}

void DropGradient(const GossipState& state) {
  std::fill(state.gradient.begin(), state.gradient.end(), 0.0f);
}

void ReuseGradient(const GossipState& state) {
  if (state.round == 0) {
    DropGradient(state);
    return;
  }
  std::copy(state.previous_gradient.begin(), state.previous_gradient.end(), state.gradient.begin());
}

void StartTracker(const GossipState& state) {
  std::copy(state.gradient.begin(), state.gradient.end(), state.tracker.begin());
  KeepGradient(state);
}

void KeepGradient(const GossipState& state) {
  std::copy(state.gradient.begin(), state.gradient.end(), state.previous_gradient.begin());
}

}  // namespace edgesgd::protocol::internal
