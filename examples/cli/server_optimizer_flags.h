#pragma once

// The --server-* flags of `simulate` and `server` (docs/algorithms.md, server optimizers): their
// registration, their rules against the rest of a run, the ServerOptimizerParams they give and
// the summary's "server_optimizer" section.

#include <CLI/CLI.hpp>
#include <string>

#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "edgesgd/core/server_optimizer.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

// The learning rate of a server optimizer when --server-lr is not given: 1 for FedAvg and
// FedAvgM, 0.01 for the adaptive ones, whose steps are about eta per coordinate.
float DefaultServerLearningRate(ServerOptimizerKind kind);

// --server-optimizer, --server-lr, --server-beta1, --server-beta2, --server-tau.
void AddServerOptimizerFlags(CLI::App& command, RunFlags& flags);

// Whether any --server-* optimizer flag was given (gossip runs refuse them).
bool ServerOptimizerFlagsGiven(const RunFlags& flags);

// Ok, or a one-line reason the flags do not fit the optimizer (the run checks which features
// combine).
HostResult<> CheckServerOptimizerFlags(const RunFlags& flags);

// The optimizer and parameters of the flags (CheckServerOptimizerFlags has accepted them).
ServerOptimizerParams ServerOptimizerParamsOf(const RunFlags& flags);

// The "server_optimizer" section of a summary: the optimizer and the parameters it reads;
// nothing for plain FedAvg (learning rate 1).
void WriteServerOptimizerSummary(SummaryWriter& summary, const ServerOptimizerParams& params);

}  // namespace edgesgd::cli
