#pragma once

// What `simulate` adds to a run's flags: the mode (parameter server or gossip), the network
// model (links, device speeds, compute cost) and injected faults; how they become the
// simulator's settings, and the summary sections only a simulation writes.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cli/gossip_flags.h"
#include "cli/run_flags.h"
#include "cli/task.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/sim/sim_config.h"
#include "edgesgd/sim/simulation.h"

namespace edgesgd::cli {

struct SimulateOptions : RunFlags {
  std::string mode = "server";
  double bandwidth_mbps = 0;
  double latency_ms = 0;
  std::string device_speeds = "1";
  double sample_us = 100;
  double local_time_budget_ms = 0;  // 0: every worker takes all H local steps
  std::uint32_t threads = 0;  // device threads; 0: one per core
  std::string idle_memory = "auto";  // auto | release | keep
  double dropout = 0;
  double dropout_epoch_s = 10;
  std::string availability = "always";
  // --availability resolved (ResolveAvailability): the diurnal model, or the trace's intervals.
  double diurnal_period_s = 0;
  double diurnal_online = 1;
  std::vector<sim::OnlineInterval> availability_trace;
  double loss = 0;
  double corrupt = 0;
  double duplicate = 0;
  std::string attack = "none";  // cli/attacks.h
  std::uint32_t attackers = 0;
  float attack_strength = 0.0f;  // 0: the attack's default
};

// Registers every flag of `simulate` (--config included, for --help) on `command`.
void AddSimulateFlags(CLI::App& command, SimulateOptions& flags);

// Ok, or a one-line reason the flags cannot work together.
HostResult<> CheckSimulateConsistency(const SimulateOptions& flags);

// Resolves --availability: "always", "diurnal:PERIOD_S,ONLINE" (every device online for the
// fraction ONLINE of each period, at its own phase) or "trace:FILE" (lines "DEVICE START_S
// END_S": the device's online intervals; '#' starts a comment) into the options' diurnal and
// trace fields. Errors: a one-line message (naming the file and line).
HostResult<> ResolveAvailability(SimulateOptions& flags);

// The network model of the flags: seed, compute cost per sample, injected faults, availability
// (ResolveAvailability first: the config points into the flags' trace) and device threads.
sim::SimConfig MakeSimConfig(const SimulateOptions& flags);

// Threads the devices compute on: --threads (0: one per core, at most sim::kMaxDeviceThreads),
// or 1 for gossip runs (whose per-round figures read every peer) and attacks (whose attackers
// share their scratch).
std::uint32_t DeviceThreads(const SimulateOptions& flags);

// Parses --device-speeds ("1,0.5,2") into one speed per worker, the list cycled, or
// "lognormal:SIGMA" into speeds drawn from `seed`. Empty when an item is not a positive number
// or SIGMA is outside (0, 10].
std::vector<double> ParseSpeeds(const std::string& text, std::size_t workers,
                                std::uint64_t seed);

// One device per worker (or peer): the flags' link (--bandwidth-mbps both ways, --latency-ms),
// its speed and the task's samples per step.
// The local steps a worker of relative `speed` fits in a round's compute budget (at least one),
// or 0 (all of the run's H) without a budget or when more than any H fits.
std::uint32_t LocalStepLimit(double budget_ms, double sample_us, double speed,
                             std::uint32_t samples_per_step);

std::vector<sim::SimDevice> MakeSimDevices(const SimulateOptions& flags,
                                           std::span<const double> speeds, const Task& task);

// The task's gradient for device `device`: its worker's (or peer's) shard, replaced by the
// attack of --attack for workers 1..--attackers. `task` must outlive the simulation.
sim::DeviceGradient TaskGradient(const SimulateOptions& flags, Task& task);

// The gossip run of the flags over `plan`: peer i's configuration (BuildGossipConfig), the
// network model, `devices` and the task's gradient. `initial` must outlive the Init call.
sim::GossipSimulationSettings MakeGossipSimulation(const SimulateOptions& flags, Task& task,
                                                   const GossipPlan& plan,
                                                   std::span<const float> initial,
                                                   std::vector<sim::SimDevice> devices);

// The summary's "memory_plan" and "gossip" sections of a simulated gossip run.
void WriteGossipSimulation(SummaryWriter& summary, const SimulateOptions& flags,
                           const GossipPlan& plan, const sim::SimulationResult& result);

// The summary's "network" section of a simulated parameter-server run: injected faults and the
// server's rejections.
void WriteSimulatedNetwork(SummaryWriter& summary, const sim::DeviceCounters& network,
                           const protocol::ServerCounters& server);

}  // namespace edgesgd::cli
