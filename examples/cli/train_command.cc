// `edgesgd train`: single-device training with the upload path of a federated worker. The device
// computes mini-batch gradients, runs error feedback, compresses its update with a codec and
// applies exactly what a server would receive — so the loss curve shows what compression costs
// in accuracy, and the byte counts show what it saves on the link.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/bounded_option.h"
#include "cli/codec_flags.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/data_sources.h"
#include "cli/model_flags.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/data/synthetic.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/model/model.h"

namespace edgesgd::cli {
namespace {

struct TrainOptions {
  std::string task = "softmax";
  std::string data = "fashion-mnist";
  std::string test_data;
  std::string csv_label = "first";
  std::string feedback = "ef";
  CodecFlags codec;
  std::size_t rounds = 3000;
  std::size_t batch = 64;
  float lr = 0.05f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  float detach = 0.3f;
  std::size_t hidden = 64;
  ModelFlags network;
  std::size_t samples = 4000;
  std::size_t dim = 20;
  std::size_t limit = 0;
  std::size_t eval_every = 500;
  std::uint64_t seed = 1;
};

// Training and test sets, owned here (generated, or read from files into `labeled`), viewed by
// the trainer.
struct Data {
  std::vector<float> train_features, test_features;
  std::vector<std::uint8_t> train_labels, test_labels;
  LabeledSets labeled;
  DatasetView train, test;
  std::size_t classes = 0;
};

bool LoadData(const TrainOptions& options, Data& data) {
  if (options.data != "synthetic") {
    HostResult<LabeledSets> labeled = LoadLabeledData(
        options.data, options.test_data, CsvLabelColumnOf(options.csv_label), options.limit);
    if (!labeled.ok()) {
      std::fprintf(stderr, "edgesgd train: %s\n", labeled.message().c_str());
      return false;
    }
    data.labeled = std::move(labeled).value();
    data.classes = data.labeled.train.num_classes;
    data.train = data.labeled.train.View();
    data.test = data.labeled.Evaluated();
    return true;
  }
  // Synthetic: a Gaussian mixture, train and test drawn around the same centres.
  GaussianMixtureParams params;
  params.dimension = options.dim;
  params.samples = options.samples;
  params.seed = options.seed;
  data.classes = params.classes;
  data.train_features.resize(params.samples * params.dimension);
  data.train_labels.resize(params.samples);
  params.split = 1;
  data.test_features.resize(params.samples * params.dimension);
  data.test_labels.resize(params.samples);
  params.split = 0;
  Status status = GenerateGaussianMixture(params, data.train_features, data.train_labels);
  params.split = 1;
  if (status.ok()) status = GenerateGaussianMixture(params, data.test_features, data.test_labels);
  if (!status.ok()) {
    std::fprintf(stderr, "edgesgd train: cannot generate synthetic data: %s\n", status.reason());
    return false;
  }
  data.train = GaussianMixtureView(params, data.train_features, data.train_labels);
  data.test = GaussianMixtureView(params, data.test_features, data.test_labels);
  return true;
}

Result<FeedbackKind> ParseFeedback(const std::string& name) {
  if (name == "none") return FeedbackKind::kNone;
  if (name == "ef") return FeedbackKind::kEf;
  if (name == "def") return FeedbackKind::kDef;
  if (name == "saef") return FeedbackKind::kSaef;
  return Status::NotFound();
}

int RunTrain(const TrainOptions& options) {
  const HostResult<CodecParams> parsed = options.codec.Params();
  if (!parsed.ok()) {
    std::fprintf(stderr, "edgesgd train: %s\n", parsed.message().c_str());
    return 2;
  }
  const CodecParams codec = *parsed;
  FeedbackParams feedback;
  feedback.kind = ParseFeedback(options.feedback).value();
  feedback.detach = options.detach;
  feedback.learning_rate = options.lr;
  feedback.momentum = options.momentum;
  feedback.weight_decay = options.weight_decay;
  if (const Status status = ValidateFeedbackParams(feedback); !status.ok()) {
    std::fprintf(stderr, "edgesgd train: %s (--lr, --momentum, --weight-decay, --detach)\n",
                 status.reason());
    return 2;
  }

  if (const HostResult<> checked =
          CheckDataFiles(options.data, options.test_data, options.csv_label);
      !checked.ok()) {
    std::fprintf(stderr, "edgesgd train: %s\n", checked.message().c_str());
    return 2;
  }
  Data data;
  if (!LoadData(options, data)) return 1;
  ModelSpec spec;
  spec.kind = options.task == "mlp" ? ModelKind::kMlp : ModelKind::kSoftmaxRegression;
  spec.features = data.train.feature_dim;
  spec.classes = data.classes;
  spec.hidden = options.hidden;
  if (!options.network.model.empty()) {
    if (options.task != "softmax") {
      std::fprintf(stderr,
                   "edgesgd train: --model replaces softmax regression: it needs --task softmax\n");
      return 2;
    }
    HostResult<SequentialSpec> network =
        NetworkFor(options.network, options.data, spec.features, spec.classes);
    if (!network.ok()) {
      std::fprintf(stderr, "edgesgd train: %s\n", network.message().c_str());
      return 2;
    }
    spec.network = std::move(network).value();
    spec.kind = ModelKind::kSequential;
  } else if (!options.network.input_shape.empty()) {
    std::fprintf(stderr, "edgesgd train: --input-shape describes --model's input: give --model too\n");
    return 2;
  }
  const Result<TensorLayout> layout = ModelLayout(spec);
  if (!layout.ok()) {
    std::fprintf(stderr, "edgesgd train: invalid model shape: %s\n", layout.status().reason());
    return 2;
  }
  const std::size_t d = layout->dimension();

  // The memory plan: everything the training loop touches, taken from one arena up front.
  const std::size_t model_bytes = ArenaBytesFor<float>(d);
  const std::size_t gradient_bytes = ArenaBytesFor<float>(d);
  const std::size_t scratch_bytes = Model::ScratchBytes(spec);
  const std::size_t feedback_bytes = ErrorFeedbackWorker::StateBytes(*layout, codec, feedback);
  const Result<PayloadShape> shape = EncodedShape(codec, *layout);
  if (!shape.ok() || feedback_bytes == 0) {
    std::fprintf(stderr, "edgesgd train: invalid codec parameters for %s\n",
                 options.codec.codec().c_str());
    return 2;
  }
  const std::size_t payload_bytes = ArenaBytes(shape->bytes()) + 4 * kArenaAlignment;
  const std::size_t batch_bytes = ArenaBytesFor<float>(options.batch * spec.features) +
                                  ArenaBytesFor<std::uint8_t>(options.batch);
  // The server's decode of the upload (rand_k regenerates its indices in it).
  const std::size_t decode_bytes = ArenaBytes(CodecScratchBytes(codec, *layout));
  const std::size_t arena_bytes = model_bytes + gradient_bytes + scratch_bytes + feedback_bytes +
                                  payload_bytes + batch_bytes + decode_bytes;
  std::vector<std::byte> storage(arena_bytes + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};

  Model model;
  ErrorFeedbackWorker worker;
  std::span<float> params = arena.Allocate<float>(d).value();
  std::span<float> gradient = arena.Allocate<float>(d).value();
  if (!model.Init(spec, arena).ok() ||
      !worker.Init(arena, AllCodecs(), *layout, codec, feedback).ok()) {
    std::fprintf(stderr, "edgesgd train: memory plan too small (internal error)\n");
    return 1;
  }
  PayloadSpans payload{arena.Allocate<std::uint32_t>(shape->indices).value(),
                       arena.Allocate<float>(shape->values).value(),
                       arena.Allocate<std::uint32_t>(shape->words).value(),
                       arena.Allocate<float>(shape->scales).value()};
  BatchBuffers batch{arena.Allocate<float>(options.batch * spec.features).value(),
                     arena.Allocate<std::uint8_t>(options.batch).value(),
                     {}};
  const std::span<std::byte> decode_scratch =
      arena.AllocateBytes(CodecScratchBytes(codec, *layout)).value();
  arena.Seal();
  if (!model.InitParameters(options.seed, params).ok()) return 1;

  std::printf("edgesgd train: %s on %s (%zu train / %zu test samples), %zu parameters\n",
              options.task.c_str(), options.data.c_str(), data.train.num_samples,
              data.test.num_samples, d);
  std::printf("codec %s, feedback %s, lr %g, momentum %g, batch %zu, %zu rounds\n",
              options.codec.codec().c_str(), options.feedback.c_str(),
              static_cast<double>(options.lr),
              static_cast<double>(options.momentum), options.batch, options.rounds);
  std::printf("memory plan: arena %zu bytes = model %zu + gradient %zu + model scratch %zu + "
              "error feedback %zu + upload frame %zu + batch %zu + decode scratch %zu\n",
              arena.used_bytes(), model_bytes, gradient_bytes, scratch_bytes, feedback_bytes,
              payload_bytes, batch_bytes, decode_bytes);
  std::printf("upload: %zu bytes per round (dense fp32 would be %zu: %.1fx smaller)\n\n",
              shape->bytes(), 4 * d, 4.0 * static_cast<double>(d) /
                                         static_cast<double>(shape->bytes()));
  std::printf("%8s %12s %12s %10s %14s\n", "round", "train loss", "test loss", "test acc",
              "bytes sent");

  double loss_sum = 0;
  std::size_t loss_count = 0;
  std::size_t bytes_sent = 0;
  for (std::size_t round = 0; round < options.rounds; ++round) {
    CounterRng rng(options.seed, static_cast<std::uint32_t>(round), 0,
                   StreamId(RandomPurpose::kDataSampling, 0));
    const Result<DatasetView> sample = SampleBatch(data.train, {}, options.batch, rng, batch);
    Status status = sample.status();
    if (status.ok()) status = worker.BeginRound(params);
    Result<float> loss = Status::Internal();
    if (status.ok()) {
      loss = model.LossAndGradient(worker.GradientPoint(), *sample, gradient);
      status = loss.status();
    }
    if (status.ok()) status = worker.LocalStep(gradient);
    const CodecContext context{options.seed, static_cast<std::uint32_t>(round), 0};
    Result<PayloadShape> sent = Status::Internal();
    if (status.ok()) {
      sent = worker.Compress(context, payload);
      status = sent.status();
    }
    // What the server would apply: x -= C(p).
    if (status.ok()) {
      status = AllCodecs().DecodeAdd(worker.codec(), *layout, context, PayloadView(payload, *sent),
                                     -1.0f, params, decode_scratch);
    }
    if (!status.ok()) {
      std::fprintf(stderr, "edgesgd train: round %zu failed: %s (diverged? try a smaller --lr)\n",
                   round, status.reason());
      return 1;
    }
    bytes_sent += sent->bytes();
    loss_sum += static_cast<double>(*loss);
    ++loss_count;
    if ((round + 1) % options.eval_every == 0 || round + 1 == options.rounds) {
      // Byte features are evaluated through the batch buffers, free between rounds.
      const Result<Evaluation> evaluation = model.Evaluate(params, data.test, batch);
      if (!evaluation.ok()) return 1;
      std::printf("%8zu %12.4f %12.4f %9.2f%% %14zu\n", round + 1,
                  loss_sum / static_cast<double>(loss_count),
                  static_cast<double>(evaluation->loss),
                  100.0 * static_cast<double>(evaluation->accuracy), bytes_sent);
      std::fflush(stdout);
      loss_sum = 0;
      loss_count = 0;
    }
  }
  return 0;
}

}  // namespace

void AddTrainCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* train = app.add_subcommand(
      "train",
      "Single-device training with a federated worker's upload path: mini-batch gradients, "
      "error feedback and a codec; the model applies exactly the compressed update a server "
      "would receive. Prints loss, test accuracy and bytes sent.");
  AddConfigFlag(*train);
  train->add_option("--task", options->task, "Model: softmax regression or a one-hidden-layer MLP")
      ->capture_default_str()
      ->check(CLI::IsMember({"softmax", "mlp"}));
  train->add_option("--data", options->data, DataHelp())
      ->capture_default_str()
      ->check(DataValidator());
  train->add_option("--test-data", options->test_data, TestDataHelp());
  AddCsvLabelFlag(*train, options->csv_label);
  options->codec.Add(*train, "top_k", "Compressor of the upload:");
  train->add_option("--feedback", options->feedback,
                    "Error feedback: none, ef, def (detached, see --detach) or saef")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "ef", "def", "saef"}));
  train->add_option("--detach", options->detach, "DEF detach coefficient c in [0, 1]")
      ->capture_default_str();
  AddBoundedOption(*train, "--rounds", options->rounds, std::size_t{1}, std::size_t{100000000},
                   "Training steps (one upload each)");
  AddBoundedOption(*train, "--batch", options->batch, std::size_t{1}, std::size_t{65536},
                   "Mini-batch size");
  train->add_option("--lr", options->lr, "Learning rate")->capture_default_str();
  train->add_option("--momentum", options->momentum, "Heavy-ball momentum in [0, 1)")
      ->capture_default_str();
  train->add_option("--weight-decay", options->weight_decay, "L2 weight decay")
      ->capture_default_str();
  AddBoundedOption(*train, "--hidden", options->hidden, std::size_t{1}, std::size_t{65536},
                   "MLP hidden units");
  AddModelFlags(*train, options->network);
  AddBoundedOption(*train, "--samples", options->samples, std::size_t{10}, std::size_t{10000000},
                   "Synthetic data: samples per split");
  AddBoundedOption(*train, "--dim", options->dim, std::size_t{1}, std::size_t{1000000},
                   "Synthetic data: features per sample");
  train->add_option("--limit", options->limit,
                    "Fashion-MNIST or a data file: only the first N training samples (0 = all)")
      ->capture_default_str();
  AddBoundedOption(*train, "--eval-every", options->eval_every, std::size_t{1},
                   std::size_t{100000000}, "Rounds between test evaluations");
  train->add_option("--seed", options->seed, "Seed of initialisation, batches and codecs")
      ->capture_default_str();
  train->callback([options, &exit_code] { exit_code = RunTrain(*options); });
}

}  // namespace edgesgd::cli
