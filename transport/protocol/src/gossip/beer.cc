// BEER (Zhao, Li, Li, Richtárik and Chi 2022, docs/algorithms.md §6): gradient tracking with
// both the model and the tracker compressed against public copies, CHOCO-style (choco.cc), so
// tracking's immunity to data heterogeneity survives compression. Every peer keeps copies x̂_j
// and ŷ_j of itself and each neighbour, zero at the start. Each round k (R = 1, eta_g = 0):
//
//   v_k       = g_0 (k = 0);  v_k = v_{k-1} + gamma * sum_j W_ij (ŷ_j - ŷ_i) + g_k - g_{k-1}
//                                     (the tracker copies as of the end of round k-1)
//   q_i       = C(x_k - x̂_i)         GossipVector::kModelDelta      } both with config.codec,
//   r_i       = C(v_k - ŷ_i)         GossipVector::kTrackerDelta    } keyed like CHOCO's
//   x̂_j += decode(q_j), ŷ_j += decode(r_j)   for j = i and each neighbour, in round order
//   x_{k+1}   = x_k + gamma * sum_{j heard} W_ij (x̂_j - x̂_i) - lr * v_k
//
// The tracker's consensus sum is collected during round k and added at the round's close
// (tracker() is then v_k plus that sum until round k+1 adds g_{k+1} - g_k). The copies start at
// zero, so round 0 sends the compressed x_0 and v_0 (the paper's H_0 = C(X_0), G_0 = C(V_0)).
// The mean of the v_i is the mean of the g_{k,i} at every round, with any codec, because the
// copies agree bit for bit. A failed gradient call keeps g_k = g_{k-1}. Public copies are
// required.

#include "gossip_rule.h"

namespace edgesgd::protocol::internal {
namespace {

class Beer final : public GossipRule {
 public:
  constexpr Beer() : GossipRule("beer", 2, true) {}

  Status Validate(const GossipConfig& config) const override {
    EDGESGD_TRY(CheckCompressedExchange(config));
    EDGESGD_TRY(CheckPublicCopies(config));
    return CheckOnePlainStep(config);
  }

  void BeginRound(const GossipState& state, bool gradient_ok) const override {
    if (!gradient_ok) ReuseGradient(state);
    if (state.round == 0) {
      StartTracker(state);
      return;
    }
    // The consensus sum was added at the last close.
    for (std::size_t i = 0; i < state.tracker.size(); ++i) {
      state.tracker[i] += state.gradient[i] - state.previous_gradient[i];
    }
    KeepGradient(state);
  }

  void AfterMix(const GossipState& state, std::size_t vector) const override {
    const float gamma = state.config.consensus_step;
    if (vector == kModelVector) {  // reads v_k before the tracker's own step below
      const float lr = state.config.learning_rate;
      for (std::size_t i = 0; i < state.model.size(); ++i) {
        state.model[i] = (state.model[i] + gamma * state.model_mix[i]) - lr * state.tracker[i];
      }
      return;
    }
    for (std::size_t i = 0; i < state.tracker.size(); ++i) {
      state.tracker[i] += gamma * state.tracker_mix[i];
    }
  }
};

constinit const Beer kBeer;

}  // namespace

const GossipRule& BeerRule() { return kBeer; }

}  // namespace edgesgd::protocol::internal
