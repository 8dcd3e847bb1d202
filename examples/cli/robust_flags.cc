#include "cli/robust_flags.h"

#include <cstdint>
#include <string>

#include "cli/flag_error.h"

namespace edgesgd::cli {
namespace {

bool SizedByF(RobustRule rule) {
  return rule == RobustRule::kTrimmedMean || rule == RobustRule::kMultiKrum;
}

}  // namespace

HostResult<> CheckRobustCohort(const RobustParams& robust, std::uint32_t cohort) {
  if (robust.rule == RobustRule::kTrimmedMean && cohort <= 2 * std::uint64_t{robust.byzantine}) {
    return FlagError(
        "--robust trimmed_mean drops --robust-f values from each end: it needs more than "
        "2f updates per round (a round samples " +
        std::to_string(cohort) + ")");
  }
  if (robust.rule == RobustRule::kMultiKrum && cohort <= 2 * std::uint64_t{robust.byzantine} + 2) {
    return FlagError(
        "--robust multi_krum needs more than 2f + 2 updates per round to tell f faulty ones "
        "apart (a round samples " +
        std::to_string(cohort) + ")");
  }
  return {};
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
