#pragma once

// The --robust* flags of `simulate` and `server` (docs/algorithms.md, robust aggregation): their
// registration, their rules against the rest of a run, the RobustParams they give and the
// summary's "robust" section.

#include <CLI/CLI.hpp>
#include <string>

#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "edgesgd/core/robust_aggregator.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

// --robust, --robust-f, --robust-clip-radius, --robust-clip-iterations.
void AddRobustFlags(CLI::App& command, RunFlags& flags);

// Whether any --robust* flag was given (gossip runs refuse them).
bool RobustFlagsGiven(const RunFlags& flags);

// Ok, or a one-line reason the --robust* flags do not fit the rule or the cohort (the run
// checks which features combine).
HostResult<> CheckRobustFlags(const RunFlags& flags);

// The rule and parameters of the flags (CheckRobustFlags has accepted them).
RobustParams RobustParamsOf(const RunFlags& flags);

// The "robust" section of a summary: the rule and the parameters it reads; nothing for kNone.
void WriteRobustSummary(SummaryWriter& summary, const RobustParams& robust);

}  // namespace edgesgd::cli
