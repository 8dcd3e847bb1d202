#pragma once

// Buffered asynchronous aggregation (FedBuff, Nguyen et al., AISTATS 2022; docs/algorithms.md).
// Instead of rounds that wait for a cohort, the server keeps a fraction of its workers busy
// (RunConfig::participation is the concurrency): each trains from the model version it was
// sent, and the server adds every update, weighted by its staleness tau (the versions the model
// moved on since), to a buffer. After K updates it moves the model by the buffer / K and bumps
// the version; an update more than max_staleness versions old is dropped and counted. The
// version is the frames' round: a worker needs no change to take part.

#include <cmath>
#include <cstdint>
#include <string_view>

#include "edgesgd/core/status.h"

namespace edgesgd::protocol {

// w(tau), the weight of an update computed tau versions ago.
enum class StalenessKind : std::uint8_t {
  kConstant = 0,     // 1
  kInverseSqrt = 1,  // 1 / sqrt(1 + tau), the paper's choice
  kPolynomial = 2,   // (1 + tau)^-a
};

// Lower-case names as the CLI spells them ("poly" takes its exponent as poly:A); "unknown"
// outside the enum.
constexpr std::string_view StalenessName(StalenessKind kind) {
  switch (kind) {
    case StalenessKind::kConstant:
      return "constant";
    case StalenessKind::kInverseSqrt:
      return "sqrt";
    case StalenessKind::kPolynomial:
      return "poly";
  }
  return "unknown";
}

// Largest staleness bound the server accepts: beyond it no weight makes an update useful.
inline constexpr std::uint32_t kMaxStalenessBound = 1u << 16;
inline constexpr float kMaxStalenessExponent = 16.0f;

struct AsyncParams {
  // K, updates per model version; 0 runs synchronous rounds (everything below is unread).
  std::uint32_t buffer = 0;
  StalenessKind staleness = StalenessKind::kInverseSqrt;
  float exponent = 0.5f;               // a of kPolynomial, in (0, kMaxStalenessExponent]
  std::uint32_t max_staleness = 100;   // tau_max: older updates are dropped

  friend constexpr bool operator==(const AsyncParams&, const AsyncParams&) = default;
};

constexpr bool IsAsynchronous(const AsyncParams& params) { return params.buffer > 0; }

// Checks the fields an asynchronous run reads (the buffer's bound by the worker count is the
// server's check). Errors: kInvalidArgument with the reason.
constexpr Status ValidateAsyncParams(const AsyncParams& params) {
  if (!IsAsynchronous(params)) return Status::Ok();
  switch (params.staleness) {
    case StalenessKind::kConstant:
    case StalenessKind::kInverseSqrt:
      break;
    case StalenessKind::kPolynomial:
      if (!(params.exponent > 0.0f && params.exponent <= kMaxStalenessExponent)) {
        return Status::InvalidArgument("the staleness exponent a must be in (0, 16]");
      }
      break;
    default:
      return Status::InvalidArgument("unknown staleness function");
  }
  if (params.max_staleness > kMaxStalenessBound) {
    return Status::InvalidArgument("the maximum staleness must be at most 65536 versions");
  }
  return Status::Ok();
}

// `params` with the fields its staleness function does not read at their defaults (and
// everything at its default for synchronous rounds).
constexpr AsyncParams NormalizedAsyncParams(const AsyncParams& params) {
  if (!IsAsynchronous(params)) return AsyncParams{};
  AsyncParams out = params;
  if (params.staleness != StalenessKind::kPolynomial) out.exponent = AsyncParams{}.exponent;
  return out;
}

// w(tau); 1 for tau = 0 whatever the function, so a synchronous round weighs every update 1.
inline float StalenessWeight(const AsyncParams& params, std::uint32_t tau) {
  if (tau == 0) return 1.0f;
  switch (params.staleness) {
    case StalenessKind::kConstant:
      return 1.0f;
    case StalenessKind::kInverseSqrt:
      return static_cast<float>(1.0 / std::sqrt(1.0 + tau));
    case StalenessKind::kPolynomial:
      return static_cast<float>(std::pow(1.0 + tau, -static_cast<double>(params.exponent)));
  }
  return 1.0f;
}

}  // namespace edgesgd::protocol
