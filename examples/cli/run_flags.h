#pragma once

// What `simulate`, `server`, `worker` and `peer` share: the flags of a training run (task and
// data, schedule, codec, worker algorithm, aggregation, outputs), their consistency rules, and
// how they become a Task, a RunConfig and ServerOptions. Registered in one place so that names,
// defaults and help text agree in every subcommand.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <span>
#include <string>

#include "cli/flags.h"
#include "cli/metrics.h"
#include "cli/task.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"

namespace edgesgd::cli {

struct RunFlags {
  // Data (every participant that computes gradients needs these).
  std::string task = "softmax";
  std::string data = "fashion-mnist";
  std::string split = "iid";
  std::size_t dim = 100;
  std::size_t samples = 500;
  std::size_t hidden = 64;
  std::size_t train_limit = 0;
  // The run (owned by whoever starts it: the simulator, the server, each gossip peer).
  std::size_t workers = 8;
  std::uint32_t rounds = 200;
  std::size_t batch = 32;
  std::uint32_t local_steps = 1;
  std::uint32_t eval_every = 1;
  float lr = 0.05f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float participation = 1.0f;
  float detach = 0.3f;
  std::uint64_t seed = 1;
  std::string codec = "identity";
  CodecFlags codec_flags;
  std::string feedback = "ef";
  std::string optimizer = "sgd";
  std::string aggregate = "mean";
  std::string downlink = "model";
  std::string tie = "positive";
  std::uint32_t quorum = 0;
  double round_deadline_s = 60;
  std::string topology = "ring";  // gossip
  // Outputs.
  std::string metrics;
  std::string summary;
  std::string model_out;
  bool quiet = false;
  // Set when the flag was given explicitly (defaults differ per aggregation).
  bool feedback_given = false;
};

// --task, --data, --split, --dim, --samples, --hidden, --train-limit.
void AddDataFlags(CLI::App& command, RunFlags& flags);
// --seed (data, model and codec randomness).
void AddSeedFlag(CLI::App& command, RunFlags& flags);
// --workers, --rounds, --lr, ... --tie: the RunConfig and the server's schedule. `deadline_help`
// explains --round-deadline-s for the subcommand (virtual or wall seconds).
void AddTrainingFlags(CLI::App& command, RunFlags& flags, const char* deadline_help);
// --eval-every, --metrics, --summary, --model-out, --quiet.
void AddOutputFlags(CLI::App& command, RunFlags& flags);

// Writes --model-out (if given): the model's floats, raw little-endian. False with `error`.
bool SaveModel(const RunFlags& flags, std::span<const float> model, std::string& error);

// --topology (gossip).
void AddTopologyFlag(CLI::App& command, RunFlags& flags);

// The gossip graph of --topology over `peers` peers. False with a one-line `error`.
bool BuildTopology(const RunFlags& flags, std::size_t peers, protocol::Topology& topology,
                   std::string& error);

// The D-PSGD configuration of peer `id` of `topology` (Metropolis-Hastings weights), with
// --rounds, --lr, --seed and --round-deadline-s as the neighbour deadline. `topology` must be
// valid (BuildTopology).
protocol::GossipConfig BuildGossipConfig(const RunFlags& flags, const Task& task,
                                         const protocol::Topology& topology, protocol::PeerId id);

// A one-line reason the training flags cannot work together (parameter-server runs), or empty.
std::string CheckRunConsistency(const RunFlags& flags);

// The task of the data flags for `workers` workers, drawn from `seed` with `batch` samples per
// step. False with a one-line `error` for a bad --split.
bool BuildTaskOptions(const RunFlags& flags, std::size_t workers, std::uint64_t seed,
                      std::size_t batch, TaskOptions& task, std::string& error);

// The RunConfig of the flags for `task` (check it with ValidateRunConfig).
protocol::RunConfig BuildRunConfig(const RunFlags& flags, const Task& task);

// Workers, quorum (0 -> 1), round deadline and a liveness timeout of three deadlines.
protocol::ServerOptions BuildServerOptions(const RunFlags& flags);

// Memory one participant needs, itemised for the summary.
struct MemoryPlan {
  std::size_t server_arena = 0;
  std::size_t worker_arena = 0;
  std::size_t worker_feedback_state = 0;
  std::size_t worker_codec_scratch = 0;
  std::size_t update_payload = 0;
  std::size_t update_frame = 0;
  std::size_t broadcast_frame = 0;
};
MemoryPlan MakeMemoryPlan(const protocol::RunConfig& config,
                          const protocol::ServerOptions& options);
void WriteMemoryPlan(SummaryWriter& summary, const MemoryPlan& plan);

// Bits per coordinate of an update's payload (the bits_per_coord column).
double PayloadBitsPerCoordinate(const protocol::RunConfig& config);

// Whether the row of round `row_round` (1-based) carries loss and accuracy: every eval_every
// rounds and the last.
bool EvaluatesRound(const RunFlags& flags, std::uint32_t row_round);

// One metrics row per closed round of a server: `time_s` from the event, loss and accuracy
// every eval_every rounds (and at the last) from `model`. Used by the simulator and the TCP
// server alike.
MetricsRow ServerRoundRow(const protocol::RoundEvent& event, const RunFlags& flags,
                          double bits_per_coord, Task& task, std::span<const float> model);

// The summary fields every parameter-server run writes (before its own sections).
void WriteRunSummary(SummaryWriter& summary, const RunFlags& flags,
                     const protocol::RunConfig& config, std::size_t parameters,
                     const MetricsRow& final_row);

// stderr is a terminal (a live progress line instead of periodic ones).
bool IsTerminal();

}  // namespace edgesgd::cli
