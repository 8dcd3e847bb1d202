// DeTAG (Lu and De Sa 2021, docs/algorithms.md §6): gradient tracking's update
// (gradient_tracking.h) over R >= 1 exchange steps of accelerated gossip per round (a phase),
//
//   Z_{r+1} = (1 + eta_g) * W Z_r - eta_g * Z_{r-1}        (Z_{-1} = Z_0)
//
// for both x and y, with eta_g = AcceleratedGossipRate(lambda) and R from DetagGossipSteps
// (eta_g = 0 makes the R steps plain gossip rounds). The gradient is at x_k while the R steps
// run: on a device the computation overlaps the exchange.

#include "gradient_tracking.h"

namespace edgesgd::protocol::internal {
namespace {

class Detag final : public GossipRule {
 public:
  constexpr Detag() : GossipRule("detag", 2, false) {}

  Status Validate(const GossipConfig& config) const override {
    EDGESGD_TRY(CheckDenseExchange(config));
    EDGESGD_TRY(CheckPublicCopies(config));
    if (config.gossip_steps < 1 || config.gossip_steps > kMaxGossipSteps) {
      return Status::InvalidArgument("DeTAG's gossip steps per round must be in 1..4096");
    }
    if (!(config.accel >= 0.0f && config.accel < 1.0f)) {
      return Status::InvalidArgument("accelerated gossip's eta_g must be in [0, 1)");
    }
    return Status::Ok();
  }

  void BeginRound(const GossipState& state, bool gradient_ok) const override {
    BeginTrackingRound(state, gradient_ok);
  }

  void AfterMix(const GossipState& state, std::size_t vector) const override {
    AfterTrackingMix(state, vector);
  }
};

constinit const Detag kDetag;

}  // namespace

const GossipRule& DetagRule() { return kDetag; }

}  // namespace edgesgd::protocol::internal
