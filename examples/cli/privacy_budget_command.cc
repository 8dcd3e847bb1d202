// `edgesgd privacy-budget`: the (epsilon, delta) differential privacy a DP-FedAvg run spends,
// or the noise multiplier it needs for a target epsilon, from the RDP accountant
// (edgesgd/core/privacy/rdp_accountant.h).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "edgesgd/core/privacy/rdp_accountant.h"

namespace edgesgd::cli {
namespace {

constexpr const char* kPrivacyBudget = "privacy-budget";

struct PrivacyBudgetFlags {
  double sampling_rate = 1;
  std::uint64_t rounds = 0;
  double delta = 1e-5;
  double noise_multiplier = 0;
  double epsilon = 0;
  bool json = false;
};

// `value` rounded up to 4 significant digits: printed, a multiplier must still meet the target.
double RoundUp4(double value) {
  const double unit = std::pow(10.0, std::floor(std::log10(value)) - 3);
  return std::ceil(value / unit) * unit;
}

// Ten significant digits; JSON has no infinity, so an unbounded epsilon is null.
std::string JsonFigure(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", value);
  return text;
}

// One line naming what was refused; exit 1 for a target no noise multiplier in range meets,
// 2 for a value out of its domain.
int Refused(Status status) {
  std::fprintf(stderr, "edgesgd %s: %s\n", kPrivacyBudget, status.reason());
  return status.code() == StatusCode::kOutOfRange ? 1 : 2;
}

int RunPrivacyBudget(const PrivacyBudgetFlags& flags, bool target_given) {
  double noise_multiplier = flags.noise_multiplier;
  if (target_given) {
    const Result<double> needed =
        NoiseMultiplierForEpsilon(flags.sampling_rate, flags.rounds, flags.epsilon, flags.delta);
    if (!needed.ok()) return Refused(needed.status());
    noise_multiplier = RoundUp4(*needed);
  }
  RdpAccountant accountant;
  if (const Status configured = accountant.Configure(flags.sampling_rate, noise_multiplier);
      !configured.ok()) {
    return Refused(configured);
  }
  accountant.AddSteps(flags.rounds);
  const Result<PrivacySpent> spent = accountant.Epsilon(flags.delta);
  if (!spent.ok()) return Refused(spent.status());

  if (flags.json) {
    std::printf(
        "{\"sampling_rate\": %s, \"rounds\": %llu, \"delta\": %s, \"noise_multiplier\": %s, "
        "\"epsilon\": %s, \"order\": %s%s}\n",
        JsonFigure(flags.sampling_rate).c_str(), static_cast<unsigned long long>(flags.rounds),
        JsonFigure(flags.delta).c_str(), JsonFigure(noise_multiplier).c_str(),
        JsonFigure(spent->epsilon).c_str(), JsonFigure(spent->order).c_str(),
        target_given ? (", \"target_epsilon\": " + JsonFigure(flags.epsilon)).c_str() : "");
    return 0;
  }
  if (target_given) {
    std::printf(
        "noise multiplier %g reaches epsilon %.4g <= %g at delta %g over %llu rounds with "
        "sampling rate %g (RDP order %g)\n",
        noise_multiplier, spent->epsilon, flags.epsilon, flags.delta,
        static_cast<unsigned long long>(flags.rounds), flags.sampling_rate, spent->order);
  } else {
    std::printf(
        "epsilon %.4g at delta %g over %llu rounds with sampling rate %g and noise multiplier "
        "%g (RDP order %g)\n",
        spent->epsilon, flags.delta, static_cast<unsigned long long>(flags.rounds),
        flags.sampling_rate, noise_multiplier, spent->order);
  }
  return 0;
}

}  // namespace

void AddPrivacyBudgetCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<PrivacyBudgetFlags>();
  CLI::App* command = app.add_subcommand(
      kPrivacyBudget,
      "Differential privacy of a DP-FedAvg run (devices sampled with probability Q each round, "
      "updates clipped and Gaussian noise added):\nthe epsilon spent at --delta for a given "
      "--noise-multiplier, or the smallest noise multiplier that keeps epsilon within "
      "--epsilon.\nRDP accountant of the subsampled Gaussian mechanism, as in TensorFlow "
      "Privacy and Opacus.");
  command
      ->add_option("--sampling-rate", flags->sampling_rate,
                   "Fraction of devices sampled each round, in (0, 1]")
      ->capture_default_str();
  command->add_option("--rounds", flags->rounds, "Number of rounds (releases of the noisy sum)")
      ->required()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000'000}));
  command->add_option("--delta", flags->delta, "delta of the (epsilon, delta) guarantee, in (0, 1)")
      ->capture_default_str();
  CLI::Option* noise = command->add_option(
      "--noise-multiplier", flags->noise_multiplier,
      "Noise standard deviation over the clipping norm: prints the epsilon spent");
  CLI::Option* target = command->add_option(
      "--epsilon", flags->epsilon, "Target epsilon: prints the smallest noise multiplier for it");
  noise->excludes(target);
  command->add_flag("--json", flags->json, "Print one JSON object instead of a sentence");
  command->callback([flags, noise, target, &exit_code] {
    if (noise->count() == 0 && target->count() == 0) {
      std::fprintf(stderr, "edgesgd %s: give --noise-multiplier Z or --epsilon E\n",
                   kPrivacyBudget);
      exit_code = 2;
      return;
    }
    exit_code = RunPrivacyBudget(*flags, target->count() > 0);
  });
}

}  // namespace edgesgd::cli
