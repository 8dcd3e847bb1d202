#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "edgesgd/core/check.h"
#include "edgesgd/core/privacy/rdp_accountant.h"

namespace edgesgd {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The series of a fractional order stop once both new terms are below e^-30 of the unit.
constexpr double kLogNegligible = -30;
// NoiseMultiplierForEpsilon searches noise multipliers in [kMinNoise, kMaxNoise] and stops when
// the bracket is this narrow relative to its upper end.
constexpr double kMinNoise = 1e-3;
constexpr double kMaxNoise = 1e4;
constexpr double kNoiseTolerance = 1e-4;

// Sums in log space (-inf stands for 0): log(e^a + e^b) and log(e^a - e^b) without overflow.
double LogAdd(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == -kInf) return a;
  return a + std::log1p(std::exp(b - a));
}

// NaN when e^a < e^b: a negative partial sum would mean the series lost all precision.
double LogSub(double a, double b) {
  if (b == -kInf) return a;
  if (a == b) return -kInf;
  if (a < b) return kNaN;
  return a + std::log(-std::expm1(b - a));
}

// log(erfc(x)). erfc(x) leaves the normal doubles near x = 26.5, so from x = 20 on this uses
// the asymptotic expansion erfc(x) = e^(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) -
// 15/(8x^6) + 105/(16x^8) - ...), whose first omitted term is below 3e-12 there.
double LogErfc(double x) {
  if (x < 20) return std::log(std::erfc(x));
  const double r = 1 / (x * x);
  const double series = r * (-0.5 + r * (0.75 + r * (-1.875 + r * 6.5625)));
  return -x * x - std::log(x) - 0.5 * std::log(std::numbers::pi) + std::log1p(series);
}

// log A_alpha, A_alpha = E_{x ~ mu0} [(mu(x) / mu0(x))^alpha] with mu0 = N(0, z^2) and
// mu = (1 - q) mu0 + q N(1, z^2) (Mironov, Talwar, Zhang 2019, Section 3.3). For an integer
// order the binomial expansion is finite:
//   A = sum_{i=0..alpha} C(alpha, i) q^i (1 - q)^(alpha - i) e^((i^2 - i) / (2 z^2)).
double LogAIntegerOrder(double q, double z, double alpha) {
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  double log_a = -kInf;
  double log_binomial = 0;  // log C(alpha, i)
  for (double i = 0; i <= alpha; ++i) {
    log_a =
        LogAdd(log_a, log_binomial + i * log_q + (alpha - i) * log_1mq + (i * i - i) / (2 * z * z));
    log_binomial += std::log((alpha - i) / (i + 1));
  }
  return log_a;
}

// For a fractional order the integral splits at z0 = z^2 log(1/q - 1) + 1/2, where
// q N(1, z^2) overtakes (1 - q) N(0, z^2); on each side the power expands into a convergent
// series with generalized binomial coefficients C(alpha, i) (alternating in sign once
// i > alpha), each term weighted by a Gaussian tail written with erfc.
double LogAFractionalOrder(double q, double z, double alpha) {
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double z0 = z * z * std::log(1 / q - 1) + 0.5;
  const double tail_scale = std::numbers::sqrt2 * z;
  double log_a0 = -kInf;
  double log_a1 = -kInf;
  double log_binomial = 0;  // log |C(alpha, i)|
  bool positive = true;     // sign of C(alpha, i)
  for (double i = 0;; ++i) {
    const double j = alpha - i;
    const double log_s0 = log_binomial + i * log_q + j * log_1mq + (i * i - i) / (2 * z * z) +
                          std::log(0.5) + LogErfc((i - z0) / tail_scale);
    const double log_s1 = log_binomial + j * log_q + i * log_1mq + (j * j - j) / (2 * z * z) +
                          std::log(0.5) + LogErfc((z0 - j) / tail_scale);
    if (positive) {
      log_a0 = LogAdd(log_a0, log_s0);
      log_a1 = LogAdd(log_a1, log_s1);
    } else {
      log_a0 = LogSub(log_a0, log_s0);
      log_a1 = LogSub(log_a1, log_s1);
    }
    // Written so that NaN terms end the loop too.
    if (!(log_s0 >= kLogNegligible) && !(log_s1 >= kLogNegligible)) break;
    log_binomial += std::log(std::abs(j) / (i + 1));
    positive = positive == (j > 0);
  }
  return LogAdd(log_a0, log_a1);
}

// Keeps in `best` the smaller of its epsilon and the one RDP `rdp` at `order` gives (Balle et
// al. 2020, Theorem 21); NaN (order <= 1) is skipped.
void ConsiderOrder(PrivacySpent& best, double order, double rdp, double delta) {
  const double epsilon =
      rdp - (std::log(delta) + std::log(order)) / (order - 1) + std::log((order - 1) / order);
  if (epsilon < best.epsilon) best = {epsilon, order};
}

// A negative bound says no more than 0 does.
PrivacySpent ClampedAtZero(PrivacySpent spent) {
  spent.epsilon = std::max(spent.epsilon, 0.0);
  return spent;
}

constexpr PrivacySpent kNoFiniteBound{kInf, 0};

bool IsSamplingRate(double q) { return q > 0 && q <= 1; }  // false for NaN
bool IsDelta(double delta) { return delta > 0 && delta < 1; }

double EpsilonAfter(double q, double z, std::uint64_t steps, double delta) {
  PrivacySpent best = kNoFiniteBound;
  for (const double order : kRdpOrders) {
    ConsiderOrder(best, order, SampledGaussianRdp(q, z, order) * static_cast<double>(steps), delta);
  }
  return ClampedAtZero(best).epsilon;
}

}  // namespace

double SampledGaussianRdp(double sampling_rate, double noise_multiplier, double order) {
  const double q = sampling_rate;
  const double z = noise_multiplier;
  if (!(q >= 0 && q <= 1) || !(z >= 0) || !(order > 1)) return kNaN;
  if (q == 0 || z == kInf) return 0;
  if (z == 0 || order == kInf) return kInf;
  if (q == 1) return order / (2 * z * z);
  const double log_a =
      std::floor(order) == order ? LogAIntegerOrder(q, z, order) : LogAFractionalOrder(q, z, order);
  return log_a / (order - 1);
}

PrivacySpent EpsilonFromRdp(std::span<const double> orders, std::span<const double> rdp,
                            double delta) {
  EDGESGD_CHECK(orders.size() == rdp.size());
  PrivacySpent best = kNoFiniteBound;
  for (std::size_t k = 0; k < orders.size(); ++k) ConsiderOrder(best, orders[k], rdp[k], delta);
  return ClampedAtZero(best);
}

Status RdpAccountant::Configure(double sampling_rate, double noise_multiplier) {
  configured_ = false;
  steps_ = 0;
  if (!IsSamplingRate(sampling_rate)) {
    return Status::InvalidArgument("sampling rate must be in (0, 1]");
  }
  if (!(noise_multiplier > 0 && noise_multiplier < kInf)) {
    return Status::InvalidArgument("noise multiplier must be positive and finite");
  }
  for (std::size_t k = 0; k < kRdpOrders.size(); ++k) {
    rdp_per_step_[k] = SampledGaussianRdp(sampling_rate, noise_multiplier, kRdpOrders[k]);
  }
  configured_ = true;
  return Status::Ok();
}

Result<PrivacySpent> RdpAccountant::Epsilon(double delta) const {
  if (!configured_) return Status::FailedPrecondition("privacy accountant not configured");
  if (!IsDelta(delta)) return Status::InvalidArgument("delta must be in (0, 1)");
  if (steps_ == 0) return PrivacySpent{};
  PrivacySpent best = kNoFiniteBound;
  for (std::size_t k = 0; k < kRdpOrders.size(); ++k) {
    ConsiderOrder(best, kRdpOrders[k], rdp_per_step_[k] * static_cast<double>(steps_), delta);
  }
  return ClampedAtZero(best);
}

Status PrivacyLedger::Charge(double sampling_rate, double noise_multiplier) {
  if (!(sampling_rate >= 0 && sampling_rate <= 1)) {
    return Status::InvalidArgument("sampling rate must be in [0, 1]");
  }
  if (!(noise_multiplier >= 0)) return Status::InvalidArgument("noise multiplier must be >= 0");
  if (sampling_rate != last_rate_ || noise_multiplier != last_noise_) {
    for (std::size_t k = 0; k < kRdpOrders.size(); ++k) {
      last_[k] = SampledGaussianRdp(sampling_rate, noise_multiplier, kRdpOrders[k]);
    }
    last_rate_ = sampling_rate;
    last_noise_ = noise_multiplier;
  }
  for (std::size_t k = 0; k < kRdpOrders.size(); ++k) total_[k] += last_[k];
  ++rounds_;
  return Status::Ok();
}

Result<PrivacySpent> PrivacyLedger::Epsilon(double delta) const {
  if (!IsDelta(delta)) return Status::InvalidArgument("delta must be in (0, 1)");
  if (rounds_ == 0) return PrivacySpent{};
  return EpsilonFromRdp(kRdpOrders, total_, delta);
}

Status PrivacyLedger::Restore(std::span<const double> rdp, std::uint64_t rounds) {
  if (rdp.size() != total_.size()) {
    return Status::InvalidArgument("a saved privacy account has one value per RDP order");
  }
  for (const double value : rdp) {
    if (!(value >= 0)) return Status::InvalidArgument("a saved RDP value is negative or NaN");
  }
  std::copy(rdp.begin(), rdp.end(), total_.begin());
  rounds_ = rounds;
  return Status::Ok();
}

Result<double> NoiseMultiplierForEpsilon(double sampling_rate, std::uint64_t steps,
                                         double target_epsilon, double delta) {
  if (!IsSamplingRate(sampling_rate)) {
    return Status::InvalidArgument("sampling rate must be in (0, 1]");
  }
  if (steps == 0) return Status::InvalidArgument("steps must be at least 1");
  if (!(target_epsilon > 0 && target_epsilon < kInf)) {
    return Status::InvalidArgument("target epsilon must be positive and finite");
  }
  if (!IsDelta(delta)) return Status::InvalidArgument("delta must be in (0, 1)");
  const auto meets_target = [&](double z) {
    return EpsilonAfter(sampling_rate, z, steps, delta) <= target_epsilon;
  };
  // Epsilon falls as the noise grows: find high meeting the target and low = high / 2 missing it.
  double high = 1;
  while (!meets_target(high)) {
    if (high >= kMaxNoise) {
      return Status::OutOfRange("target epsilon needs a noise multiplier above 1e4");
    }
    high = std::min(2 * high, kMaxNoise);
  }
  double low = high / 2;
  while (meets_target(low)) {
    if (low < kMinNoise) {
      return Status::OutOfRange("target epsilon is met even by a noise multiplier below 1e-3");
    }
    high = low;
    low /= 2;
  }
  while (high - low > kNoiseTolerance * high) {
    const double middle = (low + high) / 2;
    (meets_target(middle) ? high : low) = middle;
  }
  return high;
}

}  // namespace edgesgd
