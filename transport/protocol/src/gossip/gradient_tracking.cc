// Gradient tracking (gradient_tracking.h): its rule, and the update DeTAG shares.

#include "gradient_tracking.h"

namespace edgesgd::protocol::internal {

void BeginTrackingRound(const GossipState& state, bool gradient_ok) {
  if (!gradient_ok) ReuseGradient(state);
  if (state.round == 0) StartTracker(state);
}

void AfterTrackingMix(const GossipState& state, std::size_t vector) {
  if (!state.last_step) return;
  if (vector == kModelVector) {
    // y_k as of the round's start: for R = 1 the tracker's working vector, not yet mixed.
    const float lr = state.config.learning_rate;
    for (std::size_t i = 0; i < state.model.size(); ++i) {
      state.model[i] -= lr * state.tracker_start[i];
    }
    return;
  }
  for (std::size_t i = 0; i < state.tracker.size(); ++i) {
    state.tracker[i] += state.gradient[i] - state.previous_gradient[i];
  }
  KeepGradient(state);
}

namespace {

class GradientTracking final : public GossipRule {
 public:
  constexpr GradientTracking() : GossipRule("gt", 2, false) {}

  Status Validate(const GossipConfig& config) const override {
    EDGESGD_TRY(CheckDenseExchange(config));
    EDGESGD_TRY(CheckPublicCopies(config));
    return CheckOnePlainStep(config);
  }

  void BeginRound(const GossipState& state, bool gradient_ok) const override {
    BeginTrackingRound(state, gradient_ok);
  }

  void AfterMix(const GossipState& state, std::size_t vector) const override {
    AfterTrackingMix(state, vector);
  }
};

constinit const GradientTracking kGradientTracking;

}  // namespace

const GossipRule& GradientTrackingRule() { return kGradientTracking; }

}  // namespace edgesgd::protocol::internal
