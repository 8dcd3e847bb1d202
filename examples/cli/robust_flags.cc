#include "cli/robust_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "cli/bounded_option.h"
#include "cli/flag_error.h"
#include "cli/number_checks.h"

namespace edgesgd::cli {
namespace {

constexpr RobustRule kRules[] = {RobustRule::kNone, RobustRule::kMedian,
                                 RobustRule::kTrimmedMean, RobustRule::kMultiKrum,
                                 RobustRule::kCenteredClipping};

bool SizedByF(RobustRule rule) {
  return rule == RobustRule::kTrimmedMean || rule == RobustRule::kMultiKrum;
}

RobustRule RuleNamed(const std::string& name) {
  for (const RobustRule rule : kRules) {
    if (RobustRuleName(rule) == name) return rule;
  }
  return RobustRule::kNone;  // CLI::IsMember admits only the names above
}

}  // namespace

void AddRobustFlags(CLI::App& command, RunFlags& o) {
  std::vector<std::string> names;
  for (const RobustRule rule : kRules) names.emplace_back(RobustRuleName(rule));
  command.add_option("--robust", o.robust,
                     "Byzantine-robust aggregation in place of the mean (model downlink): the "
                     "coordinate-wise median; the trimmed mean (drops the --robust-f largest "
                     "and smallest values of each coordinate); multi_krum (averages the n - f "
                     "updates closest to their neighbours); centered_clipping (clips each "
                     "update's distance to the last aggregate). The server keeps the round's "
                     "updates side by side: sampled workers x model floats")
      ->capture_default_str()
      ->check(CLI::IsMember(names));
  RunFlags* flags = &o;
  AddBoundedOption(command, "--robust-f", o.robust_f, 0u, 255u,
                   "f: faulty updates per round the trimmed mean and multi_krum are sized for")
      ->each([flags](const std::string&) { flags->robust_f_given = true; });
  const auto clip_given = [flags](const std::string&) { flags->robust_clip_given = true; };
  command
      .add_option("--robust-clip-radius", o.robust_clip_radius,
                  "Centered clipping: tau, the largest distance an update may move the "
                  "aggregate from the last round's")
      ->capture_default_str()
      ->check(PositiveFloat())
      ->each(clip_given);
  AddBoundedOption(command, "--robust-clip-iterations", o.robust_clip_iterations, 1u,
                   kMaxClipIterations, "Centered clipping: L, clipping passes per round")
      ->each(clip_given);
}

bool RobustFlagsGiven(const RunFlags& o) {
  return o.robust != RunFlags{}.robust || o.robust_f_given || o.robust_clip_given;
}

HostResult<> CheckRobustFlags(const RunFlags& o) {
  const RobustRule rule = RuleNamed(o.robust);
  if (o.robust_f_given && !SizedByF(rule)) {
    return FlagError(
        "--robust-f sizes the trimmed mean and multi_krum: it needs --robust trimmed_mean or "
        "--robust multi_krum");
  }
  if (o.robust_clip_given && rule != RobustRule::kCenteredClipping) {
    return FlagError(
        "--robust-clip-radius and --robust-clip-iterations tune centered clipping: they need "
        "--robust centered_clipping");
  }
  if (rule == RobustRule::kNone) return {};
  const std::uint32_t cohort =
      protocol::SampledCount(o.participation, static_cast<std::uint32_t>(o.workers));
  if (rule == RobustRule::kTrimmedMean && cohort <= 2 * std::uint64_t{o.robust_f}) {
    return FlagError(
        "--robust trimmed_mean drops --robust-f values from each end: it needs more than "
        "2f updates per round (a round samples " +
        std::to_string(cohort) + ")");
  }
  if (rule == RobustRule::kMultiKrum && cohort <= 2 * std::uint64_t{o.robust_f} + 2) {
    return FlagError(
        "--robust multi_krum needs more than 2f + 2 updates per round to tell f faulty ones "
        "apart (a round samples " +
        std::to_string(cohort) + ")");
  }
  return {};
}

RobustParams RobustParamsOf(const RunFlags& o) {
  return RobustParams{.rule = RuleNamed(o.robust),
                      .byzantine = o.robust_f,
                      .clip_radius = o.robust_clip_radius,
                      .clip_iterations = o.robust_clip_iterations};
}

void WriteRobustSummary(SummaryWriter& summary, const RobustParams& params) {
  if (params.rule == RobustRule::kNone) return;
  const RobustParams robust = NormalizedRobustParams(params);
  summary.Begin("robust");
  summary.Field("rule", std::string(RobustRuleName(robust.rule)));
  if (SizedByF(robust.rule)) summary.Field("f", robust.byzantine);
  if (robust.rule == RobustRule::kCenteredClipping) {
    summary.Field("clip_radius", static_cast<double>(robust.clip_radius));
    summary.Field("clip_iterations", robust.clip_iterations);
  }
  summary.End();
}

}  // namespace edgesgd::cli
