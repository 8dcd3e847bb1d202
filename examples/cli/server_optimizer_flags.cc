#include "cli/server_optimizer_flags.h"

#include <string>
#include <vector>

#include "cli/bounded_option.h"
#include "cli/flag_error.h"
#include "cli/number_checks.h"

namespace edgesgd::cli {
namespace {

constexpr ServerOptimizerKind kKinds[] = {
    ServerOptimizerKind::kFedAvg, ServerOptimizerKind::kFedAvgM, ServerOptimizerKind::kFedAdagrad,
    ServerOptimizerKind::kFedAdam, ServerOptimizerKind::kFedYogi};

ServerOptimizerKind KindNamed(const std::string& name) {
  for (const ServerOptimizerKind kind : kKinds) {
    if (ServerOptimizerName(kind) == name) return kind;
  }
  return ServerOptimizerKind::kFedAvg;  // CLI::IsMember admits only the names above
}

}  // namespace

float DefaultServerLearningRate(ServerOptimizerKind kind) {
  return IsAdaptive(kind) ? 0.01f : 1.0f;
}

void AddServerOptimizerFlags(CLI::App& command, RunFlags& o) {
  std::vector<std::string> names;
  for (const ServerOptimizerKind kind : kKinds) names.emplace_back(ServerOptimizerName(kind));
  RunFlags* flags = &o;
  command.add_option("--server-optimizer", o.server_optimizer,
                     "How the server moves the model by the round's mean update (mean "
                     "aggregation, model downlink): fedavg (x -= lr * update), fedavgm (with "
                     "momentum --server-beta1), or the adaptive fedadagrad, fedadam and fedyogi "
                     "(Reddi et al. 2021: per-coordinate steps of about --server-lr). The "
                     "server keeps 1 (fedavgm) or 2 (adaptive) model-sized vectors more")
      ->capture_default_str()
      ->check(CLI::IsMember(names));
  command
      .add_option("--server-lr", o.server_lr,
                  "The server's learning rate (default: 1 for fedavg and fedavgm, 0.01 for "
                  "the adaptive optimizers)")
      ->check(PositiveFloat())
      ->each([flags](const std::string&) { flags->server_lr_given = true; });
  const auto given = [flags](const std::string&) { flags->server_moments_given = true; };
  AddBoundedOption(command, "--server-beta1", o.server_beta1, 0.0f, 0.999999f,
                   "fedavgm's momentum; the adaptive optimizers' first-moment decay")
      ->each(given);
  AddBoundedOption(command, "--server-beta2", o.server_beta2, 0.0f, 0.999999f,
                   "fedadam's and fedyogi's second-moment decay")
      ->each([flags](const std::string&) { flags->server_beta2_given = true; });
  command
      .add_option("--server-tau", o.server_tau,
                  "The adaptive optimizers' tau: added to sqrt(v), it bounds the step where "
                  "updates are small (larger tau, less adaptive)")
      ->capture_default_str()
      ->check(PositiveFloat())
      ->each([flags](const std::string&) { flags->server_tau_given = true; });
}

bool ServerOptimizerFlagsGiven(const RunFlags& o) {
  return o.server_optimizer != RunFlags{}.server_optimizer || o.server_lr_given ||
         o.server_moments_given || o.server_beta2_given || o.server_tau_given;
}

HostResult<> CheckServerOptimizerFlags(const RunFlags& o) {
  const ServerOptimizerKind kind = KindNamed(o.server_optimizer);
  if (o.server_moments_given && kind == ServerOptimizerKind::kFedAvg) {
    return FlagError(
        "--server-beta1 needs a server optimizer with momentum (--server-optimizer fedavgm, "
        "fedadagrad, fedadam or fedyogi)");
  }
  if (o.server_beta2_given && !ReadsBeta2(kind)) {
    return FlagError("--server-beta2 needs --server-optimizer fedadam or fedyogi");
  }
  if (o.server_tau_given && !IsAdaptive(kind)) {
    return FlagError(
        "--server-tau needs an adaptive server optimizer (fedadagrad, fedadam or fedyogi)");
  }
  return {};
}

ServerOptimizerParams ServerOptimizerParamsOf(const RunFlags& o) {
  const ServerOptimizerKind kind = KindNamed(o.server_optimizer);
  return ServerOptimizerParams{
      .kind = kind,
      .learning_rate = o.server_lr_given ? o.server_lr : DefaultServerLearningRate(kind),
      .beta1 = o.server_beta1,
      .beta2 = o.server_beta2,
      .tau = o.server_tau};
}

void WriteServerOptimizerSummary(SummaryWriter& summary, const ServerOptimizerParams& params) {
  if (!ChangesFedAvg(params)) return;
  const ServerOptimizerParams server = NormalizedServerOptimizerParams(params);
  summary.Begin("server_optimizer");
  summary.Field("kind", std::string(ServerOptimizerName(server.kind)));
  summary.Field("lr", static_cast<double>(server.learning_rate));
  if (server.kind != ServerOptimizerKind::kFedAvg) {
    summary.Field("beta1", static_cast<double>(server.beta1));
  }
  if (ReadsBeta2(server.kind)) summary.Field("beta2", static_cast<double>(server.beta2));
  if (IsAdaptive(server.kind)) summary.Field("tau", static_cast<double>(server.tau));
  summary.End();
}

}  // namespace edgesgd::cli
