// `edgesgd simulate`: N virtual devices in one process. The real protocol sessions (the same
// ServerSession and WorkerSession that run over TCP) exchange real frames through a
// deterministic network model in virtual time, with heterogeneous device speeds, link bandwidth
// and latency, and injected faults. Writes the metrics CSV and summary JSON of DESIGN.md.

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/gossip_topology.h"
#include "cli/metrics.h"
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

struct SimulateOptions {
  std::string task = "softmax";
  std::string data = "fashion-mnist";
  std::string split = "iid";
  std::size_t workers = 8;
  std::uint32_t rounds = 200;
  std::size_t batch = 32;
  std::uint32_t local_steps = 1;
  std::size_t dim = 100;
  std::size_t samples = 500;
  std::size_t hidden = 64;
  std::size_t train_limit = 0;
  std::uint32_t eval_every = 1;
  float lr = 0.05f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float participation = 1.0f;
  float detach = 0.3f;
  std::uint64_t seed = 1;
  std::string codec = "identity";
  CodecFlags codec_flags;
  QuantScheduleFlags quant_flags;
  std::string feedback = "ef";
  std::string optimizer = "sgd";
  std::string aggregate = "mean";
  std::string downlink = "model";
  std::string tie = "positive";
  std::string mode = "server";
  std::string topology = "ring";
  std::string gossip = "dpsgd";
  std::string gossip_weights = "metropolis";
  std::uint32_t gossip_rounds = 0;  // DeTAG's R; 0 = the recipe
  std::uint32_t phase_batches = 1;
  bool gossip_flags_given = false;  // any gossip-only flag was given
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
  std::uint32_t quorum = 0;
  double round_deadline_s = 60;
  std::string metrics;
  std::string summary;
  bool quiet = false;
  // Set when the flag was given explicitly (defaults differ per aggregation).
  bool feedback_given = false;
};

// A one-line reason for an inconsistent configuration, or empty.
std::string CheckConsistency(const SimulateOptions& o) {
  const bool majority = o.aggregate == "majority";
  if (majority && o.codec != "sign") {
    return "--aggregate majority counts 1-bit votes: it needs --codec sign";
  }
  if (majority && o.optimizer != "signum") {
    return "--aggregate majority trains with Signum on the workers: use --optimizer signum";
  }
  if (!majority && o.optimizer == "signum") {
    return "--optimizer signum sends sign votes: it needs --aggregate majority --codec sign";
  }
  if (majority && o.feedback_given && o.feedback != "none") {
    return "--aggregate majority has no error feedback (the vote is the update): drop "
           "--feedback or use --feedback none";
  }
  if (o.adversaries > 0 && !majority) {
    return "--adversaries sends negated sign votes: it needs --aggregate majority";
  }
  if (o.adversaries > o.workers) return "--adversaries cannot exceed --workers";
  if (o.mode != "gossip" && o.gossip_flags_given) {
    return "--gossip, --topology, --gossip-weights, --gossip-rounds and --phase-batches need "
           "--mode gossip";
  }
  if (o.mode == "gossip") {
    if (o.codec != "identity") {
      return "--mode gossip exchanges dense models: use --codec identity";
    }
    if (o.aggregate != "mean" || o.optimizer != "sgd") {
      return "--mode gossip runs plain SGD steps (mixing instead of a server aggregate): drop "
             "--aggregate and --optimizer";
    }
    if (o.gossip_rounds != 0 && o.gossip != "detag") {
      return "--gossip-rounds sets DeTAG's gossip steps per round: it needs --gossip detag "
             "(dpsgd and gt take one)";
    }
    if (o.feedback_given && o.feedback != "none") {
      return "--mode gossip sends uncompressed models: drop --feedback";
    }
    if (o.local_steps != 1 || o.participation != 1.0f) {
      return "--mode gossip takes one gradient step per round with every peer: drop "
             "--local-steps and --participation";
    }
  }
  if (o.quorum > o.workers) return "--quorum cannot exceed --workers";
  if (std::string why = CheckQuantScheduleFlags(o.quant_flags, o.codec_flags, o.codec);
      !why.empty()) {
    return why;
  }
  if (o.task == "logreg-toy" && o.workers != 2) {
    return "--task logreg-toy is the two-client toy: it needs --workers 2";
  }
  if ((o.task == "linreg" || o.task == "logreg-toy" || o.task == "quadratic-noise") &&
      o.data == "fashion-mnist" && o.data != "synthetic") {
    // The synthetic tasks ignore --data; nothing to reject.
  }
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

bool BuildTaskOptions(const SimulateOptions& o, TaskOptions& task, std::string& error) {
  if (o.task == "linreg") {
    task.kind = TaskKind::kLinreg;
  } else if (o.task == "logreg-toy") {
    task.kind = TaskKind::kLogregToy;
  } else if (o.task == "quadratic-noise") {
    task.kind = TaskKind::kQuadraticNoise;
  } else if (o.task == "mlp") {
    task.kind = TaskKind::kMlp;
  } else {
    task.kind = TaskKind::kSoftmax;
  }
  task.fashion_mnist = o.data == "fashion-mnist";
  if (o.split == "iid") {
    task.split = SplitKind::kIid;
  } else if (o.split == "sorted") {
    task.split = SplitKind::kSorted;
  } else if (o.split.rfind("dirichlet:", 0) == 0) {
    task.split = SplitKind::kDirichlet;
    char* end = nullptr;
    const std::string alpha = o.split.substr(10);
    task.dirichlet_alpha = std::strtof(alpha.c_str(), &end);
    if (alpha.empty() || *end != '\0' || !(task.dirichlet_alpha > 0) ||
        !std::isfinite(task.dirichlet_alpha)) {
      error = "--split dirichlet:ALPHA needs a positive number, e.g. dirichlet:0.5";
      return false;
    }
  } else {
    error = "--split must be iid, sorted or dirichlet:ALPHA";
    return false;
  }
  task.workers = o.workers;
  task.batch = o.batch;
  task.dimension = o.dim;
  task.samples = o.samples;
  task.hidden = o.hidden;
  task.train_limit = o.train_limit;
  task.seed = o.seed;
  return true;
}

protocol::RunConfig BuildRunConfig(const SimulateOptions& o, const Task& task) {
  protocol::RunConfig config;
  config.layout = task.layout();
  config.codec = o.codec_flags.ToParams();
  config.codec.kind = ParseCodecKind(o.codec).value();
  config.quant_schedule = o.quant_flags.Apply(config.codec);
  config.batch = static_cast<std::uint32_t>(task.samples_per_step(0));
  config.participation = o.participation;
  config.rounds = o.rounds;
  config.seed = o.seed;
  config.downlink =
      o.downlink == "aggregate" ? protocol::DownlinkKind::kAggregate : protocol::DownlinkKind::kModel;
  if (o.aggregate == "majority") {
    config.aggregation = protocol::AggregationKind::kMajority;
    config.codec.sign_scale = SignScale::kUnit;
    config.tie_rule = o.tie == "negative" ? TieRule::kNegative : TieRule::kPositive;
    config.optimizer = {OptimizerKind::kSignum, o.lr, o.momentum, o.weight_decay};
    config.feedback.local_steps = 1;
  } else {
    config.aggregation = protocol::AggregationKind::kMean;
    FeedbackParams& feedback = config.feedback;
    feedback.kind = o.feedback == "none"   ? FeedbackKind::kNone
                    : o.feedback == "ef"   ? FeedbackKind::kEf
                    : o.feedback == "saef" ? FeedbackKind::kSaef
                                           : FeedbackKind::kDef;  // def and defa
    feedback.detach = o.detach;
    feedback.learning_rate = o.lr;
    feedback.momentum = o.optimizer == "sgd" ? 0.0f : o.momentum;
    feedback.weight_decay = o.weight_decay;
    feedback.local_steps = o.local_steps;
  }
  return config;
}

// Memory one participant needs, itemised for the summary.
struct MemoryPlan {
  std::size_t server_arena = 0;
  std::size_t worker_arena = 0;
  std::size_t worker_feedback_state = 0;
  std::size_t worker_codec_scratch = 0;
  std::size_t worker_selection_state = 0;  // reg_top_k's posterior, part of the feedback state
  std::size_t update_payload = 0;
  std::size_t update_frame = 0;
  std::size_t broadcast_frame = 0;
};

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

bool IsTerminal() { return isatty(STDERR_FILENO) == 1; }

// The gossip algorithms of ALGORITHMS.md §6 among peers 1..n, no server. A round's row is
// written when every peer has closed it; the evaluated model is the peers' average of their
// round-start models, and `consensus` is mean_i ||x_i - mean x||^2 at that moment (a fast peer
// may already hold its next-round model). bytes_up / bytes_down are per peer (the mean over
// peers of what each sent / received), so runs compare at equal communication per worker.
int RunGossip(const SimulateOptions& o, Task& task, const std::vector<double>& speeds) {
  const std::size_t n = o.workers;
  const std::size_t d = task.dimension();
  std::string error;
  GossipTopology graph;
  if (!MakeGossipTopology(o.topology, static_cast<std::uint32_t>(n), o.seed, graph, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 2;
  }
  const protocol::Topology topology = graph.view();
  const protocol::MixingRule rule = o.gossip_weights == "uniform"
                                        ? protocol::MixingRule::kMaxDegree
                                        : protocol::MixingRule::kMetropolisHastings;
  // The spectrum of W, once: lambda sets DeTAG's eta_g and R and is reported.
  protocol::MixingSpectrum spectrum;
  std::vector<std::byte> spectrum_scratch(protocol::SpectrumScratchBytes(topology));
  if (const protocol::ConfigCheck check =
          protocol::ComputeMixingSpectrum(topology, rule, spectrum_scratch, spectrum);
      !check.ok()) {
    std::fprintf(stderr, "edgesgd simulate: --topology %s: %s\n", o.topology.c_str(),
                 check.reason);
    return 2;
  }
  const protocol::GossipAlgorithm algorithm =
      o.gossip == "gt"      ? protocol::GossipAlgorithm::kGradientTracking
      : o.gossip == "detag" ? protocol::GossipAlgorithm::kDetag
                            : protocol::GossipAlgorithm::kDpsgd;
  const bool detag = algorithm == protocol::GossipAlgorithm::kDetag;
  const std::uint32_t steps =
      !detag ? 1
             : (o.gossip_rounds != 0
                    ? o.gossip_rounds
                    : protocol::DetagGossipSteps(static_cast<std::uint32_t>(n), spectrum.lambda));
  const float eta = detag ? protocol::AcceleratedGossipRate(spectrum.lambda) : 0.0f;
  if (!o.quiet) {
    std::fprintf(stderr,
                 "edgesgd simulate: gossip %s on a %s, %s weights: lambda %.6f, spectral gap "
                 "%.6f, eta_g %.4f, R %u exchange step%s per round, B %u gradient call%s per "
                 "round\n",
                 protocol::GossipAlgorithmName(algorithm), graph.description.c_str(),
                 o.gossip_weights.c_str(), spectrum.lambda, spectrum.spectral_gap,
                 static_cast<double>(eta), steps, steps == 1 ? "" : "s", o.phase_batches,
                 o.phase_batches == 1 ? "" : "s");
  }

  std::vector<float> initial(d);
  task.InitialModel(initial);
  std::vector<std::unique_ptr<protocol::GossipPeerSession>> peers(n);
  std::vector<std::vector<std::byte>> storage(n);
  std::vector<std::unique_ptr<Arena>> arenas(n);
  std::size_t peer_arena = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<protocol::PeerId>(i + 1);
    protocol::GossipConfig config;
    config.algorithm = algorithm;
    config.mixing = protocol::MakeMixingRow(topology, rule, id).value();
    config.layout = task.layout();
    config.rounds = o.rounds;
    config.learning_rate = o.lr;
    config.gossip_steps = steps;
    config.accel = eta;
    config.phase_batches = o.phase_batches;
    config.seed = o.seed;
    config.neighbour_deadline_ns = static_cast<protocol::TimeNs>(o.round_deadline_s * 1e9);
    peer_arena = std::max(peer_arena, protocol::GossipPeerSession::ArenaBytes(config));
    storage[i].resize(protocol::GossipPeerSession::ArenaBytes(config) + kArenaAlignment);
    arenas[i] = std::make_unique<Arena>(std::span<std::byte>(storage[i]));
    protocol::GossipOptions options;
    options.gradient = &Task::GradientCallback;
    options.user = task.binding(i);
    options.samples_per_step = static_cast<std::uint32_t>(task.samples_per_step(i));
    options.initial_model = initial;
    peers[i] = std::make_unique<protocol::GossipPeerSession>();
    if (const protocol::ConfigCheck check = peers[i]->Init(*arenas[i], config, options);
        !check.ok()) {
      std::fprintf(stderr, "edgesgd simulate: peer %zu: %s\n", i + 1, check.reason);
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
        const TaskEvaluation evaluation = task.Evaluate(average);
        row.loss = evaluation.loss;
        row.accuracy = evaluation.accuracy;
        row.dist_to_opt = evaluation.log10_dist_to_opt;
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
  summary.Field("task", o.task);
  summary.Field("mode", "gossip");
  summary.Field("topology", o.topology);
  summary.Field("workers", n);
  summary.Field("rounds", o.rounds);
  summary.Field("seed", o.seed);
  summary.Field("parameters", d);
  summary.Row("final", last);
  summary.Begin("gossip");
  summary.Field("algorithm", protocol::GossipAlgorithmName(algorithm));
  summary.Field("graph", graph.description);
  summary.Field("weights", o.gossip_weights);
  summary.Field("lambda", spectrum.lambda);
  summary.Field("spectral_gap", spectrum.spectral_gap);
  summary.Field("eta_g", static_cast<double>(eta));
  summary.Field("gossip_steps", steps);
  summary.Field("phase_batches", o.phase_batches);
  summary.Field("max_degree", protocol::MaxDegree(topology));
  summary.Field("bytes", "bytes_up and bytes_down are per peer (mean over peers)");
  summary.End();
  summary.Begin("memory_plan");
  summary.Field("peer_arena_bytes", peer_arena);
  summary.End();
  if (!o.summary.empty() && !summary.Save(o.summary, error)) {
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
  TaskOptions task_options;
  std::string error;
  if (!BuildTaskOptions(o, task_options, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 2;
  }
  Task task;
  if (!task.Setup(task_options, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  if (o.mode == "gossip") return RunGossip(o, task, speeds);
  const protocol::RunConfig config = BuildRunConfig(o, task);
  if (const protocol::ConfigCheck check = protocol::ValidateRunConfig(config); !check.ok()) {
    std::fprintf(stderr, "edgesgd simulate: inconsistent configuration: %s\n", check.reason);
    return 2;
  }
  protocol::ServerOptions server_options;
  server_options.workers = static_cast<std::uint32_t>(o.workers);
  server_options.quorum = o.quorum == 0 ? 1 : o.quorum;
  server_options.round_deadline_ns =
      static_cast<protocol::TimeNs>(o.round_deadline_s * 1e9);
  server_options.liveness_timeout_ns = 3 * server_options.round_deadline_ns;
  if (const protocol::ConfigCheck check = protocol::ValidateServerOptions(server_options);
      !check.ok()) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", check.reason);
    return 2;
  }

  // Memory: one arena per participant, sized by the sessions' own plans.
  MemoryPlan plan;
  plan.server_arena = protocol::ServerSession::ArenaBytes(config, server_options);
  plan.worker_arena = protocol::WorkerSession::ArenaBytes(config);
  if (config.aggregation == protocol::AggregationKind::kMean) {
    plan.worker_feedback_state =
        ErrorFeedbackWorker::StateBytes(config.layout, config.codec, config.feedback);
    plan.worker_selection_state =
        ErrorFeedbackWorker::SelectionStateBytes(config.layout, config.codec);
  }
  plan.worker_codec_scratch = CodecScratchBytes(config.codec, config.layout);
  plan.update_payload = MaxEncodedBytes(config.codec, config.layout);
  plan.update_frame = protocol::UpdateFrameBytes(config);
  plan.broadcast_frame = protocol::BroadcastFrameBytes(config);

  std::vector<std::byte> server_storage(plan.server_arena + kArenaAlignment);
  Arena server_arena{std::span<std::byte>(server_storage)};
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  protocol::ServerSession server;
  if (const protocol::ConfigCheck check =
          server.Init(server_arena, config, server_options, initial);
      !check.ok()) {
    std::fprintf(stderr, "edgesgd simulate: server: %s\n", check.reason);
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
    options.user = task.binding(w);
    options.samples_per_step = static_cast<std::uint32_t>(task.samples_per_step(w));
    options.negate_signs = w < o.adversaries;
    if (const protocol::ConfigCheck check = workers[w]->Init(*worker_arenas[w], options);
        !check.ok()) {
      std::fprintf(stderr, "edgesgd simulate: worker %zu: %s\n", w + 1, check.reason);
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

  // DEF-A reads the model out as x - mean_i e_i (ALGORITHMS.md §2); the training dynamics are
  // DEF's.
  const bool defa = config.aggregation == protocol::AggregationKind::kMean && o.feedback == "defa";
  std::vector<float> readout(task.dimension());
  std::vector<std::span<const float>> residuals(o.workers);
  const double payload_bits_per_coord =
      8.0 * static_cast<double>(plan.update_payload) / static_cast<double>(task.dimension());

  MetricsWriter metrics;
  if (!o.metrics.empty() && !metrics.Open(o.metrics, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  MetricsRow last;
  bool have_last = false;
  network.SetObserver([&](const sim::SimEvent&) {
    protocol::RoundEvent round;
    while (server.PollRoundEvent(round)) {
      MetricsRow row;
      row.round = round.round + 1;
      row.time_s = static_cast<double>(round.time_closed) * 1e-9;
      row.bytes_up = round.bytes_up;
      row.bytes_down = round.bytes_down;
      // The mean over the round's uploads: a quantization schedule changes it every round.
      row.bits_per_coord = round.reported == 0
                               ? payload_bits_per_coord
                               : static_cast<double>(round.payload_bits) /
                                     (static_cast<double>(round.reported) *
                                      static_cast<double>(task.dimension()));
      const bool evaluate = row.round % o.eval_every == 0 || row.round == o.rounds;
      if (evaluate) {
        std::span<const float> model = server.model();
        if (defa) {
          for (std::size_t w = 0; w < o.workers; ++w) {
            residuals[w] = workers[w]->error_feedback().residual();
          }
          if (DeAveragedReadout(model, residuals, readout).ok()) model = readout;
        }
        const TaskEvaluation evaluation = task.Evaluate(model);
        row.loss = evaluation.loss;
        row.accuracy = evaluation.accuracy;
        row.dist_to_opt = evaluation.log10_dist_to_opt;
      }
      metrics.Write(row);
      progress.Update(row);
      if (evaluate) {
        last = row;
        have_last = true;
      }
    }
    protocol::RejectEvent reject;
    while (server.PollRejectEvent(reject)) {
      progress.Note("server rejected a frame from peer %u in round %u: %s", reject.peer,
                    reject.round + 1, protocol::RejectReasonName(reject.reason));
    }
  });
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
  summary.Field("task", o.task);
  summary.Field("codec", o.codec);
  summary.Field("quant_schedule", o.quant_flags.schedule);
  summary.Field("aggregate", o.aggregate);
  summary.Field("feedback", config.aggregation == protocol::AggregationKind::kMean ? o.feedback : "none");
  summary.Field("workers", o.workers);
  summary.Field("rounds", o.rounds);
  summary.Field("seed", o.seed);
  summary.Field("parameters", task.dimension());
  summary.Row("final", have_last ? last : MetricsRow{});
  summary.Begin("memory_plan");
  summary.Field("server_arena_bytes", plan.server_arena);
  summary.Field("worker_arena_bytes", plan.worker_arena);
  summary.Field("worker_error_feedback_bytes", plan.worker_feedback_state);
  summary.Field("worker_codec_scratch_bytes", plan.worker_codec_scratch);
  summary.Field("worker_selection_state_bytes", plan.worker_selection_state);
  summary.Field("update_payload_bytes", plan.update_payload);
  summary.Field("update_frame_max_bytes", plan.update_frame);
  summary.Field("broadcast_frame_max_bytes", plan.broadcast_frame);
  summary.End();
  summary.Begin("network");
  summary.Field("frames_lost", totals.frames_lost);
  summary.Field("frames_corrupted", totals.frames_corrupted);
  summary.Field("frames_duplicated", totals.frames_duplicated);
  summary.Field("frames_dropped_offline", totals.frames_dropped_offline);
  summary.Field("server_rejected_frames", counters.total_rejected());
  summary.Field("deadline_extensions", counters.deadline_extensions);
  summary.End();
  if (!o.summary.empty() && !summary.Save(o.summary, error)) {
    std::fprintf(stderr, "edgesgd simulate: %s\n", error.c_str());
    return 1;
  }
  if (!o.quiet) {
    std::fprintf(stderr,
                 "edgesgd simulate: done: %u rounds in %.1f virtual s; loss %.4f, accuracy %s; "
                 "%llu bytes up, %llu bytes down\n",
                 o.rounds, last.time_s, last.loss, FormatAccuracy(last.accuracy).c_str(),
                 static_cast<unsigned long long>(last.bytes_up),
                 static_cast<unsigned long long>(last.bytes_down));
  }
  return 0;
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
  command->add_option("--task", o->task,
                      "linreg (experiment A), logreg-toy (B), quadratic-noise (C), softmax, mlp")
      ->capture_default_str()
      ->check(CLI::IsMember({"linreg", "logreg-toy", "quadratic-noise", "softmax", "mlp"}));
  command->add_option("--data", o->data,
                      "softmax/mlp data: fashion-mnist (Debian's dataset-fashion-mnist) or "
                      "synthetic (a 10-class Gaussian mixture)")
      ->capture_default_str()
      ->check(CLI::IsMember({"synthetic", "fashion-mnist"}));
  command->add_option("--split", o->split,
                      "How softmax/mlp data is split: iid, sorted (by label, unshuffled) or "
                      "dirichlet:ALPHA")
      ->capture_default_str();
  command->add_option("--workers", o->workers, "Number of worker devices")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{protocol::kMaxWorkers}));
  command->add_option("--rounds", o->rounds, "Training rounds")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000000u));
  command->add_option("--lr", o->lr, "Learning rate (workers' step size)")->capture_default_str();
  command->add_option("--momentum", o->momentum,
                      "Momentum beta of --optimizer momentum and signum, in [0, 1)")
      ->capture_default_str();
  command->add_option("--weight-decay", o->weight_decay, "L2 weight decay")->capture_default_str();
  command->add_option("--batch", o->batch, "Samples per local step (0 = the whole local shard)")
      ->capture_default_str();
  command->add_option("--local-steps", o->local_steps,
                      "H local steps per round; the model delta is then sent (H = 1 sends "
                      "gradients)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  command->add_option("--participation", o->participation,
                      "Fraction of live workers sampled each round, in (0, 1]")
      ->capture_default_str()
      ->check(CLI::Range(1e-6f, 1.0f));
  command->add_option("--seed", o->seed, "Seed of data, model, codecs and network faults")
      ->capture_default_str();
  command->add_option("--codec", o->codec,
                      "Uplink compressor (reg_top_k: Top-k regularised by the last aggregate, "
                      "see --mu)")
      ->capture_default_str()
      ->check(CLI::IsMember(
          {"identity", "top_k", "rand_k", "random_block", "sign", "qsgd", "reg_top_k"}));
  AddCodecParameterFlags(*command, o->codec_flags);
  AddQuantScheduleFlags(*command, o->quant_flags);
  command->add_option("--feedback", o->feedback,
                      "Error feedback of --aggregate mean: none, ef, def (see --detach), saef, "
                      "or defa (DEF training, de-averaged x - mean e read-out)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "ef", "def", "saef", "defa"}))
      ->each([o](const std::string&) { o->feedback_given = true; });
  command->add_option("--detach", o->detach, "DEF detach coefficient c in [0, 1]")
      ->capture_default_str();
  command->add_option("--optimizer", o->optimizer,
                      "sgd or momentum (heavy ball on the workers, with error feedback), or "
                      "signum (with --aggregate majority)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "momentum", "signum"}));
  command->add_option("--aggregate", o->aggregate,
                      "Server aggregation: mean of decoded updates, or majority vote of signs")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "majority"}));
  command->add_option("--downlink", o->downlink,
                      "What the server broadcasts: the model, or the compressed aggregate "
                      "(identity, rand_k, random_block, or the majority vote)")
      ->capture_default_str()
      ->check(CLI::IsMember({"model", "aggregate"}));
  command->add_option("--mode", o->mode,
                      "server: a parameter server aggregates; gossip: peers mix models with "
                      "their neighbours (--gossip, --topology), dense models, no server")
      ->capture_default_str()
      ->check(CLI::IsMember({"server", "gossip"}));
  const auto gossip_given = [o](const std::string&) { o->gossip_flags_given = true; };
  command->add_option("--gossip", o->gossip,
                      "Gossip algorithm: dpsgd (mix, then a gradient step), gt (gradient "
                      "tracking: model and tracker exchanged each round) or detag (gradient "
                      "tracking with accelerated gossip over R steps per round)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dpsgd", "gt", "detag"}))
      ->each(gossip_given);
  command->add_option("--topology", o->topology,
                      "Gossip graph: ring, torus (or torus:RxC), complete, star (peer 1 the hub), "
                      "exponential (peers 2^k apart), random-regular:K[:SEED] (connected, "
                      "degree K; SEED defaults to --seed) or file:PATH (an edge list: one `I J` "
                      "pair of peer ids 1..n per line, # comments; each edge once or both ways)")
      ->capture_default_str()
      ->each(gossip_given);
  command->add_option("--gossip-weights", o->gossip_weights,
                      "Mixing matrix: metropolis (W_ij = 1/(1 + max(deg i, deg j))) or uniform "
                      "(1/(1 + max degree) on every edge: 1/3 on a ring)")
      ->capture_default_str()
      ->check(CLI::IsMember({"metropolis", "uniform"}))
      ->each(gossip_given);
  command->add_option("--gossip-rounds", o->gossip_rounds,
                      "DeTAG: accelerated gossip steps R per round; 0 = the recipe "
                      "max(1, floor(0.5 ln(n) / sqrt(1 - lambda)))")
      ->capture_default_str()
      ->check(CLI::Range(0u, protocol::kMaxGossipSteps))
      ->each(gossip_given);
  command->add_option("--phase-batches", o->phase_batches,
                      "Gossip: gradient mini-batches (of --batch samples each) averaged into "
                      "every round's gradient (DeTAG's phase batch is B = this x --batch)")
      ->capture_default_str()
      ->check(CLI::Range(1u, protocol::kMaxPhaseBatches))
      ->each(gossip_given);
  command->add_option("--tie", o->tie, "Majority vote: how a tie (even workers) resolves")
      ->capture_default_str()
      ->check(CLI::IsMember({"positive", "negative"}));
  command->add_option("--dim", o->dim, "Synthetic tasks: model dimension / features")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{10000000}));
  command->add_option("--samples", o->samples, "Synthetic tasks: samples per worker")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{10000000}));
  command->add_option("--hidden", o->hidden, "MLP hidden units")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{65536}));
  command->add_option("--train-limit", o->train_limit,
                      "Fashion-MNIST: use the first N training images (0 = all 60000)")
      ->capture_default_str();
  command->add_option("--eval-every", o->eval_every,
                      "Rounds between evaluations (loss/accuracy cells are empty in between)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000000u));
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
  command->add_option("--quorum", o->quorum,
                      "Updates a round needs once its deadline passed (0 = 1)")
      ->capture_default_str();
  command->add_option("--round-deadline-s", o->round_deadline_s,
                      "Virtual seconds a round waits for stragglers (gossip: for neighbours)")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1e9));
  command->add_option("--metrics", o->metrics, "Write one CSV row per round to FILE.csv");
  command->add_option("--summary", o->summary,
                      "Write the final row, memory plan and fault counters to FILE.json");
  command->add_flag("--quiet", o->quiet, "No progress on stderr");
  command->callback([o, &exit_code] { exit_code = RunSimulate(*o); });
}

}  // namespace edgesgd::cli
