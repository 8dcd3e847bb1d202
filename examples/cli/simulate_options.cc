#include "cli/simulate_options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <utility>

#include "cli/attacks.h"
#include "cli/bounded_option.h"
#include "cli/config_file.h"
#include "cli/flag_error.h"
#include "cli/gossip_flags.h"
#include "edgesgd/core/random.h"

namespace edgesgd::cli {

void AddSimulateFlags(CLI::App& command, SimulateOptions& o) {
  AddConfigFlag(command);
  AddDataFlags(command, o);
  AddSeedFlag(command, o);
  AddTrainingFlags(command, o,
                   "Virtual seconds a round waits for stragglers (gossip: for neighbours; "
                   "--buffer: before a silent worker is replaced)");
  command.add_option("--mode", o.mode,
                     "server: a parameter server aggregates; gossip: peers mix models with "
                     "their neighbours (--gossip, --topology), no server; dense models, or "
                     "compressed ones with --gossip choco or beer")
      ->capture_default_str()
      ->check(CLI::IsMember({"server", "gossip"}));
  AddGossipFlags(command, o);
  AddBoundedOption(command, "--bandwidth-mbps", o.bandwidth_mbps, 0.0, 1e6,
                   "Every worker's uplink and downlink, Mbit/s (0 = unlimited)");
  AddBoundedOption(command, "--latency-ms", o.latency_ms, 0.0, 1e6, "One-way link latency, ms");
  command.add_option("--device-speeds", o.device_speeds,
                     "Relative compute speeds, comma-separated, cycled over the workers "
                     "(e.g. 1,1,0.5,0.25), or lognormal:SIGMA for heavy-tailed speeds exp(-SIGMA "
                     "z), z standard normal, drawn from --seed")
      ->capture_default_str();
  AddBoundedOption(command, "--sample-us", o.sample_us, 0.0, 1e9,
                   "Compute time of one training sample on a speed-1 device, microseconds");
  AddBoundedOption(command, "--local-time-budget-ms", o.local_time_budget_ms, 0.0, 1e9,
                   "Compute time a worker may spend on a round's local steps, ms: a worker "
                   "whose speed fits fewer than --local-steps in it takes that many (at least "
                   "one), so slow devices do less work. 0: every worker takes all of them");
  AddBoundedOption(command, "--threads", o.threads, 0u, sim::kMaxDeviceThreads,
                   "Threads the devices compute on (server mode): the devices a round reaches "
                   "at one instant train in parallel, and the run is the same byte for byte "
                   "whatever the count. 0: one per core; gossip runs and --attack use one");
  command.add_option("--idle-memory", o.idle_memory,
                     "What a device does with its working buffers (model copy, gradient, local "
                     "model) between its rounds (server mode): release gives their pages back, "
                     "so a fleet holds only what devices carry from round to round (residuals, "
                     "momentum, last update) at the cost of page faults when a device trains "
                     "again; keep keeps them. auto releases when --participation is below 1. "
                     "The run is the same either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "release", "keep"}));
  AddBoundedOption(command, "--dropout", o.dropout, 0.0, 1.0,
                   "Probability a worker is offline for a drop-out epoch (see "
                   "--dropout-epoch-s)");
  AddBoundedOption(command, "--dropout-epoch-s", o.dropout_epoch_s, 1e-6, 1e9,
                   "Length of a drop-out epoch");
  AddJoinTimeoutFlag(command, o);
  command.add_option("--availability", o.availability,
                     "When devices are online: always; diurnal:PERIOD_S,ONLINE (each device "
                     "online for the fraction ONLINE of every PERIOD_S virtual seconds, at a "
                     "phase of its own drawn from --seed); or trace:FILE, lines 'DEVICE START_S "
                     "END_S' giving each listed device's online intervals (unlisted devices are "
                     "always online)")
      ->capture_default_str();
  AddBoundedOption(command, "--loss", o.loss, 0.0, 1.0, "Probability a frame is lost");
  AddBoundedOption(command, "--corrupt", o.corrupt, 0.0, 1.0,
                   "Probability a frame arrives with flipped bits");
  AddBoundedOption(command, "--duplicate", o.duplicate, 0.0, 1.0,
                   "Probability a frame arrives twice");
  command.add_option("--attack", o.attack,
                     "Byzantine workers 1..--attackers replace their gradient: sign_flip (-s g), "
                     "scale (s g), gaussian (N(0, s^2) noise), alie (mean - z std of the honest "
                     "gradients, 'a little is enough'), ipm (-s mean: inner-product "
                     "manipulation) or label_flip (the gradient on their own shard with every "
                     "label y read as classes - 1 - y; softmax and mlp); what they send then "
                     "goes through the run's codec and feedback like an honest gradient")
      ->capture_default_str()
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kAttackNames),
                                                     std::end(kAttackNames))));
  command.add_option("--attackers", o.attackers, "How many workers attack (workers 1..N)")
      ->capture_default_str();
  AddBoundedOption(command, "--attack-strength", o.attack_strength, 0.0f, 1e6f,
                   "s of the attack (0 = its default: sign_flip 1, scale 10, gaussian 1, "
                   "ipm 0.1, alie the largest z that stays inside the honest spread; "
                   "label_flip has none)");
  AddOutputFlags(command, o);
}

HostResult<> CheckSimulateConsistency(const SimulateOptions& o) {
  if (o.mode != "gossip" && o.gossip_flags_given) {
    return FlagError(
        "--gossip, --topology, --gossip-weights, --gossip-rounds, --phase-batches, "
        "--consensus-step and --no-public-copies need --mode gossip");
  }
  if (o.mode == "gossip") {
    EDGESGD_HOST_TRY(CheckGossipConsistency(o));
    if (o.local_time_budget_ms > 0.0) {
      return FlagError(
          "--local-time-budget-ms limits the local steps of a server run's workers: gossip "
          "peers take one step per phase");
    }
  }
  EDGESGD_HOST_TRY(CheckRunConsistency(o));
  if ((o.attack == "none") != (o.attackers == 0)) {
    return FlagError(
        "--attack and --attackers go together: name the attack and how many workers run it");
  }
  if (o.attack_strength != 0.0f && o.attack == "none") {
    return FlagError("--attack-strength needs --attack");
  }
  if (o.attack == "label_flip") {
    if (o.task != "softmax" && o.task != "mlp") {
      return FlagError("--attack label_flip needs a classification task (--task softmax or mlp)");
    }
    if (o.attack_strength != 0.0f) {
      return FlagError(
          "--attack-strength does not apply to --attack label_flip (its attackers train on "
          "flipped labels: there is no strength to set)");
    }
  }
  if (o.attackers >= o.workers) {
    return FlagError("--attackers must leave at least one honest worker (fewer than --workers)");
  }
  if (o.mode == "gossip" && o.attack != "none") {
    return FlagError(
        "--attack makes parameter-server workers Byzantine: gossip runs do not take it");
  }
  return {};
}

std::vector<double> ParseSpeeds(const std::string& text, std::size_t workers,
                                std::uint64_t seed) {
  std::vector<double> speeds(workers);
  constexpr char kLognormal[] = "lognormal:";
  if (text.rfind(kLognormal, 0) == 0) {
    char* end = nullptr;
    const char* sigma_text = text.c_str() + sizeof(kLognormal) - 1;
    const double sigma = std::strtod(sigma_text, &end);
    if (*sigma_text == '\0' || end == nullptr || *end != '\0' || !(sigma > 0) || sigma > 10) {
      return {};
    }
    // speed = exp(-sigma z), z standard normal (Box-Muller over the run's seed): compute times
    // exp(sigma z) with the heavy tail of real fleets, the same devices for the same seed.
    CounterRng rng(seed, 0, 1, StreamId(RandomPurpose::kUser));
    const auto uniform = [&rng] { return (rng.NextU32() + 1.0) / 4294967296.0; };  // (0, 1]
    for (double& speed : speeds) {
      const double z = std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
      speed = std::exp(-sigma * z);
    }
    return speeds;
  }
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
  for (std::size_t w = 0; w < workers; ++w) speeds[w] = listed[w % listed.size()];
  return speeds;
}

sim::SimConfig MakeSimConfig(const SimulateOptions& o) {
  sim::SimConfig config;
  config.seed = o.seed;
  config.ns_per_sample = static_cast<protocol::TimeNs>(o.sample_us * 1e3);
  config.faults.loss = o.loss;
  config.faults.corruption = o.corrupt;
  config.faults.duplication = o.duplicate;
  config.faults.dropout = o.dropout;
  config.faults.dropout_epoch_ns = static_cast<protocol::TimeNs>(o.dropout_epoch_s * 1e9);
  config.faults.diurnal_period_ns = static_cast<protocol::TimeNs>(o.diurnal_period_s * 1e9);
  config.faults.diurnal_online = o.diurnal_online;
  config.faults.availability = o.availability_trace;
  config.device_threads = DeviceThreads(o);
  return config;
}

namespace {

HostResult<std::vector<sim::OnlineInterval>> ReadAvailabilityTrace(const std::string& path,
                                                                   std::size_t workers) {
  std::vector<sim::OnlineInterval> trace;
  std::ifstream file(path);
  if (!file) {
    return FlagError("--availability trace:" + path + ": cannot open the file");
  }
  std::string line;
  for (std::size_t number = 1; std::getline(file, line); ++number) {
    const std::string where = "--availability trace:" + path + ":" + std::to_string(number) + ": ";
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    double device = 0;
    double start = 0;
    double end = 0;
    std::string extra;
    if ((fields >> std::ws).eof()) continue;  // blank or comment
    if (!(fields >> device >> start >> end) || (fields >> extra)) {
      return FlagError(where + "expected 'DEVICE START_S END_S'");
    }
    if (device != std::floor(device) || device < 1 || device > static_cast<double>(workers)) {
      return FlagError(where + "the device must be a worker number in 1.." +
                       std::to_string(workers));
    }
    if (!(start >= 0 && end > start && end <= 1e9)) {
      return FlagError(where + "the interval must have 0 <= START_S < END_S <= 1e9");
    }
    trace.push_back({static_cast<protocol::PeerId>(device),
                     static_cast<protocol::TimeNs>(start * 1e9),
                     static_cast<protocol::TimeNs>(end * 1e9)});
  }
  std::sort(trace.begin(), trace.end(), [](const auto& a, const auto& b) {
    return a.device != b.device ? a.device < b.device : a.start_ns < b.start_ns;
  });
  for (std::size_t i = 1; i < trace.size(); ++i) {
    if (trace[i].device == trace[i - 1].device && trace[i].start_ns < trace[i - 1].end_ns) {
      return FlagError("--availability trace:" + path + ": device " +
                       std::to_string(trace[i].device) + " has overlapping intervals");
    }
  }
  return trace;
}

}  // namespace

HostResult<> ResolveAvailability(SimulateOptions& o) {
  o.diurnal_period_s = 0;
  o.diurnal_online = 1;
  o.availability_trace.clear();
  const std::string& text = o.availability;
  if (text == "always") return {};
  if (text.rfind("trace:", 0) == 0) {
    HostResult<std::vector<sim::OnlineInterval>> trace =
        ReadAvailabilityTrace(text.substr(6), o.workers);
    if (!trace.ok()) return std::move(trace).error();
    o.availability_trace = std::move(trace).value();
    return {};
  }
  double period = 0;
  double online = 0;
  char comma = 0;
  std::string rest;
  std::istringstream fields(text.rfind("diurnal:", 0) == 0 ? text.substr(8) : std::string());
  if (!(fields >> period >> comma >> online) || comma != ',' || (fields >> rest) ||
      !(period >= 1e-6 && period <= 1e9) || !(online > 0 && online <= 1)) {
    return FlagError(
        "--availability must be always, diurnal:PERIOD_S,ONLINE (PERIOD_S in [1e-6, 1e9], "
        "ONLINE in (0, 1]) or trace:FILE, not '" +
        text + "'");
  }
  o.diurnal_period_s = period;
  o.diurnal_online = online;
  return {};
}

std::uint32_t DeviceThreads(const SimulateOptions& o) {
  if (o.mode == "gossip" || o.attack != "none") return 1;
  if (o.threads != 0) return o.threads;
  const unsigned cores = std::thread::hardware_concurrency();
  return std::clamp<std::uint32_t>(cores, 1, sim::kMaxDeviceThreads);
}

std::uint32_t LocalStepLimit(double budget_ms, double sample_us, double speed,
                              std::uint32_t samples_per_step) {
  if (budget_ms <= 0.0) return 0;
  const double step_ms = samples_per_step * sample_us * 1e-3 / speed;
  if (!(step_ms > 0.0)) return 0;  // steps that take no time all fit
  const double fitting = std::floor(budget_ms / step_ms);
  if (fitting >= protocol::kMaxLocalSteps) return 0;
  return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(fitting));
}

std::vector<sim::SimDevice> MakeSimDevices(const SimulateOptions& o, std::span<const double> speeds,
                                           const Task& task) {
  std::vector<sim::SimDevice> devices(o.workers);
  const auto bps = static_cast<std::uint64_t>(o.bandwidth_mbps * 1e6);
  const auto latency = static_cast<protocol::TimeNs>(o.latency_ms * 1e6);
  for (std::size_t w = 0; w < o.workers; ++w) {
    devices[w].profile = sim::DeviceProfile{bps, bps, latency, speeds[w]};
    devices[w].samples_per_step = static_cast<std::uint32_t>(task.samples_per_step(w));
    devices[w].local_step_limit =
        LocalStepLimit(o.local_time_budget_ms, o.sample_us, speeds[w], devices[w].samples_per_step);
  }
  return devices;
}

sim::DeviceGradient TaskGradient(const SimulateOptions& o, Task& task) {
  sim::DeviceGradient honest = [&task](std::size_t device, std::span<const float> point,
                                       std::uint32_t round, std::uint32_t local_step,
                                       std::span<float> gradient) {
    return task.Gradient(device, point, round, local_step, gradient, sim::DeviceThreadIndex());
  };
  const AttackSettings attack{AttackKindOf(o.attack), o.attackers, o.attack_strength, o.workers,
                              o.seed};
  return WithAttack(std::move(honest), attack, task.dimension());
}

sim::GossipSimulationSettings MakeGossipSimulation(const SimulateOptions& o, Task& task,
                                                   const GossipPlan& plan,
                                                   std::span<const float> initial,
                                                   std::vector<sim::SimDevice> devices) {
  sim::GossipSimulationSettings settings;
  for (std::size_t i = 0; i < o.workers; ++i) {
    settings.peers.push_back(
        BuildGossipConfig(o, task, plan, static_cast<protocol::PeerId>(i + 1)));
  }
  settings.initial_model.assign(initial.begin(), initial.end());
  settings.network = MakeSimConfig(o);
  settings.devices = std::move(devices);
  settings.gradient = TaskGradient(o, task);
  return settings;
}

void WriteGossipSimulation(SummaryWriter& summary, const SimulateOptions& o, const GossipPlan& plan,
                           const sim::SimulationResult& result) {
  summary.Begin("memory_plan");
  summary.Field("peer_arena_bytes", result.memory.device_arena_bytes);
  summary.End();
  summary.Begin("gossip");
  WriteGossipPlanFields(summary, o, plan);
  summary.End();
}

void WriteSimulatedNetwork(SummaryWriter& summary, const sim::DeviceCounters& network,
                           const protocol::ServerCounters& server) {
  summary.Begin("network");
  summary.Field("frames_lost", network.frames_lost);
  summary.Field("frames_corrupted", network.frames_corrupted);
  summary.Field("frames_duplicated", network.frames_duplicated);
  summary.Field("frames_dropped_offline", network.frames_dropped_offline);
  WriteServerCounters(summary, server);
  summary.End();
}

}  // namespace edgesgd::cli
