// CHOCO-SGD (Koloskova, Stich and Jaggi 2019, docs/algorithms.md §6). Every peer keeps public
// copies x̂_j of itself and of each neighbour (zero at the start, identical at every holder; the
// session keeps them in strict round order and resynchronises a copy that missed a delta). Each
// round k (R = 1, eta_g = 0):
//
//   x^{k+1/2} = x_k - lr * g_k
//   q_i       = C(x^{k+1/2} - x̂_i)   one frame (GossipVector::kModelDelta, config.codec), the
//                                     same bytes to every neighbour
//   x̂_j     += decode(q_j)          for j = i and each neighbour, keyed by CodecContext{seed,
//                                     round, j}; the sender decodes its own frame the same way
//   x_{k+1}   = x^{k+1/2} + gamma * sum_{j heard} W_ij (x̂_j - x̂_i)   (gamma: consensus_step)
//
// model() stays x_k while the round runs (x^{k+1/2} is formed where it is used). With the
// identity codec and gamma = 1 this is D-PSGD with the gradient step before the mix, up to float
// rounding. public_copies = false is the paper's naive baseline: every copy is reset to zero
// before each delta, so peers exchange C(x^{k+1/2}) itself; with an aggressive compressor it
// stalls or diverges. A failed gradient call takes no gradient step that round.

#include "gossip_rule.h"

namespace edgesgd::protocol::internal {
namespace {

class Choco final : public GossipRule {
 public:
  constexpr Choco() : GossipRule("choco", 1, true) {}

  Status Validate(const GossipConfig& config) const override {
    EDGESGD_TRY(CheckCompressedExchange(config));
    return CheckOnePlainStep(config);
  }

  void BeginRound(const GossipState& state, bool gradient_ok) const override {
    if (!gradient_ok) DropGradient(state);
  }

  void DeltaInput(const GossipState& state, std::span<const float> z,
                  std::span<const float> own_copy, std::span<float> input) const override {
    const float lr = state.config.learning_rate;
    for (std::size_t i = 0; i < z.size(); ++i) {
      input[i] = (z[i] - lr * state.gradient[i]) - own_copy[i];
    }
  }

  void AfterMix(const GossipState& state, std::size_t /*vector*/) const override {
    // A missed neighbour's consensus term is left out: its weight is on the diagonal.
    const float lr = state.config.learning_rate;
    const float gamma = state.config.consensus_step;
    for (std::size_t i = 0; i < state.model.size(); ++i) {
      state.model[i] = (state.model[i] - lr * state.gradient[i]) + gamma * state.model_mix[i];
    }
  }
};

constinit const Choco kChoco;

}  // namespace

const GossipRule& ChocoRule() { return kChoco; }

}  // namespace edgesgd::protocol::internal
