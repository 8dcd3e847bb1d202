#include "edgesgd/core/server_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace edgesgd {

Status ServerOptimizer::Init(Arena& arena, std::size_t dimension,
                             const ServerOptimizerParams& params) {
  EDGESGD_TRY(ValidateServerOptimizerParams(params));
  if (dimension == 0) return Status::InvalidArgument("the dimension is 0");
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(dimension, params)) {
    return Status::ResourceExhausted("the arena is too small for the server optimizer's state");
  }
  state_ = {};
  if (const std::size_t floats = StateFloats(dimension, params); floats != 0) {
    EDGESGD_TRY_ASSIGN(state_, arena.Allocate<float>(floats));
  }
  std::fill(state_.begin(), state_.end(), 0.0f);
  if (IsAdaptive(params.kind)) {
    std::fill(state_.begin() + static_cast<std::ptrdiff_t>(dimension), state_.end(),
              params.tau * params.tau);
  }
  params_ = params;
  dimension_ = dimension;
  initialized_ = true;
  return Status::Ok();
}

Status ServerOptimizer::Step(std::span<float> model, std::span<const float> change) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (model.size() != dimension_ || change.size() != dimension_) {
    return Status::InvalidArgument("the model's or the change's size differs from the dimension");
  }
  const std::size_t d = dimension_;
  const float eta = params_.learning_rate;
  const float beta1 = params_.beta1;
  switch (params_.kind) {
    case ServerOptimizerKind::kFedAvg:
      for (std::size_t i = 0; i < d; ++i) model[i] += eta * change[i];
      return Status::Ok();
    case ServerOptimizerKind::kFedAvgM:
      for (std::size_t i = 0; i < d; ++i) {
        state_[i] = beta1 * state_[i] + change[i];
        model[i] += eta * state_[i];
      }
      return Status::Ok();
    case ServerOptimizerKind::kFedAdagrad:
      AdaptiveStep<ServerOptimizerKind::kFedAdagrad>(model, change);
      break;
    case ServerOptimizerKind::kFedAdam:
      AdaptiveStep<ServerOptimizerKind::kFedAdam>(model, change);
      break;
    default:
      AdaptiveStep<ServerOptimizerKind::kFedYogi>(model, change);
      break;
  }
  return Status::Ok();
}

// One loop per kind, its second-moment rule chosen at compile time: no branch per coordinate.
template <ServerOptimizerKind kKind>
void ServerOptimizer::AdaptiveStep(std::span<float> model, std::span<const float> change) {
  const std::size_t d = dimension_;
  const std::span<float> m = state_.first(d);
  const std::span<float> v = state_.subspan(d);
  const float eta = params_.learning_rate;
  const float beta1 = params_.beta1;
  const float one_minus_beta1 = 1.0f - beta1;
  const float beta2 = params_.beta2;
  const float one_minus_beta2 = 1.0f - beta2;
  const float tau = params_.tau;
  for (std::size_t i = 0; i < d; ++i) {
    const float c = change[i];
    const float c2 = c * c;
    m[i] = beta1 * m[i] + one_minus_beta1 * c;
    if constexpr (kKind == ServerOptimizerKind::kFedAdagrad) {
      v[i] += c2;
    } else if constexpr (kKind == ServerOptimizerKind::kFedAdam) {
      v[i] = beta2 * v[i] + one_minus_beta2 * c2;
    } else {  // FedYogi: v moves towards c^2 by at most (1 - beta2) c^2
      const float difference = v[i] - c2;
      const float sign = difference > 0.0f ? 1.0f : (difference < 0.0f ? -1.0f : 0.0f);
      v[i] -= one_minus_beta2 * c2 * sign;
    }
    model[i] += eta * m[i] / (std::sqrt(v[i]) + tau);
  }
}

Status ServerOptimizer::CheckSavedState(std::span<const std::byte> saved) const {
  if (saved.size() != state_.size_bytes()) {
    return Status::InvalidArgument("the server optimizer's saved state has the wrong size");
  }
  const bool adaptive = IsAdaptive(params_.kind);
  for (std::size_t i = 0; i < state_.size(); ++i) {
    float value;
    std::memcpy(&value, saved.data() + i * sizeof(float), sizeof(float));
    if (!std::isfinite(value) || (adaptive && i >= dimension_ && value < 0.0f)) {
      return Status::InvalidArgument(
          "the server optimizer's saved state is not finite or has a negative second moment");
    }
  }
  return Status::Ok();
}

Status ServerOptimizer::RestoreState(std::span<const std::byte> saved) {
  EDGESGD_TRY(CheckSavedState(saved));
  if (!saved.empty()) std::memcpy(state_.data(), saved.data(), saved.size());
  return Status::Ok();
}

}  // namespace edgesgd
