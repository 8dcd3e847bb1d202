#include "update_stage.h"

namespace edgesgd::protocol::internal {

Status ProximalTerm::CorrectGradient(const UpdateRound& round, std::span<float> gradient) const {
  return round.feedback.AddProximalGradient(gradient);
}

}  // namespace edgesgd::protocol::internal
