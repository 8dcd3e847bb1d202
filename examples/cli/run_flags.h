#pragma once

// What `simulate`, `server`, `worker` and `peer` share: the flags of a training run (task and
// data, schedule, codec, worker algorithm, aggregation, outputs), their consistency rules, and
// how they become a Task, a RunConfig and ServerOptions. Registered in one place so that names,
// defaults and help text agree in every subcommand.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "cli/codec_flags.h"
#include "cli/feature_flags.h"
#include "cli/gossip_topology.h"
#include "cli/metrics.h"
#include "cli/model_flags.h"
#include "cli/task.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"

namespace edgesgd::cli {

struct RunFlags {
  // Data (every participant that computes gradients needs these).
  std::string task = "softmax";
  std::string data = "fashion-mnist";
  std::string test_data;
  std::string csv_label = "first";
  std::string split = "iid";
  std::size_t dim = 100;
  std::size_t samples = 500;
  std::size_t hidden = 64;
  ModelFlags network;  // --model, --input-shape (--task softmax)
  std::size_t train_limit = 0;
  // The run (owned by whoever starts it: the simulator, the server, each gossip peer).
  std::size_t workers = 8;
  std::uint32_t rounds = 200;
  std::size_t batch = 32;
  std::uint32_t local_steps = 1;
  std::uint32_t aggregation_options = 0;  // the aggregations' own flags (AggregationOption)
  bool scaffold = false;  // SCAFFOLD's control variates (mean aggregation, H > 1)
  std::uint32_t eval_every = 1;
  float lr = 0.05f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float participation = 1.0f;
  float detach = 0.3f;
  std::uint64_t seed = 1;
  CodecFlags codec;  // --codec and its parameters
  std::string feedback = "ef";
  std::string optimizer = "sgd";
  std::string aggregate = "mean";
  std::string downlink = "model";
  std::string tie = "positive";
  std::uint32_t quorum = 0;
  double round_deadline_s = 60;
  double max_model_norm = 1e6;  // 0: no bound
  double join_timeout_s = 0;  // 0: training starts once every worker joined
  // The flags the run features declare for their parameters (--prox-mu, --dp-*, --robust*).
  FeatureFlags features;
  // The server optimizer (parameter-server runs with the mean and the model downlink).
  std::string server_optimizer = "fedavg";
  float server_lr = 1.0f;  // read only when given: the default depends on the optimizer
  float server_beta1 = 0.9f;
  float server_beta2 = 0.99f;
  float server_tau = 1e-3f;
  bool server_lr_given = false;
  bool server_moments_given = false;  // --server-beta1
  bool server_beta2_given = false;
  bool server_tau_given = false;
  // Buffered asynchronous aggregation (parameter-server runs with the mean).
  std::uint32_t buffer = 0;
  std::string staleness = "sqrt";
  std::uint32_t max_staleness = 100;
  bool async_flags_given = false;  // --staleness or --max-staleness
  // Secure aggregation (parameter-server runs with the mean).
  bool secure_aggregation = false;
  bool secagg_signed = false;  // --secagg-signed
  float secagg_threshold = 2.0f / 3.0f;
  std::uint32_t secagg_neighbours = 0;
  float secagg_bound = 4.0f;
  bool secagg_flags_given = false;  // a --secagg-* flag was given
  // Gossip (simulate --mode gossip, peer).
  std::string gossip = "dpsgd";
  std::string topology = "ring";
  std::string gossip_weights = "metropolis";
  std::uint32_t gossip_rounds = 0;  // DeTAG's R; 0 = the recipe
  std::uint32_t phase_batches = 1;
  float consensus_step = 0.0f;      // CHOCO's and BEER's gamma; 0 = the codec's default
  bool gossip_flags_given = false;  // any gossip-only flag was given
  bool consensus_step_given = false;
  bool no_public_copies = false;  // CHOCO's naive baseline, for comparisons
  // Outputs.
  std::string metrics;
  std::string summary;
  std::string model_out;
  bool quiet = false;
  // Set when the flag was given explicitly: --feedback's default differs per aggregation, and
  // a gossip peer takes the count from its --peers list.
  bool feedback_given = false;
  bool workers_given = false;
};

// --join-timeout-s (`simulate`, `server`).
void AddJoinTimeoutFlag(CLI::App& command, RunFlags& flags);

// --task, --data, --test-data, --csv-label, --split, --dim, --samples, --hidden, --model,
// --input-shape, --train-limit.
void AddDataFlags(CLI::App& command, RunFlags& flags);
// --seed (data, model and codec randomness).
void AddSeedFlag(CLI::App& command, RunFlags& flags);
// --workers, --rounds, --lr, ... --tie, --dp-*, --robust*, --server-*, --buffer, --staleness,
// --max-staleness: the RunConfig and the server's
// schedule.
// `deadline_help`
// explains --round-deadline-s for the subcommand (virtual or wall seconds).
void AddTrainingFlags(CLI::App& command, RunFlags& flags, const char* deadline_help);
// --eval-every, --metrics, --summary, --model-out, --quiet.
void AddOutputFlags(CLI::App& command, RunFlags& flags);

// Writes --model-out (if given): the model's floats, raw little-endian. Errors: a one-line
// message naming the file.
HostResult<> SaveModel(const RunFlags& flags, std::span<const float> model);

// Ok, or a one-line reason the training flags cannot work (parameter-server runs): the codec's
// own checks of its flags, and flags given without the feature they tune. Which
// features run together is the run's own check (ValidateServerRun), not the flags'.
HostResult<> CheckRunConsistency(const RunFlags& flags);

// A one-line warning about training flags that work together but are known to train poorly
// (parameter-server runs), or empty: plain majority vote on a non-iid split.
std::string RunWarning(const RunFlags& flags);

// The task of the data flags for `workers` workers, drawn from `seed` with `batch` samples per
// step. Errors: a one-line message for a bad --split, a --test-data without a data file or
// --csv-label last without a CSV file.
HostResult<TaskOptions> BuildTaskOptions(const RunFlags& flags, std::size_t workers,
                                         std::uint64_t seed, std::size_t batch);

// What a command does with its task beyond the flags (TaskOptions' fields of the same names).
struct TaskUse {
  std::size_t label_flipped_workers = 0;  // simulate --attack label_flip
  bool evaluates_only = false;            // the server: scores the model, trains nothing
  std::size_t compute_threads = 1;        // simulate: its device threads
};

// Sets `task` up from the data flags for `workers` workers (seeded by --seed, --batch samples
// per step) as `use` says. Returns the command's exit code: 0, 2 for flags that
// cannot work (bad --split, --test-data without a data file, --csv-label last without a CSV
// file) or 1 for data that cannot be read,
// with a one-line error on stderr naming `command`.
int SetUpTask(const char* command, const RunFlags& flags, std::size_t workers, Task& task,
              const TaskUse& use = {});

// Validates a parameter-server run: the RunConfig (ValidateRunConfig and
// ValidateServerChoices, where features that cannot run together are refused) and the server's
// options. Returns the
// command's exit code: 0, or 2 with a one-line error on stderr naming `command`.
int ValidateServerRun(const char* command, const protocol::RunConfig& config,
                      const protocol::ServerOptions& options);

// The RunConfig of the flags for `task`, once CheckRunConsistency passed (check it with
// ValidateRunConfig). Majority vote takes the codec's vote form (VoteForm).
protocol::RunConfig BuildRunConfig(const RunFlags& flags, const Task& task);

// Workers, quorum (0 -> 1), round deadline and a liveness timeout of three deadlines.
protocol::ServerOptions BuildServerOptions(const RunFlags& flags);

// Memory one participant needs, itemised for the summary.
struct MemoryPlan {
  std::size_t server_arena = 0;
  std::size_t worker_arena = 0;
  std::size_t worker_feedback_state = 0;
  std::size_t worker_selection_state = 0;  // reg_top_k's posterior, part of the feedback state
  std::size_t worker_codec_scratch = 0;
  std::size_t update_payload = 0;
  std::size_t update_frame = 0;
  std::size_t broadcast_frame = 0;
};
MemoryPlan MakeMemoryPlan(const protocol::RunConfig& config,
                          const protocol::ServerOptions& options);
void WriteMemoryPlan(SummaryWriter& summary, const MemoryPlan& plan);

// The server's frame and round counters, as fields of the current summary section.
void WriteServerCounters(SummaryWriter& summary, const protocol::ServerCounters& counters);

// Bits per coordinate of an update's largest payload (the bits_per_coord column of a round
// without uploads; ServerRoundRow uses the round's actual payloads).
double PayloadBitsPerCoordinate(const protocol::RunConfig& config);

// Scores `model` into `row`: loss, accuracy and log10 distance to the optimum.
void EvaluateInto(Task& task, std::span<const float> model, MetricsRow& row);

// Whether the row of round `row_round` (1-based) carries loss and accuracy: every eval_every
// rounds and the last.
bool EvaluatesRound(const RunFlags& flags, std::uint32_t row_round);

// The per-round output of a parameter-server run (simulate, server), fed by the run's round and
// reject callbacks: one metrics row and progress update per closed round — `time_s` from the
// event, loss and accuracy every eval_every rounds (and at the last), bits_per_coord the mean
// over the round's uploads (a quantization schedule changes it every round) — and one note per
// rejected frame.
class ServerRunOutput {
 public:
  // The model an evaluated round is scored on, given the server's (DEF-A reads it out as
  // x - mean_i e_i); unset: the server's model.
  using Readout = std::function<std::span<const float>(std::span<const float> model)>;

  ServerRunOutput(const RunFlags& flags, const protocol::RunConfig& config, Task& task,
                  MetricsWriter& metrics, ProgressLine& progress, Readout readout = {});

  // A closed round, with the server's model after it.
  void OnRound(const protocol::RoundEvent& event, std::span<const float> model);
  void OnReject(const protocol::RejectEvent& reject);

  // The last evaluated row (all empty before the first).
  const MetricsRow& last() const { return last_; }
  // The first evaluated round whose loss was NaN or infinite (0: none): the run diverged.
  std::uint32_t non_finite_loss_round() const { return non_finite_loss_round_; }

 private:
  const RunFlags& flags_;
  Task& task_;
  MetricsWriter& metrics_;
  ProgressLine& progress_;
  Readout readout_;
  double bits_per_coord_;  // of a round without uploads
  bool private_ = false;   // the epsilon column holds the session's account; else it is empty
  MetricsRow last_;
  std::uint32_t non_finite_loss_round_ = 0;
};

// Why a parameter-server run failed, for people: "the run failed in round R: REASON" with a hint
// when the model diverged. `rounds` is the number of rounds that closed.
std::string RunFailure(std::uint32_t rounds, Status status);

// The metrics row of gossip round `round` (0-based) completed at `time_ns`, before evaluation:
// cumulative bytes (per peer) and the bits per coordinate of what a peer of `config` sends (32
// for dense models; CHOCO's codec at its widest).
MetricsRow GossipRow(const protocol::GossipConfig& config, std::uint32_t round,
                     protocol::TimeNs time_ns, std::uint64_t bytes_up, std::uint64_t bytes_down);

// The summary fields every gossip run (simulate --mode gossip, peer) writes first.
void WriteGossipRunSummary(SummaryWriter& summary, const RunFlags& flags, std::size_t peers,
                           std::size_t parameters, const MetricsRow& final_row);

// The summary fields every parameter-server run writes (before its own sections).
void WriteRunSummary(SummaryWriter& summary, const RunFlags& flags,
                     const protocol::RunConfig& config, std::size_t parameters,
                     const MetricsRow& final_row);

// The end of a parameter-server run (simulate, server): saves the summary and --model-out, then
// prints the closing line (`seconds` names the clock of time_s: "virtual s" or "s"). Returns the
// command's exit code: 0, or 1 with a one-line error.
int FinishServerRun(const char* command, const char* seconds, const RunFlags& flags,
                    const SummaryWriter& summary, std::span<const float> model,
                    const MetricsRow& last);

// Prints "edgesgd COMMAND: MESSAGE" on stderr and returns `code` (the command's exit code).
int Fail(const char* command, const std::string& message, int code);

// stderr is a terminal (a live progress line instead of periodic ones).
bool IsTerminal();

}  // namespace edgesgd::cli
