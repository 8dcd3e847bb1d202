// custom_model: trains a model edgesgd has never heard of (the hand-written MLP of model.h) on
// data it never reads itself (a CSV file), once in the simulator and once over TCP, with the
// same run configuration. See docs/how-to/bring-your-own-model.md for a walk through the code.
//
//   main.cc        the data split, the run configuration, the summary
//   options.*      the command line and --help
//   csv_data.*     writes the two-moons CSV, reads any CSV of features and labels
//   model.*        the MLP: tensors, forward pass, gradient
//   training.*     a worker's shard and the gradient function edgesgd calls
//   runs.*         the simulated run and the TCP run

#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "csv_data.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/run_config.h"
#include "model.h"
#include "options.h"
#include "runs.h"

namespace {

using custom_model::Dataset;
using edgesgd::protocol::RunConfig;

constexpr std::size_t kHiddenUnits = 16;
constexpr std::size_t kGeneratedRows = 2000;
constexpr float kMoonNoise = 0.15f;
constexpr std::size_t kHeldOutPercent = 20;  // the last rows of the file
constexpr std::size_t kMinRows = 5;          // one held out, one for each of the 4 workers
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// What every participant of a run shares. Over TCP the server sends it to each worker in its
// Welcome, so workers need to be told nothing but where the server is.
RunConfig MakeRunConfig(const custom_model::Mlp& model, const custom_model::Options& options) {
  RunConfig config;
  config.layout = model.Layout();
  config.codec = edgesgd::TopKParams{.k_ratio = options.k_ratio};
  // Error feedback keeps what top_k left out of an update and adds it to the next one.
  config.feedback.kind = edgesgd::FeedbackKind::kEf;
  config.feedback.learning_rate = 0.2f;
  config.feedback.momentum = 0.9f;
  config.batch = 32;  // rows per gradient, read by ShardTrainer
  config.rounds = options.rounds;
  config.seed = options.seed;
  return config;
}

void PrintReport(const char* run, const custom_model::RunReport& report) {
  if (!report.finished) {
    std::printf("%-9s FAILED: %s\n", run, report.failure.c_str());
    return;
  }
  std::printf("%-9s held-out accuracy %.3f; workers sent %llu B, the server %llu B; %.2f s\n", run,
              report.accuracy, static_cast<unsigned long long>(report.bytes_up),
              static_cast<unsigned long long>(report.bytes_down), report.seconds);
}

// Writes the two-moons CSV unless the user brought one, and returns its path.
edgesgd::HostResult<std::string> PrepareCsv(const custom_model::Options& options) {
  if (!options.csv.empty()) return options.csv;
  std::error_code ignored;  // a directory that cannot be made shows up as the write's error
  std::filesystem::create_directories(options.out_dir, ignored);
  const std::string path = (std::filesystem::path(options.out_dir) / "two_moons.csv").string();
  EDGESGD_HOST_TRY(custom_model::WriteTwoMoonsCsv(path, kGeneratedRows, kMoonNoise, options.seed));
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  custom_model::Options options;
  const edgesgd::HostResult<custom_model::Parsed> parsed =
      custom_model::ParseOptions(argc, argv, options);
  if (!parsed.ok()) {
    std::fprintf(stderr, "custom_model: %s (see --help)\n", parsed.message().c_str());
    return kExitUsage;
  }
  if (*parsed == custom_model::Parsed::kHelp) {
    std::fputs(custom_model::kUsage, stdout);
    return 0;
  }
  // The TCP nodes log every connection made and closed; only errors matter to this summary.
  edgesgd::platform::SetLogLevel(options.verbose ? edgesgd::platform::LogLevel::kInfo
                                                 : edgesgd::platform::LogLevel::kError);

  const edgesgd::HostResult<std::string> csv = PrepareCsv(options);
  edgesgd::HostResult<Dataset> read =
      csv.ok() ? custom_model::ReadCsv(*csv, options.label_last) : csv.error();
  if (!read.ok()) {
    std::fprintf(stderr, "custom_model: %s\n", read.message().c_str());
    return kExitUsage;
  }
  const Dataset all = std::move(read).value();
  if (all.rows() < kMinRows || all.class_count() < 2) {
    std::fprintf(stderr,
                 "custom_model: %s has %zu rows of %u classes; it needs at least %zu rows and "
                 "2 classes\n",
                 csv->c_str(), all.rows(), all.class_count(), kMinRows);
    return kExitUsage;
  }
  const std::size_t train_rows = all.rows() - all.rows() * kHeldOutPercent / 100;
  const Dataset train = custom_model::Rows(all, 0, train_rows);
  const Dataset test = custom_model::Rows(all, train_rows, all.rows());

  const custom_model::MlpShape shape{all.feature_count, kHiddenUnits, all.class_count()};
  const custom_model::Mlp model(shape);
  const RunConfig config = MakeRunConfig(model, options);
  if (const edgesgd::Status status = edgesgd::protocol::ValidateRunConfig(config); !status.ok()) {
    std::fprintf(stderr, "custom_model: the run is not valid: %s\n", status.reason());
    return kExitUsage;
  }
  const std::vector<float> initial_model = model.InitialParameters(options.seed);

  std::printf("data      %s: %zu rows, %zu features, %zu classes; %zu for training, %zu held out\n",
              csv->c_str(), all.rows(), shape.inputs, shape.classes, train.rows(), test.rows());
  std::printf("model     MLP %zu-%zu-%zu: %zu parameters in %zu tensors\n", shape.inputs,
              shape.hidden, shape.classes, config.layout.dimension(), config.layout.tensor_count());
  // The payload of one update, frame headers aside: top_k sends an index and a value for each
  // coordinate it keeps.
  const std::size_t payload = edgesgd::EncodedShape(config.codec, config.layout)->bytes();
  std::printf(
      "run       %u workers x %u rounds, top_k (k ratio %g) + EF: %zu B of payload per "
      "update (dense: %zu B)\n\n",
      custom_model::kWorkers, config.rounds, static_cast<double>(options.k_ratio), payload,
      4 * config.layout.dimension());

  const custom_model::RunReport simulated =
      custom_model::TrainInSimulator(config, shape, initial_model, train, test);
  const custom_model::RunReport over_tcp =
      custom_model::TrainOverTcp(config, shape, initial_model, train, test);
  std::printf("\n");
  PrintReport("simulator", simulated);
  PrintReport("tcp", over_tcp);

  for (const custom_model::RunReport* report : {&simulated, &over_tcp}) {
    if (!report->finished || report->accuracy < options.min_accuracy) {
      std::printf("FAILED: a run did not reach the held-out accuracy %.2f\n", options.min_accuracy);
      return kExitFailed;
    }
  }
  std::printf("ok: both runs reached the held-out accuracy %.2f\n", options.min_accuracy);
  return 0;
}
