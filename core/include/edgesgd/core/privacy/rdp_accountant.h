#pragma once

// Privacy accounting for DP-FedAvg: each round samples every device independently with
// probability q (Poisson sampling), clips the sampled updates to L2 norm C and adds Gaussian
// noise of standard deviation z * C to their sum. One round is one run of the subsampled
// Gaussian mechanism; its Rényi differential privacy (RDP) at order alpha is computed as in
// Mironov, Talwar and Zhang, "Rényi Differential Privacy of the Sampled Gaussian Mechanism"
// (2019), RDP adds up over rounds, and the total is converted to an (epsilon, delta) guarantee.
// Figures agree with the RDP accountants of TensorFlow Privacy and Opacus (see
// docs/algorithms.md, "The privacy accountant").
//
// No heap, no exceptions: usable on the devices themselves.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

namespace internal {
constexpr std::array<double, 151> MakeRdpOrders() {
  std::array<double, 151> orders{};
  std::size_t n = 0;
  for (int x = 1; x < 100; ++x) orders[n++] = 1.0 + x / 10.0;
  for (int order = 12; order < 64; ++order) orders[n++] = order;
  return orders;
}
}  // namespace internal

// The orders TensorFlow Privacy and Opacus evaluate by default: 1.1, 1.2, ..., 10.9, then the
// integers 12..63. Small orders suit large budgets and large orders small ones.
inline constexpr std::array<double, 151> kRdpOrders = internal::MakeRdpOrders();

// RDP at `order` (> 1) of one run of the Gaussian mechanism with noise multiplier z applied to
// a Poisson sample of rate q (each record taken independently with probability q), for
// add-or-remove-one neighbours. 0 when q == 0 or z is infinite; order / (2 z^2), the plain
// Gaussian, when q == 1; +inf when z == 0 or the order is infinite. Integer orders sum the
// binomial expansion exactly; fractional ones use the two converging series of Mironov, Talwar
// and Zhang's Section 3.3.
// NaN for arguments outside q in [0, 1], z >= 0, order > 1.
double SampledGaussianRdp(double sampling_rate, double noise_multiplier, double order);

struct PrivacySpent {
  double epsilon = 0;
  double order = 0;  // the order the bound was taken at; 0 when none applies
};

// The smallest epsilon such that RDP `rdp[i]` at order `orders[i]` (equal lengths) implies
// (epsilon, delta)-differential privacy, and the order achieving it. Uses the conversion of
// Balle et al., "Hypothesis Testing Interpretations and Renyi Differential Privacy" (AISTATS
// 2020, Theorem 21), as Opacus and current TensorFlow Privacy do:
//
//   epsilon = rdp - (log(delta) + log(order)) / (order - 1) + log((order - 1) / order)
//
// It is tighter than the classic epsilon = rdp + log(1 / delta) / (order - 1) (Mironov,
// "Rényi Differential Privacy", 2017, Proposition 3) by log(order) / (order - 1) +
// log(order / (order - 1)) at every order.
// Orders where the expression is NaN (order <= 1) are skipped; the result is clamped at 0.
// {+inf, 0} when no order gives a finite bound.
PrivacySpent EpsilonFromRdp(std::span<const double> orders, std::span<const double> rdp,
                            double delta);

// The privacy spent by a run of rounds that all use the same sampling rate and noise
// multiplier. Configure evaluates the per-round RDP at every order of kRdpOrders once, so
// Epsilon costs a pass over 151 numbers: cheap enough to report after every round.
class RdpAccountant {
 public:
  // Starts a fresh account (no steps) for sampling rate q in (0, 1] (the fraction of devices
  // sampled per round) and noise multiplier z > 0 (noise standard deviation over the clipping
  // norm). Errors: kInvalidArgument for NaN or out-of-range values (the account is then
  // unconfigured).
  Status Configure(double sampling_rate, double noise_multiplier);

  // Records `steps` more runs of the mechanism (rounds).
  void AddSteps(std::uint64_t steps) { steps_ += steps; }
  std::uint64_t steps() const { return steps_; }

  // The (epsilon, delta) guarantee of the steps so far; epsilon 0 before the first step.
  // Errors: kFailedPrecondition before Configure; kInvalidArgument for delta outside (0, 1).
  Result<PrivacySpent> Epsilon(double delta) const;

 private:
  std::array<double, kRdpOrders.size()> rdp_per_step_{};
  std::uint64_t steps_ = 0;
  bool configured_ = false;
};

// The privacy spent by rounds that each have their own sampling rate and noise multiplier: a
// server charges every round it releases with what really happened in it (the rate devices
// were sampled at, the noise the aggregate really carried). RDP adds up over the rounds. The
// last round's per-order RDP is kept, so a run of equal rounds costs one evaluation.
class PrivacyLedger {
 public:
  // Charges one round at sampling rate q in [0, 1] and noise multiplier z >= 0 (z = 0: no
  // noise, an unbounded epsilon from then on; q = 0 or z = +inf: nothing released, no cost).
  // Errors: kInvalidArgument for NaN or out-of-range values (nothing is charged).
  Status Charge(double sampling_rate, double noise_multiplier);

  std::uint64_t rounds() const { return rounds_; }
  // The total RDP at each order of kRdpOrders.
  std::span<const double> rdp() const { return total_; }

  // The (epsilon, delta) guarantee of the rounds so far: epsilon 0 before any charge.
  // Errors: kInvalidArgument for delta outside (0, 1).
  Result<PrivacySpent> Epsilon(double delta) const;

  // Replaces the account with a saved one (`rdp` at kRdpOrders, `rounds` charged).
  // Errors: kInvalidArgument for the wrong length or a negative or NaN value.
  Status Restore(std::span<const double> rdp, std::uint64_t rounds);

 private:
  std::array<double, kRdpOrders.size()> total_{};
  std::array<double, kRdpOrders.size()> last_{};
  double last_rate_ = -1;
  double last_noise_ = -1;
  std::uint64_t rounds_ = 0;
};

// The smallest noise multiplier (within 0.01 %) for which `steps` runs at sampling rate q
// spend at most `target_epsilon` at `delta`, over kRdpOrders: bracketed by doubling or
// halving, then bisected. Errors: kInvalidArgument for q outside (0, 1], no steps, a target
// that is not a positive finite number or delta outside (0, 1); kOutOfRange when the target
// needs a noise multiplier above 1e4, or is met even below 1e-3 (too loose to matter).
Result<double> NoiseMultiplierForEpsilon(double sampling_rate, std::uint64_t steps,
                                         double target_epsilon, double delta);

}  // namespace edgesgd
