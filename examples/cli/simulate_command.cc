// `edgesgd simulate`: N virtual devices in one process, run by sim::ServerSimulation or
// sim::GossipSimulation (the real protocol sessions in virtual time); this command turns their
// rounds into the metrics CSV, the progress line and the summary JSON.

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/attacks.h"
#include "cli/commands.h"
#include "cli/gossip_flags.h"
#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "cli/simulate_options.h"
#include "cli/task.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/sim/simulation.h"

namespace edgesgd::cli {
namespace {

constexpr const char* kSimulate = "simulate";

// "WHAT stopped after R of T rounds (REASON)", printed; returns 1.
int StoppedEarly(const char* what, const sim::SimulationResult& result, std::uint32_t rounds) {
  return Fail(kSimulate,
              std::string(what) + " stopped after " + std::to_string(result.rounds) + " of " +
                  std::to_string(rounds) + " rounds (" + sim::StopReasonName(result.stop) + ")",
              1);
}

// Gossip among peers 1..n, no server. A round's row is written once every peer completed it,
// scored on the peers' average (`consensus`: how far they are from it); bytes are per peer.
int RunGossip(const SimulateOptions& o, Task& task, std::vector<sim::SimDevice> devices) {
  HostResult<GossipPlan> built = BuildGossipPlan(o, o.workers);
  if (!built.ok()) return Fail(kSimulate, built.message(), 2);
  const GossipPlan plan = std::move(built).value();
  if (!o.quiet) PrintGossipPlan(kSimulate, o, plan);
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  const sim::GossipSimulationSettings settings =
      MakeGossipSimulation(o, task, plan, initial, std::move(devices));
  sim::GossipSimulation simulation;
  if (const HostResult<> init = simulation.Init(settings); !init.ok()) {
    return Fail(kSimulate, init.message(), 2);
  }
  MetricsWriter metrics;
  if (!o.metrics.empty()) {
    if (const HostResult<> opened = metrics.Open(o.metrics); !opened.ok()) {
      return Fail(kSimulate, opened.message(), 1);
    }
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  MetricsRow last;
  simulation.OnRound([&](const sim::GossipRound& round) {
    MetricsRow row = GossipRow(settings.peers.front(), round.round, round.time_ns, round.bytes_sent,
                               round.bytes_received);
    if (EvaluatesRound(o, row.round)) {
      const sim::PeerAverage average = simulation.Average();
      row.consensus = average.consensus;
      EvaluateInto(task, average.model, row);
      last = row;
    }
    metrics.Write(row);
    progress.Update(row);
  });
  const sim::SimulationResult result = simulation.Run();
  progress.Finish();
  if (const HostResult<> closed = metrics.Close(); !closed.ok()) {
    return Fail(kSimulate, closed.message(), 1);
  }
  if (!result.status.ok()) return Fail(kSimulate, RunFailure(result.rounds, result.status), 1);
  if (!result.finished) return StoppedEarly("gossip", result, o.rounds);
  SummaryWriter summary;
  WriteGossipRunSummary(summary, o, o.workers, task.dimension(), last);
  WriteGossipSimulation(summary, o, plan, result);
  // The model of a gossip run is the peers' average.
  HostResult<> saved = o.summary.empty() ? HostResult<>() : summary.Save(o.summary);
  if (saved.ok()) saved = SaveModel(o, result.model);
  if (!saved.ok()) return Fail(kSimulate, saved.message(), 1);
  if (!o.quiet) {
    std::fprintf(stderr,
                 "edgesgd simulate: done: %u rounds in %.1f virtual s; loss %.4f, accuracy %s, "
                 "consensus %.3g; %llu bytes sent per peer\n",
                 o.rounds, last.time_s, last.loss, FormatAccuracy(last.accuracy).c_str(),
                 last.consensus, static_cast<unsigned long long>(last.bytes_up));
  }
  return 0;
}

// A parameter server and n workers; --feedback defa scores rounds on DEF-A's read-out.
int RunServerMode(const SimulateOptions& o, Task& task, std::vector<sim::SimDevice> devices) {
  sim::ServerSimulationSettings settings;
  settings.run = BuildRunConfig(o, task);
  settings.server = BuildServerOptions(o);
  if (const int code = ValidateServerRun(kSimulate, settings.run, settings.server); code != 0) {
    return code;
  }
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  settings.initial_model = initial;
  settings.network = MakeSimConfig(o);
  settings.workers = std::move(devices);
  settings.gradient = TaskGradient(o, task);
  // By default devices that sit rounds out (sampled participation, or FedBuff's concurrency)
  // hold only what they carry between rounds while they wait.
  settings.release_idle_memory =
      o.idle_memory == "release" ||
      (o.idle_memory == "auto" && settings.run.participation < 1.0f);
  sim::ServerSimulation simulation;
  if (const HostResult<> init = simulation.Init(settings); !init.ok()) {
    return Fail(kSimulate, init.message(), 1);
  }
  MetricsWriter metrics;
  if (!o.metrics.empty()) {
    if (const HostResult<> opened = metrics.Open(o.metrics); !opened.ok()) {
      return Fail(kSimulate, opened.message(), 1);
    }
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  ServerRunOutput::Readout readout;
  if (settings.run.aggregation == protocol::AggregationKind::kMean && o.feedback == "defa") {
    readout = [&simulation](std::span<const float>) { return simulation.DeaveragedModel(); };
  }
  ServerRunOutput output(o, settings.run, task, metrics, progress, std::move(readout));
  simulation.OnRound(std::bind_front(&ServerRunOutput::OnRound, &output));
  simulation.OnReject(std::bind_front(&ServerRunOutput::OnReject, &output));
  const sim::SimulationResult result = simulation.Run();
  progress.Finish();
  if (const HostResult<> closed = metrics.Close(); !closed.ok()) {
    return Fail(kSimulate, closed.message(), 1);
  }
  if (!result.status.ok()) return Fail(kSimulate, RunFailure(result.rounds, result.status), 1);
  if (output.non_finite_loss_round() != 0) {
    return Fail(kSimulate, RunFailure(output.non_finite_loss_round() - 1,
                                      Status::DataLoss("the loss is not finite: the run diverged")),
                1);
  }
  if (!result.finished) return StoppedEarly("the run", result, o.rounds);
  SummaryWriter summary;
  WriteRunSummary(summary, o, settings.run, task.dimension(), output.last());
  if (o.attack != "none") {
    summary.Begin("attack");
    summary.Field("kind", o.attack);
    summary.Field("attackers", o.attackers);
    const AttackSettings attack{AttackKindOf(o.attack), o.attackers, o.attack_strength, o.workers,
                                o.seed};
    if (attack.kind != AttackKind::kLabelFlip) summary.Field("strength", AttackStrength(attack));
    summary.End();
  }
  WriteMemoryPlan(summary, MakeMemoryPlan(settings.run, settings.server));
  WriteSimulatedNetwork(summary, result.network, simulation.server().counters());
  if (settings.run.secure.enabled) {
    // What the devices saw of secure aggregation: values beyond --secagg-bound, messages of
    // the server they refused (each costs the device its round), and neighbours' shares that
    // did not open (dropped; the round goes on).
    std::uint64_t clipped = 0;
    std::uint64_t refused = 0;
    std::uint64_t unopened = 0;
    for (std::size_t w = 0; w < o.workers; ++w) {
      clipped += simulation.worker(w).counters().secure_clipped;
      refused += simulation.worker(w).counters().secure_errors;
      unopened += simulation.worker(w).counters().secure_shares_unopened;
    }
    summary.Begin("secure_devices");
    summary.Field("values_clipped", clipped);
    summary.Field("messages_refused", refused);
    summary.Field("shares_unopened", unopened);
    summary.End();
  }
  return FinishServerRun(kSimulate, "virtual s", o, summary, result.model, output.last());
}

int RunSimulate(SimulateOptions& o) {
  if (const HostResult<> checked = CheckSimulateConsistency(o); !checked.ok()) {
    return Fail(kSimulate, checked.message(), 2);
  }
  if (const HostResult<> resolved = ResolveAvailability(o); !resolved.ok()) {
    return Fail(kSimulate, resolved.message(), 2);
  }
  if (o.mode == "server") {
    if (const std::string warning = RunWarning(o); !warning.empty()) {
      platform::Log(platform::LogLevel::kWarning, "%s: %s", kSimulate, warning.c_str());
    }
  }
  const std::vector<double> speeds = ParseSpeeds(o.device_speeds, o.workers, o.seed);
  if (speeds.empty()) {
    return Fail(kSimulate,
                "--device-speeds must be positive numbers separated by commas, e.g. 1,0.5,2 "
                "(cycled over the workers), or lognormal:SIGMA with SIGMA in (0, 10]",
                2);
  }
  // Label flipping poisons the attackers' data, so the task carries it (cli/attacks.h).
  const std::size_t label_flippers =
      AttackKindOf(o.attack) == AttackKind::kLabelFlip ? o.attackers : 0;
  Task task;
  const TaskUse use{.label_flipped_workers = label_flippers, .compute_threads = DeviceThreads(o)};
  if (const int code = SetUpTask(kSimulate, o, o.workers, task, use); code != 0) {
    return code;
  }
  if (o.mode == "gossip") return RunGossip(o, task, MakeSimDevices(o, speeds, task));
  return RunServerMode(o, task, MakeSimDevices(o, speeds, task));
}

}  // namespace

void AddSimulateCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* command = app.add_subcommand(
      "simulate",
      "Run N virtual devices in one process: the real server and worker sessions exchange real "
      "frames over a deterministic network model in virtual time (same seed, same CSV).");
  AddSimulateFlags(*command, *o);
  command->callback([o, &exit_code] { exit_code = RunSimulate(*o); });
}

}  // namespace edgesgd::cli
