#pragma once

// The flags of buffered asynchronous aggregation (FedBuff) for `simulate` and `server`
// (docs/algorithms.md, buffered asynchronous aggregation): their registration, their rules against the rest of a run, the AsyncParams
// they give and the summary's "async" section.

#include <CLI/CLI.hpp>
#include <string>

#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/buffered_async.h"

namespace edgesgd::cli {

// --buffer, --staleness, --max-staleness.
void AddAsyncFlags(CLI::App& command, RunFlags& flags);

// Whether any of them was given (gossip runs refuse them).
bool AsyncFlagsGiven(const RunFlags& flags);

// Ok, or a one-line reason the flags do not fit each other or the worker count (the run checks
// which features combine).
HostResult<> CheckAsyncFlags(const RunFlags& flags);

// The parameters of the flags (CheckAsyncFlags has accepted them).
protocol::AsyncParams AsyncParamsOf(const RunFlags& flags);

// The "async" section of a summary; nothing for synchronous rounds.
void WriteAsyncSummary(SummaryWriter& summary, const protocol::AsyncParams& params);

}  // namespace edgesgd::cli
