#pragma once

// Server optimizers (Reddi et al., "Adaptive Federated Optimization", ICLR 2021): how a server
// moves its model given a round's aggregated change c, the move plain FedAvg would make
// (x_plain = x + c, c = -mean update). docs/algorithms.md, server optimizers.
//
//   kFedAvg      x += eta * c
//   kFedAvgM     m = beta1 * m + c;                      x += eta * m
//   kFedAdagrad  m = beta1 * m + (1 - beta1) * c;  v += c^2;  x += eta * m / (sqrt(v) + tau)
//   kFedAdam     m as FedAdagrad;  v = beta2 * v + (1 - beta2) * c^2;  x as FedAdagrad
//   kFedYogi     m as FedAdagrad;  v -= (1 - beta2) * c^2 * sign(v - c^2);  x as FedAdagrad
//
// m starts at 0 and v at tau^2, as in the paper's algorithm; there is no bias correction. The
// state (m, then v for the adaptive kinds) is what a checkpoint keeps.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

enum class ServerOptimizerKind : std::uint8_t {
  kFedAvg = 0,
  kFedAvgM = 1,
  kFedAdagrad = 2,
  kFedAdam = 3,
  kFedYogi = 4,
};

// Lower-case names ("fedadam"), as the CLI spells them; "unknown" outside the enum.
constexpr std::string_view ServerOptimizerName(ServerOptimizerKind kind) {
  switch (kind) {
    case ServerOptimizerKind::kFedAvg:
      return "fedavg";
    case ServerOptimizerKind::kFedAvgM:
      return "fedavgm";
    case ServerOptimizerKind::kFedAdagrad:
      return "fedadagrad";
    case ServerOptimizerKind::kFedAdam:
      return "fedadam";
    case ServerOptimizerKind::kFedYogi:
      return "fedyogi";
  }
  return "unknown";
}

struct ServerOptimizerParams {
  ServerOptimizerKind kind = ServerOptimizerKind::kFedAvg;
  float learning_rate = 1.0f;  // eta > 0, finite
  float beta1 = 0.9f;          // in [0, 1): FedAvgM's momentum, the adaptive kinds' first moment
  float beta2 = 0.99f;         // in [0, 1): FedAdam and FedYogi
  float tau = 1e-3f;           // > 0, finite: the adaptive kinds' degree of adaptivity

  friend constexpr bool operator==(const ServerOptimizerParams&,
                                   const ServerOptimizerParams&) = default;
};

constexpr bool IsAdaptive(ServerOptimizerKind kind) {
  return kind == ServerOptimizerKind::kFedAdagrad || kind == ServerOptimizerKind::kFedAdam ||
         kind == ServerOptimizerKind::kFedYogi;
}

// Whether the kind has a decaying second moment (FedAdagrad's only grows): what beta2 is for.
constexpr bool ReadsBeta2(ServerOptimizerKind kind) {
  return kind == ServerOptimizerKind::kFedAdam || kind == ServerOptimizerKind::kFedYogi;
}

// Whether `params` moves the model other than x += c: the server then needs the change apart
// from the model (ServerOptimizer).
constexpr bool ChangesFedAvg(const ServerOptimizerParams& params) {
  return params.kind != ServerOptimizerKind::kFedAvg || params.learning_rate != 1.0f;
}

// Checks the fields `params.kind` reads. Errors: kInvalidArgument with the reason.
constexpr Status ValidateServerOptimizerParams(const ServerOptimizerParams& params) {
  constexpr float kMaxFloat = std::numeric_limits<float>::max();
  if (static_cast<std::uint8_t>(params.kind) > static_cast<std::uint8_t>(ServerOptimizerKind::kFedYogi)) {
    return Status::InvalidArgument("unknown server optimizer");
  }
  if (!(params.learning_rate > 0.0f && params.learning_rate <= kMaxFloat)) {
    return Status::InvalidArgument("the server learning rate must be positive and finite");
  }
  if (params.kind != ServerOptimizerKind::kFedAvg && !(params.beta1 >= 0.0f && params.beta1 < 1.0f)) {
    return Status::InvalidArgument("the server's beta1 must be in [0, 1)");
  }
  if (ReadsBeta2(params.kind) && !(params.beta2 >= 0.0f && params.beta2 < 1.0f)) {
    return Status::InvalidArgument("the server's beta2 must be in [0, 1)");
  }
  if (IsAdaptive(params.kind) && !(params.tau > 0.0f && params.tau <= kMaxFloat)) {
    return Status::InvalidArgument("the server's tau must be positive and finite");
  }
  return Status::Ok();
}

// `params` with the fields its kind does not read at their defaults.
constexpr ServerOptimizerParams NormalizedServerOptimizerParams(const ServerOptimizerParams& params) {
  ServerOptimizerParams out;
  out.kind = params.kind;
  out.learning_rate = params.learning_rate;
  if (params.kind != ServerOptimizerKind::kFedAvg) out.beta1 = params.beta1;
  if (ReadsBeta2(params.kind)) {
    out.beta2 = params.beta2;
  }
  if (IsAdaptive(params.kind)) out.tau = params.tau;
  return out;
}

class ServerOptimizer {
 public:
  // Floats of state over a d-float model: 0 for FedAvg, d (m) for FedAvgM, 2d (m, v) for the
  // adaptive kinds; 0 for bad parameters.
  static constexpr std::size_t StateFloats(std::size_t dimension,
                                           const ServerOptimizerParams& params) {
    if (!ValidateServerOptimizerParams(params).ok()) return 0;
    switch (params.kind) {
      case ServerOptimizerKind::kFedAvg:
        return 0;
      case ServerOptimizerKind::kFedAvgM:
        return dimension;
      default:
        return 2 * dimension;
    }
  }
  // Exact arena bytes Init takes.
  static constexpr std::size_t StateBytes(std::size_t dimension,
                                          const ServerOptimizerParams& params) {
    const std::size_t floats = StateFloats(dimension, params);
    return floats == 0 ? 0 : ArenaBytesFor<float>(floats);
  }

  // Takes the state from `arena`, m = 0 and v = tau^2. Errors: kInvalidArgument (dimension 0,
  // bad parameters), kFailedPrecondition (arena sealed), kResourceExhausted (arena too small;
  // nothing is taken then).
  Status Init(Arena& arena, std::size_t dimension, const ServerOptimizerParams& params);

  // One server step from the round's change `change` (d floats) on `model` (d floats), as in the
  // table above. Does not allocate. Errors: kFailedPrecondition before Init, kInvalidArgument
  // for wrong sizes (nothing changes then).
  Status Step(std::span<float> model, std::span<const float> change);

  // The state a checkpoint keeps (StateFloats floats); the check of such bytes (at any
  // alignment: kInvalidArgument for a wrong size, a value that is not finite or a negative second
  // moment), and their restore after that check (nothing changes on error).
  std::span<const float> state() const { return state_; }
  Status CheckSavedState(std::span<const std::byte> saved) const;
  Status RestoreState(std::span<const std::byte> saved);

  const ServerOptimizerParams& params() const { return params_; }

 private:
  template <ServerOptimizerKind kKind>
  void AdaptiveStep(std::span<float> model, std::span<const float> change);

  ServerOptimizerParams params_;
  std::size_t dimension_ = 0;
  std::span<float> state_;  // m (d floats), then v (d floats) for the adaptive kinds
  bool initialized_ = false;
};

}  // namespace edgesgd
