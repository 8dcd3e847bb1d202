// `edgesgd simulate`: N virtual devices in one process. The real protocol sessions (the same
// ServerSession and WorkerSession that run over TCP) exchange real frames through a
// deterministic network model in virtual time, with heterogeneous device speeds, link bandwidth
// and latency, and injected faults. Writes the metrics CSV and summary JSON of DESIGN.md.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "cli/task.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/topology.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/sim/sim_network.h"

namespace edgesgd::cli {
namespace {

// The shared run flags plus the simulator's own: the network model and injected faults.
struct SimulateOptions : RunFlags {
  std::string mode = "server";
  double bandwidth_mbps = 0;
  double latency_ms = 0;
  std::string device_speeds = "1";
  double sample_us = 100;
  double dropout = 0;
  double dropout_epoch_s = 10;
  double loss = 0;
  double corrupt = 0;
  double duplicate = 0;
  std::uint32_t adversaries = 0;
};

// A one-line reason for an inconsistent configuration, or empty.
std::string CheckConsistency(const SimulateOptions& o) {
  if (o.mode != "gossip" && o.gossip_flags_given) {
    return "--gossip, --topology, --gossip-weights, --gossip-rounds and --phase-batches need "
           "--mode gossip";
  }
  if (o.mode == "gossip") {
    if (o.codec.codec() != CodecName(protocol::ModelCodec())) {
      return "--mode gossip exchanges dense models: use --codec identity";
    }
    if (o.aggregate != "mean" || o.optimizer != "sgd") {
      return "--mode gossip runs plain SGD steps (mixing instead of a server aggregate): drop "
             "--aggregate and --optimizer";
    }
    if (const std::string why = CheckGossipConsistency(o); !why.empty()) return why;
    if (o.feedback_given && o.feedback != "none") {
      return "--mode gossip sends uncompressed models: drop --feedback";
    }
    if (o.local_steps != 1 || o.participation != 1.0f) {
      return "--mode gossip takes one gradient step per round with every peer: drop "
             "--local-steps and --participation";
    }
  }
  if (const std::string why = CheckRunConsistency(o); !why.empty()) return why;
  if (o.adversaries > 0 && o.aggregate != "majority") {
    return "--adversaries sends negated sign votes: it needs --aggregate majority";
  }
  if (o.adversaries > o.workers) return "--adversaries cannot exceed --workers";
  return "";
}

// Parses "1,0.5,2" into speeds, cycled over the workers. Empty on error.
std::vector<double> ParseSpeeds(const std::string& text, std::size_t workers) {
  std::vector<double> listed;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    char* end = nullptr;
    const double speed = std::strtod(item.c_str(), &end);
    if (item.empty() || end == nullptr || *end != '\0' || !(speed > 0) || !std::isfinite(speed)) {
      return {};
    }
    listed.push_back(speed);
  }
  if (listed.empty()) return {};
  std::vector<double> speeds(workers);
  for (std::size_t w = 0; w < workers; ++w) speeds[w] = listed[w % listed.size()];
  return speeds;
}

// The network model of the flags: seed, compute cost per sample and injected faults.
sim::SimConfig MakeSimConfig(const SimulateOptions& o) {
  sim::SimConfig config;
  config.seed = o.seed;
  config.ns_per_sample = static_cast<protocol::TimeNs>(o.sample_us * 1e3);
  config.faults.loss = o.loss;
  config.faults.corruption = o.corrupt;
  config.faults.duplication = o.duplicate;
  config.faults.dropout = o.dropout;
  config.faults.dropout_epoch_ns = static_cast<protocol::TimeNs>(o.dropout_epoch_s * 1e9);
  return config;
}

// Every device's access link (the same for all; speeds differ per device).
sim::DeviceProfile WorkerLink(const SimulateOptions& o) {
  const auto bps = static_cast<std::uint64_t>(o.bandwidth_mbps * 1e6);
  return sim::DeviceProfile{bps, bps, static_cast<protocol::TimeNs>(o.latency_ms * 1e6), 1.0};
}

sim::DeviceProfile WithSpeed(sim::DeviceProfile profile, double speed) {
  profile.compute_speed = speed;
  return profile;
}

// The gossip algorithms of ALGORITHMS.md §6 among peers 1..n, no server. A round's row is
// written when every peer has closed it; the evaluated model is the peers' average of their
// round-start models, and `consensus` is mean_i ||x_i - mean x||^2 at that moment (a fast peer
// may already hold its next-round model). bytes_up / bytes_down are per peer (the mean over
// peers of what each sent / received), so runs compare at equal communication per worker.
int RunGossip(const SimulateOptions& o, Task& task, const std::vector<double>& speeds) {
  const std::size_t n = o.workers;
  const std::size_t d = task.dimension();
  GossipPlan plan;
  std::string error;
  if (!BuildGossipPlan(o, n, plan, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 2;
  }
  if (!o.quiet) PrintGossipPlan("simulate", o, plan);
  std::vector<float> initial(d);
  task.InitialModel(initial);
  std::vector<std::unique_ptr<protocol::GossipPeerSession>> peers(n);
  std::vector<std::vector<std::byte>> storage(n);
  std::vector<std::unique_ptr<Arena>> arenas(n);
  std::size_t peer_arena = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<protocol::PeerId>(i + 1);
    const protocol::GossipConfig config = BuildGossipConfig(o, task, plan, id);
    peer_arena = std::max(peer_arena, protocol::GossipPeerSession::ArenaBytes(config));
    storage[i].resize(protocol::GossipPeerSession::ArenaBytes(config) + kArenaAlignment);
    arenas[i] = std::make_unique<Arena>(std::span<std::byte>(storage[i]));
    protocol::GossipOptions options;
    options.gradient = &Task::GradientCallback;
    options.user = task.binding(i);
    options.samples_per_step = static_cast<std::uint32_t>(task.samples_per_step(i));
    options.initial_model = initial;
    peers[i] = std::make_unique<protocol::GossipPeerSession>();
    if (const Status check = peers[i]->Init(*arenas[i], config, options);
        !check.ok()) {
      std::fprintf(stderr, "edgesgd simulate: peer %zu: %s\n", i + 1, check.reason());
      return 2;
    }
  }
  sim::SimNetwork network(MakeSimConfig(o));
  const sim::DeviceProfile link = WorkerLink(o);
  for (std::size_t i = 0; i < n; ++i) {
    network.AddSession(static_cast<protocol::PeerId>(i + 1), *peers[i],
                       WithSpeed(link, speeds[i]));
  }

  MetricsWriter metrics;
  if (!o.metrics.empty() && !metrics.Open(o.metrics, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  std::vector<std::uint32_t> closed(o.rounds, 0);
  std::vector<std::uint64_t> bytes_sent(n, 0), bytes_received(n, 0);
  std::vector<float> average(d);
  std::uint32_t next_row = 0;
  MetricsRow last;
  network.SetObserver([&](const sim::SimEvent&) {
    for (std::size_t i = 0; i < n; ++i) {
      protocol::GossipRoundEvent event;
      while (peers[i]->PollRoundEvent(event)) {
        if (event.round < closed.size()) ++closed[event.round];
        bytes_sent[i] = event.bytes_sent;
        bytes_received[i] = event.bytes_received;
      }
    }
    while (next_row < o.rounds && closed[next_row] == n) {
      MetricsRow row;
      row.round = next_row + 1;
      row.time_s = static_cast<double>(network.now()) * 1e-9;
      std::uint64_t sent = 0;
      std::uint64_t received = 0;
      for (std::size_t i = 0; i < n; ++i) {
        sent += bytes_sent[i];
        received += bytes_received[i];
      }
      row.bytes_up = sent / n;
      row.bytes_down = received / n;
      row.bits_per_coord = 32.0;
      if (row.round % o.eval_every == 0 || row.round == o.rounds) {
        std::fill(average.begin(), average.end(), 0.0f);
        for (const auto& peer : peers) {
          const std::span<const float> x = peer->model();
          for (std::size_t k = 0; k < d; ++k) average[k] += x[k] / static_cast<float>(n);
        }
        double consensus = 0;
        for (const auto& peer : peers) {
          const std::span<const float> x = peer->model();
          for (std::size_t k = 0; k < d; ++k) {
            const double diff = static_cast<double>(x[k]) - static_cast<double>(average[k]);
            consensus += diff * diff;
          }
        }
        row.consensus = consensus / static_cast<double>(n);
        EvaluateInto(task, average, row);
        last = row;
      }
      metrics.Write(row);
      progress.Update(row);
      ++next_row;
    }
  });
  const sim::StopReason stop = network.Run();
  progress.Finish();
  if (!metrics.Close(error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  if (next_row < o.rounds) {
    std::fprintf(stderr, "edgesgd simulate: gossip stopped after %u of %u rounds (%s)\n",
                 next_row, o.rounds, sim::StopReasonName(stop));
    return 1;
  }
  SummaryWriter summary;
  WriteGossipRunSummary(summary, o, n, d, last);
  summary.Begin("memory_plan");
  summary.Field("peer_arena_bytes", peer_arena);
  summary.End();
  summary.Begin("gossip");
  WriteGossipPlanFields(summary, o, plan);
  summary.End();
  // The model of a gossip run is the peers' average.
  if ((!o.summary.empty() && !summary.Save(o.summary, error)) || !SaveModel(o, average, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  if (!o.quiet) {
    std::fprintf(stderr,
                 "edgesgd simulate: done: %u rounds in %.1f virtual s; loss %.4f, accuracy %s, "
                 "consensus %.3g; %llu bytes sent per peer\n",
                 o.rounds, last.time_s, last.loss, FormatAccuracy(last.accuracy).c_str(),
                 last.consensus, static_cast<unsigned long long>(last.bytes_up));
  }
  return 0;
}

int RunSimulate(const SimulateOptions& o) {
  if (const std::string why = CheckConsistency(o); !why.empty()) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", why.c_str());
    return 2;
  }
  const std::vector<double> speeds = ParseSpeeds(o.device_speeds, o.workers);
  if (speeds.empty()) {
    std::fprintf(stderr,
                 "edgesgd simulate: --device-speeds must be positive numbers separated by "
                 "commas, e.g. 1,0.5,2 (cycled over the workers)\n");
    return 2;
  }
  Task task;
  if (const int code = SetUpTask("simulate", o, o.workers, task); code != 0) return code;
  if (o.mode == "gossip") return RunGossip(o, task, speeds);
  const protocol::RunConfig config = BuildRunConfig(o, task);
  const protocol::ServerOptions server_options = BuildServerOptions(o);
  if (const int code = ValidateServerRun("simulate", config, server_options); code != 0) {
    return code;
  }
  std::string error;

  // Memory: one arena per participant, sized by the sessions' own plans.
  const MemoryPlan plan = MakeMemoryPlan(config, server_options);
  std::vector<std::byte> server_storage(plan.server_arena + kArenaAlignment);
  Arena server_arena{std::span<std::byte>(server_storage)};
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  protocol::ServerSession server;
  if (const Status check =
          server.Init(server_arena, AllCodecs(), config, server_options, initial);
      !check.ok()) {
    std::fprintf(stderr, "edgesgd simulate: server: %s\n", check.reason());
    return 1;
  }
  std::vector<std::vector<std::byte>> worker_storage(o.workers);
  std::vector<std::unique_ptr<Arena>> worker_arenas(o.workers);
  std::vector<std::unique_ptr<protocol::WorkerSession>> workers(o.workers);
  for (std::size_t w = 0; w < o.workers; ++w) {
    worker_storage[w].resize(plan.worker_arena + kArenaAlignment);
    worker_arenas[w] = std::make_unique<Arena>(std::span<std::byte>(worker_storage[w]));
    workers[w] = std::make_unique<protocol::WorkerSession>();
    protocol::WorkerOptions options;
    options.device_id = static_cast<std::uint32_t>(w + 1);
    options.gradient = &Task::GradientCallback;
    options.codecs = &AllCodecs();
    options.user = task.binding(w);
    options.samples_per_step = static_cast<std::uint32_t>(task.samples_per_step(w));
    options.negate_signs = w < o.adversaries;
    if (const Status check = workers[w]->Init(*worker_arenas[w], options);
        !check.ok()) {
      std::fprintf(stderr, "edgesgd simulate: worker %zu: %s\n", w + 1, check.reason());
      return 1;
    }
  }

  sim::SimNetwork network(MakeSimConfig(o));
  const sim::DeviceProfile link = WorkerLink(o);
  network.AddSession(protocol::kServerPeer, server, sim::DeviceProfile{0, 0, 0, 1.0});
  for (std::size_t w = 0; w < o.workers; ++w) {
    network.AddSession(static_cast<protocol::PeerId>(w + 1), *workers[w],
                       WithSpeed(link, speeds[w]));
  }

  MetricsWriter metrics;
  if (!o.metrics.empty() && !metrics.Open(o.metrics, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  // DEF-A reads the model out as x - mean_i e_i (ALGORITHMS.md §2); the training dynamics are
  // DEF's.
  ServerRunOutput::Readout defa_readout;
  std::vector<float> readout(task.dimension());
  std::vector<std::span<const float>> residuals(o.workers);
  if (config.aggregation == protocol::AggregationKind::kMean && o.feedback == "defa") {
    defa_readout = [&](std::span<const float> model) {
      for (std::size_t w = 0; w < o.workers; ++w) {
        residuals[w] = workers[w]->error_feedback().residual();
      }
      return DeAveragedReadout(model, residuals, readout).ok() ? std::span<const float>(readout)
                                                               : model;
    };
  }
  ServerRunOutput output(o, config, task, metrics, progress, std::move(defa_readout));
  network.SetObserver([&](const sim::SimEvent&) { output.Drain(server); });
  const sim::StopReason stop = network.Run();
  progress.Finish();
  if (!metrics.Close(error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  if (!server.Finished()) {
    std::fprintf(stderr, "edgesgd simulate: the run stopped after %u of %u rounds (%s)\n",
                 server.round(), o.rounds, sim::StopReasonName(stop));
    return 1;
  }

  const sim::DeviceCounters totals = network.TotalCounters();
  const protocol::ServerCounters& counters = server.counters();
  SummaryWriter summary;
  WriteRunSummary(summary, o, config, task.dimension(), output.last());
  WriteMemoryPlan(summary, plan);
  summary.Begin("network");
  summary.Field("frames_lost", totals.frames_lost);
  summary.Field("frames_corrupted", totals.frames_corrupted);
  summary.Field("frames_duplicated", totals.frames_duplicated);
  summary.Field("frames_dropped_offline", totals.frames_dropped_offline);
  summary.Field("server_rejected_frames", counters.total_rejected());
  summary.Field("deadline_extensions", counters.deadline_extensions);
  summary.End();
  return FinishServerRun("simulate", "virtual s", o, summary, server.model(), output.last());
}

}  // namespace

void AddSimulateCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* command = app.add_subcommand(
      "simulate",
      "Run N virtual devices in one process: the real server and worker sessions exchange real "
      "frames over a deterministic network model in virtual time (same seed, same CSV).");
  // Consumed before parsing by ExpandConfigFiles (main.cc); registered here for --help.
  command->add_option("--config", "Read flags from a TOML file of `flag = value` lines; flags on "
                                  "the command line override it");
  // A flag given twice (in the config file and on the command line) takes the last value.
  command->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  AddDataFlags(*command, *o);
  AddSeedFlag(*command, *o);
  AddTrainingFlags(*command, *o,
                   "Virtual seconds a round waits for stragglers (gossip: for neighbours)");
  command->add_option("--mode", o->mode,
                      "server: a parameter server aggregates; gossip: peers mix models with "
                      "their neighbours (--gossip, --topology), dense models, no server")
      ->capture_default_str()
      ->check(CLI::IsMember({"server", "gossip"}));
  AddGossipFlags(*command, *o);
  command->add_option("--bandwidth-mbps", o->bandwidth_mbps,
                      "Every worker's uplink and downlink, Mbit/s (0 = unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  command->add_option("--latency-ms", o->latency_ms, "One-way link latency, ms")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  command->add_option("--device-speeds", o->device_speeds,
                      "Relative compute speeds, comma-separated, cycled over the workers "
                      "(e.g. 1,1,0.5,0.25)")
      ->capture_default_str();
  command->add_option("--sample-us", o->sample_us,
                      "Compute time of one training sample on a speed-1 device, microseconds")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  command->add_option("--dropout", o->dropout,
                      "Probability a worker is offline for a drop-out epoch (see "
                      "--dropout-epoch-s)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--dropout-epoch-s", o->dropout_epoch_s, "Length of a drop-out epoch")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1e9));
  command->add_option("--loss", o->loss, "Probability a frame is lost")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--corrupt", o->corrupt, "Probability a frame arrives with flipped bits")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--duplicate", o->duplicate, "Probability a frame arrives twice")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--adversaries", o->adversaries,
                      "Majority vote: this many workers send negated signs")
      ->capture_default_str();
  AddOutputFlags(*command, *o);
  command->callback([o, &exit_code] { exit_code = RunSimulate(*o); });
}

}  // namespace edgesgd::cli
