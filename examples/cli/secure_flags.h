#pragma once

// The flags of secure aggregation for `simulate` and `server` (docs/secure-aggregation.md): their
// registration, their rules against the rest of a run, the SecureAggregationParams they give
// and the summary's "secure_aggregation" section.

#include <CLI/CLI.hpp>
#include <string>

#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/secure_aggregation.h"

namespace edgesgd::cli {

// --secure-aggregation, --secagg-threshold, --secagg-neighbours, --secagg-signed,
// --secagg-bound.
void AddSecureFlags(CLI::App& command, RunFlags& flags);

// Whether any of them was given (gossip runs refuse them).
bool SecureFlagsGiven(const RunFlags& flags);

// Ok, or a one-line reason the flags do not fit each other or the worker count (the run checks
// which features combine).
HostResult<> CheckSecureFlags(const RunFlags& flags);

// The parameters of the flags (CheckSecureFlags has accepted them).
protocol::SecureAggregationParams SecureParamsOf(const RunFlags& flags);

// The "secure_aggregation" section of a summary (the parameters, and the fixed point or qsgd's
// lanes they give `workers` workers); nothing when it is off. The network section counts aborted
// rounds.
void WriteSecureSummary(SummaryWriter& summary, const protocol::RunConfig& config,
                        std::uint32_t workers);

}  // namespace edgesgd::cli
