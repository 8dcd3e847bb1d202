#include "cli/attacks.h"

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "edgesgd/core/data/random_variates.h"
#include "edgesgd/core/random.h"

namespace edgesgd::cli {
namespace {

// Phi^-1(p) for p in (0, 1), by bisection on the normal CDF: called once per run.
double NormalQuantile(double p) {
  double low = -10.0;
  double high = 10.0;
  for (int i = 0; i < 200; ++i) {
    const double middle = 0.5 * (low + high);
    (0.5 * std::erfc(-middle / std::sqrt(2.0)) < p ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

// Baruch et al.'s z_max for n workers of which m attack: the attackers need s = floor(n/2 + 1) - m
// honest workers on their side, and z is the quantile that many honest workers exceed.
double AlieZ(std::size_t n, std::size_t m) {
  const double supporters = std::floor(static_cast<double>(n) / 2.0 + 1.0) - static_cast<double>(m);
  const double z = NormalQuantile((static_cast<double>(n) - supporters) / static_cast<double>(n));
  return z > 0.0 ? z : 0.0;
}

// The honest workers' gradients at `point` for (round, local_step): their coordinate-wise mean
// and standard deviation, into `mean` and `deviation`.
Status HonestSpread(const sim::DeviceGradient& honest, const AttackSettings& settings,
                    std::span<const float> point, std::uint32_t round, std::uint32_t local_step,
                    std::vector<float>& scratch, std::vector<double>& sum,
                    std::vector<double>& squares, std::span<float> mean,
                    std::span<float> deviation) {
  std::fill(sum.begin(), sum.end(), 0.0);
  std::fill(squares.begin(), squares.end(), 0.0);
  const std::size_t count = settings.workers - settings.attackers;
  for (std::size_t device = settings.attackers; device < settings.workers; ++device) {
    EDGESGD_TRY(honest(device, point, round, local_step, scratch));
    for (std::size_t j = 0; j < scratch.size(); ++j) {
      const double value = static_cast<double>(scratch[j]);
      sum[j] += value;
      squares[j] += value * value;
    }
  }
  for (std::size_t j = 0; j < sum.size(); ++j) {
    const double average = sum[j] / static_cast<double>(count);
    const double variance = squares[j] / static_cast<double>(count) - average * average;
    mean[j] = static_cast<float>(average);
    deviation[j] = static_cast<float>(variance > 0.0 ? std::sqrt(variance) : 0.0);
  }
  return Status::Ok();
}

}  // namespace

AttackKind AttackKindOf(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kAttackNames); ++i) {
    if (kAttackNames[i] == name) return static_cast<AttackKind>(i);
  }
  return AttackKind::kNone;
}

double AttackStrength(const AttackSettings& settings) {
  if (settings.strength != 0.0f) return static_cast<double>(settings.strength);
  switch (settings.kind) {
    case AttackKind::kScale:
      return 10.0;
    case AttackKind::kAlie:
      return AlieZ(settings.workers, settings.attackers);
    case AttackKind::kIpm:
      return 0.1;
    default:
      return 1.0;
  }
}

sim::DeviceGradient WithAttack(sim::DeviceGradient honest, const AttackSettings& settings,
                               std::size_t dimension) {
  if (settings.kind == AttackKind::kNone || settings.kind == AttackKind::kLabelFlip ||
      settings.attackers == 0) {
    return honest;  // label_flip: the task's gradient already is the attack
  }
  // Scratch shared by the attackers' calls, which the simulator makes one at a time.
  struct State {
    sim::DeviceGradient honest;
    AttackSettings settings;
    float strength = 0.0f;
    std::vector<float> scratch, mean, deviation;
    std::vector<double> sum, squares;
  };
  auto state = std::make_shared<State>();
  state->honest = std::move(honest);
  state->settings = settings;
  state->strength = static_cast<float>(AttackStrength(settings));
  state->scratch.resize(dimension);
  state->mean.resize(dimension);
  state->deviation.resize(dimension);
  state->sum.resize(dimension);
  state->squares.resize(dimension);
  return [state](std::size_t device, std::span<const float> point, std::uint32_t round,
                 std::uint32_t local_step, std::span<float> gradient) -> Status {
    State& s = *state;
    if (device >= s.settings.attackers) return s.honest(device, point, round, local_step, gradient);
    const float strength = s.strength;
    switch (s.settings.kind) {
      case AttackKind::kSignFlip:
      case AttackKind::kScale: {
        EDGESGD_TRY(s.honest(device, point, round, local_step, gradient));
        const float factor = s.settings.kind == AttackKind::kSignFlip ? -strength : strength;
        for (float& value : gradient) value *= factor;
        return Status::Ok();
      }
      case AttackKind::kGaussian: {
        NormalRng normal(CounterRng(s.settings.seed, round, local_step,
                                    StreamId(RandomPurpose::kSimulatedAttack,
                                             static_cast<std::uint32_t>(device))));
        for (float& value : gradient) value = strength * normal.Next();
        return Status::Ok();
      }
      default: {
        EDGESGD_TRY(HonestSpread(s.honest, s.settings, point, round, local_step, s.scratch, s.sum,
                                 s.squares, s.mean, s.deviation));
        for (std::size_t j = 0; j < gradient.size(); ++j) {
          gradient[j] = s.settings.kind == AttackKind::kAlie
                            ? s.mean[j] - strength * s.deviation[j]
                            : -strength * s.mean[j];
        }
        return Status::Ok();
      }
    }
  };
}

}  // namespace edgesgd::cli
