#pragma once

// Byzantine workers for `simulate`: --attack KIND --attackers N makes workers 1..N attackers.
// An attack replaces the gradient an attacker's session receives, so what it sends reaches the
// server through the run's codec, error feedback, local steps and majority vote exactly as an
// honest gradient would; the session and the server are the real ones.
//
//   sign_flip  -s * g                         (s default 1)
//   scale      s * g                          (s default 10)
//   gaussian   N(0, s^2) per coordinate       (s default 1)
//   alie       mu - z * sigma, mu and sigma the honest gradients' coordinate-wise mean and
//              standard deviation at the attacker's point (z = s, or by default the largest z
//              that keeps the attackers inside the honest spread: Baruch et al. 2019)
//   ipm        -s * mu                        (s default 0.1; inner-product manipulation, Xie
//              et al. 2020)
//   label_flip the gradient on the attacker's own shard with every label y read as
//              classes - 1 - y (no s). A poisoning of the data, so the task applies it
//              (TaskOptions::label_flipped_workers) and WithAttack leaves those gradients alone.
// ALIE and IPM are omniscient: an attacker computes every honest worker's gradient for the same
// round and local step (a pure function of them in the simulator).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "edgesgd/sim/simulation.h"

namespace edgesgd::cli {

enum class AttackKind : std::uint8_t {
  kNone,
  kSignFlip,
  kScale,
  kGaussian,
  kAlie,
  kIpm,
  kLabelFlip
};

struct AttackSettings {
  AttackKind kind = AttackKind::kNone;
  std::uint32_t attackers = 0;  // workers 1..attackers
  float strength = 0.0f;        // s; 0 takes the kind's default
  std::size_t workers = 0;
  std::uint64_t seed = 0;
};

// The --attack names, in AttackKind order, and the kind of a name (kNone for an unknown one).
inline constexpr std::string_view kAttackNames[] = {"none", "sign_flip", "scale",     "gaussian",
                                                    "alie", "ipm",       "label_flip"};
AttackKind AttackKindOf(std::string_view name);

// s as the attack uses it: `settings.strength`, or the kind's default. Not for label_flip, which
// has no s.
double AttackStrength(const AttackSettings& settings);

// `honest` with the gradients of workers 1..attackers replaced by the attack's (label_flip:
// `honest` itself). `dimension` is the model's.
sim::DeviceGradient WithAttack(sim::DeviceGradient honest, const AttackSettings& settings,
                               std::size_t dimension);

}  // namespace edgesgd::cli
