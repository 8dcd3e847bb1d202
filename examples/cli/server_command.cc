// `edgesgd server`: the parameter server of a run over TCP, a tcp::Server of the flags' run. It
// owns the run: the training flags become the RunConfig every worker receives in its Welcome.
// Metrics rows and the summary are simulate's, with wall-clock seconds.

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/codec_flags.h"
#include "cli/commands.h"
#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "cli/signing_keys.h"
#include "cli/task.h"
#include "cli/tcp_flags.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/tcp/server.h"

namespace edgesgd::cli {
namespace {

constexpr const char* kServer = "server";

int RunServer(const ServerFlags& o) {
  tcp::ServerSettings settings;
  HostResult<tcp::Endpoint> listen = tcp::ParseEndpoint(o.listen);
  if (!listen.ok()) return Fail(kServer, "--listen " + listen.message(), 2);
  settings.listen = *listen;
  AuthKeys keys;
  if (const HostResult<> loaded = LoadAuthKeys(o.network, 0, KeysKept::kEveryDevice, keys);
      !loaded.ok()) {
    return Fail(kServer, loaded.message(), 2);
  }
  if (o.resume && o.checkpoint.empty()) return Fail(kServer, "--resume needs --checkpoint FILE", 2);
  if (const HostResult<> checked = CheckRunConsistency(o); !checked.ok()) {
    return Fail(kServer, checked.message(), 2);
  }
  if (const std::string warning = RunWarning(o); !warning.empty()) {
    platform::Log(platform::LogLevel::kWarning, "%s: %s", kServer, warning.c_str());
  }
  if (o.feedback == "defa") {
    return Fail(kServer,
                "--feedback defa scores the de-averaged model x - mean e, which needs every "
                "worker's residual: only simulate holds them; use --feedback def (the same "
                "training)",
                2);
  }
  Task task;
  if (const int code = SetUpTask(kServer, o, o.workers, task, {.evaluates_only = true});
      code != 0) {
    return code;
  }
  settings.run = BuildRunConfig(o, task);
  settings.server = BuildServerOptions(o);
  SecureSigning signing;
  if (o.secagg_signed != !o.secagg_verifying_keys.empty()) {
    return Fail(kServer,
                o.secagg_signed ? "--secagg-signed needs --secagg-verifying-keys FILE (`edgesgd "
                                  "keygen --verifying-keys`)"
                                : "--secagg-verifying-keys is for signed rounds: add "
                                  "--secagg-signed",
                2);
  }
  if (o.secagg_signed) {
    if (const HostResult<> loaded =
            LoadServerSigning(o.secagg_verifying_keys, static_cast<std::uint32_t>(o.workers),
                              "--secagg-verifying-keys", signing);
        !loaded.ok()) {
      return Fail(kServer, loaded.message(), 2);
    }
    settings.server.secure_verifier = &*signing.verifier;
  }
  if (const int code = ValidateServerRun(kServer, settings.run, settings.server); code != 0) {
    return code;
  }
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  settings.initial_model = initial;
  settings.network = NetworkOptions(o.network, o.seed, kServer, keys);
  settings.checkpoint = o.checkpoint;
  settings.checkpoint_every = o.checkpoint_every;
  settings.resume = o.resume;
  tcp::Server server;
  if (const HostResult<> opened = server.Open(settings); !opened.ok()) {
    // A checkpoint of another run: name the flag that changed rather than the setting.
    if (const std::string_view differs = server.resume_differs_in(); !differs.empty()) {
      const std::string flag =
          differs == "model" ? "the model (--task, --data, --dim, --hidden, --model)" : FlagOf(differs);
      return Fail(kServer,
                  "cannot resume from checkpoint " + o.checkpoint +
                      ": it belongs to another run: it differs in " + flag,
                  1);
    }
    return Fail(kServer, opened.message(), 1);
  }
  if (const HostResult<> written = WritePortFile(o.network, server.listen_port()); !written.ok()) {
    return Fail(kServer, written.message(), 1);
  }
  if (!o.quiet) {
    std::fprintf(stderr, "edgesgd server: listening on %s:%u for %zu workers\n",
                 settings.listen.host.c_str(), server.listen_port(), o.workers);
  }

  MetricsWriter metrics;
  if (!o.metrics.empty()) {
    if (const HostResult<> opened = metrics.Open(o.metrics); !opened.ok()) {
      return Fail(kServer, opened.message(), 1);
    }
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  ServerRunOutput output(o, settings.run, task, metrics, progress);
  server.OnRound(std::bind_front(&ServerRunOutput::OnRound, &output));
  server.OnReject(std::bind_front(&ServerRunOutput::OnReject, &output));
  WarnIfUnauthenticated(o.network, kServer);
  if (o.secure_aggregation && !o.secagg_signed) {
    platform::Log(platform::LogLevel::kWarning,
                  "%s: secure aggregation without --secagg-signed: devices trust this server's "
                  "survivor lists and key rosters (docs/security.md)",
                  kServer);
  }
  const tcp::DriverStop stop = server.Run();
  progress.Finish();
  if (const HostResult<> closed = metrics.Close(); !closed.ok()) {
    return Fail(kServer, closed.message(), 1);
  }
  // A checkpoint failed.
  if (!server.status().ok()) return Fail(kServer, server.status().message(), 1);
  const protocol::ServerSession& session = server.session();
  if (stop != tcp::DriverStop::kFinished || !session.Finished()) {
    char detail[160];
    std::snprintf(detail, sizeof(detail), " after %u of %u rounds%s", session.round(), o.rounds,
                  o.checkpoint.empty() ? "" : " (resume with --resume)");
    const int code = ExitCodeFor(stop, kServer, detail);
    return code == 0 ? 1 : code;
  }
  if (!session.status().ok()) return Fail(kServer, RunFailure(session.round(), session.status()), 1);
  if (output.non_finite_loss_round() != 0) {
    return Fail(kServer, RunFailure(output.non_finite_loss_round() - 1,
                                    Status::DataLoss("the loss is not finite: the run diverged")),
                1);
  }
  SummaryWriter summary;
  WriteRunSummary(summary, o, settings.run, task.dimension(), output.last());
  WriteMemoryPlan(summary, MakeMemoryPlan(settings.run, settings.server));
  WriteServerNetwork(summary, o.network, session, server.network_counters());
  return FinishServerRun(kServer, "s", o, summary, session.model(), output.last());
}

}  // namespace

void AddServerCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServerFlags>();
  CLI::App* command = app.add_subcommand(
      "server",
      "Parameter server over TCP: owns the run's configuration (sent to every worker in its "
      "Welcome), aggregates updates, checkpoints, writes metrics with wall-clock seconds.");
  AddServerFlags(*command, *o);
  command->callback([o, &exit_code] { exit_code = RunServer(*o); });
}

}  // namespace edgesgd::cli
