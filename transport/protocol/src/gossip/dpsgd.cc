// D-PSGD (Lian et al. 2017, docs/algorithms.md §6): each round one plain gossip step of the
// model, then the gradient step at the round's start model,
//
//   x_{k+1} = sum_j W_ij x_j,k - lr * g_k
//
// dense frames (GossipVector::kModel), R = 1, eta_g = 0. A failed gradient call takes no
// gradient step that round; the neighbours still get the model. On heterogeneous data the
// peers keep a bias that gradient tracking removes.

#include "gossip_rule.h"

namespace edgesgd::protocol::internal {
namespace {

class Dpsgd final : public GossipRule {
 public:
  constexpr Dpsgd() : GossipRule("dpsgd", 1, false) {}

  Status Validate(const GossipConfig& config) const override {
    EDGESGD_TRY(CheckDenseExchange(config));
    EDGESGD_TRY(CheckPublicCopies(config));
    return CheckOnePlainStep(config);
  }

  void BeginRound(const GossipState& state, bool gradient_ok) const override {
    if (!gradient_ok) DropGradient(state);
  }

  void AfterMix(const GossipState& state, std::size_t /*vector*/) const override {
    const float lr = state.config.learning_rate;
    for (std::size_t i = 0; i < state.model.size(); ++i) state.model[i] -= lr * state.gradient[i];
  }
};

constinit const Dpsgd kDpsgd;

}  // namespace

const GossipRule& DpsgdRule() { return kDpsgd; }

}  // namespace edgesgd::protocol::internal
