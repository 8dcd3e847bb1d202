#include "cli/run_flags.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "cli/async_flags.h"
#include "cli/bounded_option.h"
#include "cli/data_sources.h"
#include "cli/flag_error.h"
#include "cli/number_checks.h"
#include "cli/robust_flags.h"
#include "cli/secure_flags.h"
#include "cli/server_optimizer_flags.h"
#include "edgesgd/core/check.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/run_feature.h"
#include "edgesgd/protocol/worker_session.h"

namespace edgesgd::cli {
void AddDataFlags(CLI::App& command, RunFlags& o) {
  command
      .add_option("--task", o.task,
                  "linreg (experiment A), logreg-toy (B), quadratic-noise (C), softmax, mlp")
      ->capture_default_str()
      ->check(CLI::IsMember({"linreg", "logreg-toy", "quadratic-noise", "softmax", "mlp"}));
  command.add_option("--data", o.data, DataHelp())->capture_default_str()->check(DataValidator());
  command.add_option("--test-data", o.test_data, TestDataHelp());
  AddCsvLabelFlag(command, o.csv_label);
  command
      .add_option("--split", o.split,
                  "How softmax/mlp data is split: iid, sorted (by label, unshuffled) or "
                  "dirichlet:ALPHA")
      ->capture_default_str();
  AddBoundedOption(command, "--dim", o.dim, std::size_t{1}, std::size_t{10000000},
                   "Synthetic tasks: model dimension / features");
  AddBoundedOption(command, "--samples", o.samples, std::size_t{1}, std::size_t{10000000},
                   "Synthetic tasks: samples per worker");
  AddBoundedOption(command, "--hidden", o.hidden, std::size_t{1}, std::size_t{65536},
                   "MLP hidden units");
  AddModelFlags(command, o.network);
  command
      .add_option("--train-limit", o.train_limit,
                  "Fashion-MNIST or a data file: the first N training samples (0 = all)")
      ->capture_default_str();
}

void AddSeedFlag(CLI::App& command, RunFlags& o) {
  command.add_option("--seed", o.seed, "Seed of data, model, codecs and network faults")
      ->capture_default_str();
}

void AddJoinTimeoutFlag(CLI::App& command, RunFlags& o) {
  AddBoundedOption(command, "--join-timeout-s", o.join_timeout_s, 0.0, 1e9,
                   "Start training this long after starting once --quorum workers joined "
                   "(0: wait for all --workers)");
}

void AddTrainingFlags(CLI::App& command, RunFlags& o, const char* deadline_help) {
  RunFlags* flags = &o;
  AddBoundedOption(command, "--workers", o.workers, std::size_t{1},
                   std::size_t{protocol::kMaxWorkers}, "Number of worker devices")
      ->each([flags](const std::string&) { flags->workers_given = true; });
  AddBoundedOption(command, "--rounds", o.rounds, 1u, 100000000u, "Training rounds");
  command.add_option("--lr", o.lr, "Learning rate (workers' step size)")->capture_default_str();
  command
      .add_option("--momentum", o.momentum,
                  "Momentum beta of --optimizer momentum and signum, in [0, 1)")
      ->capture_default_str();
  command.add_option("--weight-decay", o.weight_decay, "L2 weight decay")->capture_default_str();
  command.add_option("--batch", o.batch, "Samples per local step (0 = the whole local shard)")
      ->capture_default_str();
  AddBoundedOption(command, "--local-steps", o.local_steps, 1u, protocol::kMaxLocalSteps,
                   "H local steps per round; the model delta is then sent (H = 1 sends "
                   "gradients)");
  command.add_flag("--scaffold", o.scaffold,
                   "SCAFFOLD (Karimireddy et al. 2020): control variates correct each local step "
                   "for the drift between a device's data and the federation's, at the price of "
                   "a second uplink payload (the change of the device's variate, in --codec) and "
                   "the server's variate beside each model broadcast (needs --local-steps > 1, "
                   "--aggregate mean and --downlink model)");
  AddBoundedOption(command, "--participation", o.participation, 1e-6f, 1.0f,
                   "Fraction of live workers sampled each round, in (0, 1]");
  o.codec.Add(command, "identity", "Uplink compressor:");
  command
      .add_option("--feedback", o.feedback,
                  "Error feedback of --aggregate mean: none, ef, def (see --detach), saef, "
                  "or defa (DEF training, de-averaged x - mean e read-out)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "ef", "def", "saef", "defa"}))
      ->each([flags](const std::string&) { flags->feedback_given = true; });
  command.add_option("--detach", o.detach, "DEF detach coefficient c in [0, 1]")
      ->capture_default_str();
  command
      .add_option("--optimizer", o.optimizer,
                  "sgd or momentum (heavy ball on the workers, with error feedback), or "
                  "signum (with --aggregate majority)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "momentum", "signum"}));
  command
      .add_option("--aggregate", o.aggregate,
                  "Server aggregation: mean of decoded updates, or majority vote of signs")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "majority"}));
  const std::string payload_sum =
      CodecNamesWith([](const CodecTraits& traits) { return traits.payload_sum; });
  const std::string recompress = CodecNamesWith(
      [](const CodecTraits& traits) { return !traits.payload_sum && traits.downlink_recompress; });
  command
      .add_option("--downlink", o.downlink,
                  "What the server broadcasts: the model, or the compressed aggregate: the "
                  "payload mean (" +
                      payload_sum +
                      "), the majority vote, or the mean "
                      "compressed again with the uplink codec and the rest kept in a server "
                      "residual (" +
                      recompress + ": two-way error feedback)")
      ->capture_default_str()
      ->check(CLI::IsMember({"model", "aggregate"}));
  command.add_option("--tie", o.tie, "Majority vote: how a tie (even workers) resolves")
      ->capture_default_str()
      ->check(CLI::IsMember({"positive", "negative"}));
  o.features.Add(command, protocol::FeatureFieldTables());
  AddServerOptimizerFlags(command, o);
  AddAsyncFlags(command, o);
  AddSecureFlags(command, o);
  // Each aggregation component that a flag switches on declares the flag itself.
  for (const protocol::AggregationDescriptor& aggregation : protocol::kAggregations) {
    const protocol::AggregationOption* option = aggregation.option;
    if (option == nullptr) continue;
    command.add_flag_callback(
        option->flag, [&o, bit = option->bit] { o.aggregation_options |= bit; }, option->help);
  }
  command
      .add_option("--quorum", o.quorum, "Updates a round needs once its deadline passed (0 = 1)")
      ->capture_default_str();
  AddBoundedOption(command, "--round-deadline-s", o.round_deadline_s, 1e-6, 1e9, deadline_help);
  AddBoundedOption(command, "--max-model-norm", o.max_model_norm, 0.0, 3e38,
                   "The run fails, naming the round, once the model's Euclidean norm exceeds "
                   "this (it diverged); 0 = no bound. A NaN or infinity always fails it");
}

void AddOutputFlags(CLI::App& command, RunFlags& o) {
  AddBoundedOption(command, "--eval-every", o.eval_every, 1u, 100000000u,
                   "Rounds between evaluations (loss/accuracy cells are empty in between)");
  command.add_option("--metrics", o.metrics, "Write one CSV row per round to FILE.csv");
  command.add_option("--summary", o.summary,
                     "Write the final row, memory plan and fault counters to FILE.json");
  command.add_option("--model-out", o.model_out,
                     "Write the final model to FILE as raw little-endian float32 values");
  command.add_flag("--quiet", o.quiet, "No progress on stderr");
}

HostResult<> SaveModel(const RunFlags& o, std::span<const float> model) {
  if (o.model_out.empty()) return {};
  std::FILE* file = std::fopen(o.model_out.c_str(), "wb");
  if (file == nullptr) {
    return HostError(Status::Unavailable(),
                     "cannot write --model-out " + o.model_out + ": " + std::strerror(errno));
  }
  const bool written = std::fwrite(model.data(), sizeof(float), model.size(), file) == model.size();
  if (std::fclose(file) != 0 || !written) {
    return HostError(Status::Unavailable(), "cannot write --model-out " + o.model_out);
  }
  return {};
}

std::string RunWarning(const RunFlags& o) {
  const HostResult<CodecParams> codec = o.codec.Params(/*strict=*/false);
  const bool stochastic = codec.ok() && std::holds_alternative<StochasticSignParams>(*codec);
  if (o.aggregate == "majority" && o.split != "iid" && !stochastic) {
    return "plain majority vote tends to collapse on a non-iid --split: each device's sign "
           "follows its own labels and the vote cancels the rest; stochastic signs "
           "(--codec stochastic_sign --sign-noise-bound B, B about the largest |momentum| a "
           "device sends) keep one bit per coordinate each way and train";
  }
  return "";
}

HostResult<> CheckRunConsistency(const RunFlags& o) {
  const bool majority = o.aggregate == "majority";
  const HostResult<CodecParams> parsed = o.codec.Params();
  if (!parsed.ok()) return parsed.error();
  const CodecParams& codec = *parsed;
  if (majority && !VoteForm(codec).ok()) {
    return FlagError(std::string("--aggregate majority: ") + VoteForm(codec).status().reason());
  }
  if (majority && o.optimizer != "signum") {
    return FlagError(
        "--aggregate majority trains with Signum on the workers: use --optimizer signum");
  }
  if (!majority && o.optimizer == "signum") {
    return FlagError(
        "--optimizer signum sends sign votes: it needs --aggregate majority --codec sign");
  }
  if (majority && o.feedback_given && o.feedback != "none") {
    return FlagError(
        "--aggregate majority has no error feedback (the vote is the update): drop "
        "--feedback or use --feedback none");
  }
  // The features' own flags, each judged with its feature's other flags.
  protocol::RunConfig features;
  EDGESGD_HOST_TRY(o.features.Apply(features));
  EDGESGD_HOST_TRY(CheckRobustCohort(
      features.robust,
      protocol::SampledCount(o.participation, static_cast<std::uint32_t>(o.workers))));
  EDGESGD_HOST_TRY(CheckServerOptimizerFlags(o));
  EDGESGD_HOST_TRY(CheckAsyncFlags(o));
  EDGESGD_HOST_TRY(CheckSecureFlags(o));
  if (o.quorum > o.workers) return FlagError("--quorum cannot exceed --workers");
  if (o.task == "logreg-toy" && o.workers != 2) {
    return FlagError("--task logreg-toy is the two-client toy: it needs --workers 2");
  }
  return {};
}

HostResult<TaskOptions> BuildTaskOptions(const RunFlags& o, std::size_t workers, std::uint64_t seed,
                                         std::size_t batch) {
  TaskOptions task;
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
  if (HostResult<> checked = CheckDataFiles(o.data, o.test_data, o.csv_label); !checked.ok()) {
    return std::move(checked).error();
  }
  task.data = o.data;
  task.test_data = o.test_data;
  task.csv_label = CsvLabelColumnOf(o.csv_label);
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
      return FlagError("--split dirichlet:ALPHA needs a positive number, e.g. dirichlet:0.5");
    }
  } else {
    return FlagError("--split must be iid, sorted or dirichlet:ALPHA");
  }
  task.workers = workers;
  task.batch = batch;
  task.dimension = o.dim;
  task.samples = o.samples;
  task.hidden = o.hidden;
  if (!o.network.input_shape.empty() && o.network.model.empty()) {
    return FlagError("--input-shape describes --model's input: give --model too");
  }
  if (!o.network.model.empty() && o.task != "softmax") {
    return FlagError(
        "--model replaces softmax regression: it needs --task softmax (an MLP is "
        "--model dense:H,relu,dense:CLASSES)");
  }
  if (Shape shape;
      !o.network.input_shape.empty() && !ParseInputShape(o.network.input_shape, shape)) {
    return FlagError("--input-shape " + o.network.input_shape +
                     ": expected HxWxC, three positive integers");
  }
  task.network = o.network;
  task.train_limit = o.train_limit;
  task.seed = seed;
  return task;
}

int SetUpTask(const char* command, const RunFlags& o, std::size_t workers, Task& task,
              const TaskUse& use) {
  HostResult<TaskOptions> built = BuildTaskOptions(o, workers, o.seed, o.batch);
  if (!built.ok()) {
    std::fprintf(stderr, "edgesgd %s: %s\n", command, built.message().c_str());
    return 2;
  }
  TaskOptions options = std::move(built).value();
  options.label_flipped_workers = use.label_flipped_workers;
  options.evaluates_only = use.evaluates_only;
  options.compute_threads = use.compute_threads;
  if (const HostResult<> set_up = task.Setup(options); !set_up.ok()) {
    std::fprintf(stderr, "edgesgd %s: %s\n", command, set_up.message().c_str());
    return 1;
  }
  return 0;
}

int ValidateServerRun(const char* command, const protocol::RunConfig& config,
                      const protocol::ServerOptions& options) {
  // The server's features first: their refusals of a shared feature say more than the shared
  // feature's own check (a robust rule adds no central noise because it does not combine with it).
  for (const Status check :
       {protocol::ValidateServerChoices(config), protocol::ValidateRunConfig(config)}) {
    if (!check.ok()) {
      std::fprintf(stderr, "edgesgd %s: inconsistent configuration: %s\n", command, check.reason());
      return 2;
    }
  }
  if (const Status check = protocol::ValidateServerOptions(options); !check.ok()) {
    std::fprintf(stderr, "edgesgd %s: %s\n", command, check.reason());
    return 2;
  }
  return 0;
}

protocol::RunConfig BuildRunConfig(const RunFlags& o, const Task& task) {
  protocol::RunConfig config;
  config.layout = task.layout();
  // CheckRunConsistency has accepted the flags.
  if (const HostResult<CodecParams> codec = o.codec.Params(); codec.ok()) config.codec = *codec;
  config.batch = static_cast<std::uint32_t>(task.samples_per_step(0));
  config.participation = o.participation;
  config.rounds = o.rounds;
  config.seed = o.seed;
  config.downlink = o.downlink == "aggregate" ? protocol::DownlinkKind::kAggregate
                                              : protocol::DownlinkKind::kModel;
  // Given whatever the aggregation, so that the run's own check refuses what it cannot use.
  config.feedback.local_steps = o.local_steps;
  config.scaffold = o.scaffold;
  config.aggregation_options = o.aggregation_options;
  if (o.aggregate == "majority") {
    config.aggregation = protocol::AggregationKind::kMajority;
    config.codec = VoteForm(config.codec).value();
    config.tie_rule = o.tie == "negative" ? TieRule::kNegative : TieRule::kPositive;
    config.optimizer = {OptimizerKind::kSignum, o.lr, o.momentum, o.weight_decay};
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
  }
  const HostResult<> features = o.features.Apply(config, /*strict=*/false);
  EDGESGD_CHECK(features.ok());  // CheckRunConsistency has accepted them
  if (config.privacy.mode != PrivacyMode::kOff && config.privacy.count_noise == 0.0f) {
    // Andrew et al.'s recommendation: a twentieth of the devices a round samples.
    config.privacy.count_noise = static_cast<float>(protocol::SampledCount(
                                     o.participation, static_cast<std::uint32_t>(o.workers))) /
                                 20.0f;
  }
  config.server_optimizer = ServerOptimizerParamsOf(o);
  config.async = AsyncParamsOf(o);
  config.secure = SecureParamsOf(o);
  return config;
}

protocol::ServerOptions BuildServerOptions(const RunFlags& o) {
  protocol::ServerOptions options;
  options.workers = static_cast<std::uint32_t>(o.workers);
  options.quorum = o.quorum == 0 ? 1 : o.quorum;
  options.round_deadline_ns = static_cast<protocol::TimeNs>(o.round_deadline_s * 1e9);
  options.liveness_timeout_ns = 3 * options.round_deadline_ns;
  options.max_model_norm = static_cast<float>(o.max_model_norm);
  if (o.join_timeout_s > 0) {
    options.join_timeout_ns = static_cast<protocol::TimeNs>(o.join_timeout_s * 1e9);
  }
  return options;
}

int Fail(const char* command, const std::string& message, int code) {
  std::fprintf(stderr, "edgesgd %s: %s\n", command, message.c_str());
  return code;
}

bool IsTerminal() { return isatty(STDERR_FILENO) == 1; }

}  // namespace edgesgd::cli
