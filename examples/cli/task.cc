#include "cli/task.h"

#include <algorithm>
#include <cstring>

#include "cli/flag_error.h"
#include "edgesgd/core/data/partition.h"
#include "edgesgd/core/data/random_variates.h"
#include "edgesgd/core/data/synthetic.h"
#include "edgesgd/core/internal/reduce.h"

namespace edgesgd::cli {
namespace {

// Test samples of the synthetic classification task.
constexpr std::size_t kSyntheticTestSamples = 2000;
// Rows of a byte-feature test set gathered into floats at a time.
constexpr std::size_t kEvaluationRows = 256;

// y -> classes - 1 - y in place: a label-flipping worker's batch.
void FlipLabels(std::span<std::uint8_t> labels, std::size_t classes) {
  for (std::uint8_t& label : labels) {
    label = static_cast<std::uint8_t>(classes - 1 - std::size_t{label});
  }
}

std::unique_ptr<Model> MakeModel(const ModelSpec& spec, std::vector<std::byte>& storage) {
  storage.assign(Model::ScratchBytes(spec) + kArenaAlignment, std::byte{0});
  Arena arena{std::span<std::byte>(storage)};
  auto model = std::make_unique<Model>();
  if (!model->Init(spec, arena).ok()) return nullptr;
  return model;
}

}  // namespace

HostResult<> Task::Setup(const TaskOptions& options) {
  options_ = options;
  if (options.workers == 0) {
    return FlagError("--workers must be at least 1");
  }
  switch (options.kind) {
    case TaskKind::kLinreg:
      EDGESGD_HOST_TRY(SetupLinreg());
      return SetupWorkers();
    case TaskKind::kLogregToy: {
      if (options.workers != 2) {
        return FlagError("--task logreg-toy is the two-client toy: it needs --workers 2");
      }
      spec_ = {ModelKind::kLogisticRegression, 2, 2, 0, false};
      train_ = ToyLogisticDataset();
      test_ = train_;
      layout_ = ModelLayout(spec_).value();
      return SetupWorkers();
    }
    case TaskKind::kQuadraticNoise:
    {
      // d = --dim (experiment C uses SparseNoiseQuadratic::kDimension = 100, the default).
      const Result<TensorLayout> layout = TensorLayout::Single(options_.dimension);
      if (!layout.ok()) {
        return FlagError("--task quadratic-noise needs --dim >= 1");
      }
      layout_ = layout.value();
      return SetupWorkers();
    }
    case TaskKind::kSoftmax:
    case TaskKind::kMlp:
      EDGESGD_HOST_TRY(SetupClassification());
      return SetupWorkers();
  }
  return FlagError("unknown task");
}

HostResult<> Task::SetupLinreg() {
  LinearRegressionTaskParams params;
  params.clients = options_.workers;
  params.dimension = options_.dimension;
  params.samples_per_client = options_.samples;
  params.seed = options_.seed;
  const std::size_t rows = params.clients * params.samples_per_client;
  train_features_.resize(rows * params.dimension);
  targets_.resize(rows);
  std::vector<float> true_models(params.clients * params.dimension);
  if (!GenerateLinearRegressionTask(params, train_features_, targets_, true_models).ok()) {
    return FlagError("cannot generate the linear-regression task (check --dim and --samples)");
  }
  train_ = LinearRegressionTaskView(params, train_features_, targets_);
  test_ = train_;
  optimum_.resize(params.dimension);
  std::vector<std::byte> scratch(LeastSquaresScratchBytes(params.dimension));
  if (!SolveLeastSquares(train_, optimum_, scratch).ok()) {
    return FlagError(
        "linear-regression task: fewer samples than unknowns, no unique optimum "
        "(raise --samples)");
  }
  spec_ = {ModelKind::kLinearRegression, params.dimension, 0, 0, false};
  layout_ = ModelLayout(spec_).value();
  return {};
}

HostResult<> Task::SetupClassification() {
  std::size_t classes = 10;
  if (options_.data != "synthetic" && options_.own_worker != TaskOptions::kEveryWorker) {
    // The features of its own rows are loaded once the labels have been split (KeepOwnShard).
    platform::DataReadOptions labels;
    labels.labels_only = true;
    labels.csv_label = options_.csv_label;
    HostResult<platform::LabeledData> train =
        LoadTrainingRows(options_.data, options_.train_limit, labels);
    if (!train.ok()) return std::move(train).error();
    labeled_.train = std::move(train).value();
    classes = labeled_.train.num_classes;
    train_ = labeled_.train.View();
  } else if (options_.data != "synthetic") {
    HostResult<LabeledSets> labeled =
        LoadLabeledData(options_.data, options_.test_data, options_.csv_label, options_.train_limit,
                        options_.evaluates_only);
    if (!labeled.ok()) return std::move(labeled).error();
    labeled_ = std::move(labeled).value();
    classes = labeled_.train.num_classes;
    train_ = labeled_.train.View();
    test_ = labeled_.Evaluated();
  } else {
    GaussianMixtureParams params;
    params.classes = classes;
    params.dimension = options_.dimension;
    params.samples = options_.samples * options_.workers;
    params.seed = options_.seed;
    train_features_.resize(params.samples * params.dimension);
    train_labels_.resize(params.samples);
    Status status = GenerateGaussianMixture(params, train_features_, train_labels_);
    params.split = 1;
    params.samples = kSyntheticTestSamples;
    test_features_.resize(params.samples * params.dimension);
    test_labels_.resize(params.samples);
    if (status.ok()) status = GenerateGaussianMixture(params, test_features_, test_labels_);
    if (!status.ok()) {
      return FlagError(
          "cannot generate the synthetic classification data (check --dim, --samples)");
    }
    params.samples = options_.samples * options_.workers;
    params.split = 0;
    train_ = GaussianMixtureView(params, train_features_, train_labels_);
    params.samples = kSyntheticTestSamples;
    params.split = 1;
    test_ = GaussianMixtureView(params, test_features_, test_labels_);
  }
  spec_.kind = options_.kind == TaskKind::kMlp ? ModelKind::kMlp : ModelKind::kSoftmaxRegression;
  spec_.features = train_.feature_dim;
  spec_.classes = classes;
  spec_.hidden = options_.hidden;
  spec_.bias = true;
  if (!options_.network.model.empty()) EDGESGD_HOST_TRY(SetupNetwork());
  const Result<TensorLayout> layout = ModelLayout(spec_);
  if (!layout.ok()) {
    return FlagError("invalid model shape (check --hidden)");
  }
  layout_ = *layout;
  if (train_.num_samples < options_.workers) {
    return FlagError("fewer training samples than workers");
  }
  return {};
}

HostResult<> Task::SetupNetwork() {
  HostResult<SequentialSpec> network =
      NetworkFor(options_.network, options_.data, spec_.features, spec_.classes);
  if (!network.ok()) return std::move(network).error();
  spec_.network = std::move(network).value();
  spec_.kind = ModelKind::kSequential;
  return {};
}

HostResult<> Task::SetupWorkers() {
  const std::size_t n = options_.workers;
  states_.clear();
  states_.resize(n);
  bindings_.resize(n);
  // Classification shards: index lists into train_.
  if (options_.kind == TaskKind::kSoftmax || options_.kind == TaskKind::kMlp) {
    shard_indices_.resize(train_.num_samples);
    shard_offsets_.resize(n + 1);
    Status status;
    switch (options_.split) {
      case SplitKind::kIid:
        status = PartitionIid(train_.num_samples, n, options_.seed, shard_indices_, shard_offsets_);
        break;
      case SplitKind::kSorted:
        status = PartitionSortedByLabel(train_, n, shard_indices_, shard_offsets_);
        break;
      case SplitKind::kDirichlet: {
        std::vector<std::byte> scratch(DirichletScratchBytes(train_.num_classes, n));
        status = PartitionDirichlet(train_, n, options_.dirichlet_alpha, options_.seed,
                                    shard_indices_, shard_offsets_, scratch);
        break;
      }
    }
    if (!status.ok()) {
      return FlagError(std::string("cannot split the data over the workers: ") + status.str());
    }
  }
  const bool has_model = options_.kind != TaskKind::kQuadraticNoise;
  std::size_t most_rows = 0;
  for (std::size_t w = 0; w < n; ++w) {
    WorkerState& state = states_[w];
    bindings_[w] = {this, w};
    switch (options_.kind) {
      case TaskKind::kLinreg:
        state.source = SliceRows(train_, w * options_.samples, options_.samples).value();
        break;
      case TaskKind::kLogregToy:
        state.source = ToyLogisticClient(w);
        break;
      case TaskKind::kQuadraticNoise:
        break;
      case TaskKind::kSoftmax:
      case TaskKind::kMlp: {
        state.source = train_;
        state.pool = std::span<const std::uint32_t>(shard_indices_)
                         .subspan(shard_offsets_[w], shard_offsets_[w + 1] - shard_offsets_[w]);
        if (state.pool.empty()) {
          return FlagError("a worker received no samples (too many workers for this split)");
        }
        if (w == options_.own_worker && options_.data != "synthetic") {
          EDGESGD_HOST_TRY(KeepOwnShard(state));
        }
        break;
      }
    }
    most_rows = std::max(most_rows, samples_per_step(w));
  }
  compute_.clear();
  compute_.resize(has_model ? std::max<std::size_t>(options_.compute_threads, 1) : 0);
  for (ComputeScratch& scratch : compute_) {
    scratch.batch_features.resize(most_rows * spec_.features);
    if (states_.front().source.has_labels()) scratch.batch_labels.resize(most_rows);
    if (states_.front().source.has_targets()) scratch.batch_targets.resize(most_rows);
    scratch.model = MakeModel(spec_, scratch.model_arena);
    if (scratch.model == nullptr) {
      return FlagError("invalid model");
    }
  }
  if (has_model) {
    eval_model_ = MakeModel(spec_, eval_arena_);
    if (eval_model_ == nullptr) {
      return FlagError("invalid model");
    }
  }
  if (test_.has_byte_features()) {
    eval_features_.resize(kEvaluationRows * test_.feature_dim);
    eval_labels_.resize(kEvaluationRows);
  }
  return {};
}

HostResult<> Task::KeepOwnShard(WorkerState& state) {
  // Rows in file order, read in one pass; the pool renumbered into them draws the same samples.
  std::vector<std::uint32_t> rows(state.pool.begin(), state.pool.end());
  std::sort(rows.begin(), rows.end());
  own_pool_.resize(state.pool.size());
  for (std::size_t i = 0; i < own_pool_.size(); ++i) {
    own_pool_[i] = static_cast<std::uint32_t>(
        std::lower_bound(rows.begin(), rows.end(), state.pool[i]) - rows.begin());
  }
  platform::DataReadOptions options;
  options.rows = rows;
  options.classes = labeled_.train.num_classes;
  options.csv_label = options_.csv_label;
  HostResult<platform::LabeledData> shard =
      LoadTrainingRows(options_.data, options_.train_limit, options);
  if (!shard.ok()) return std::move(shard).error();
  own_shard_ = std::move(shard).value();
  state.source = own_shard_.View();
  state.pool = own_pool_;
  return {};
}

std::size_t Task::samples_per_step(std::size_t worker) const {
  if (options_.kind == TaskKind::kQuadraticNoise) return 1;
  const WorkerState& state = states_[worker];
  const std::size_t shard = state.pool.empty() ? state.source.num_samples : state.pool.size();
  return options_.batch == 0 ? shard : options_.batch;
}

void Task::InitialModel(std::span<float> model) const {
  switch (options_.kind) {
    case TaskKind::kLogregToy:
      std::copy(kToyLogisticInitialParams.begin(), kToyLogisticInitialParams.end(), model.begin());
      return;
    case TaskKind::kQuadraticNoise:
      (void)SparseNoiseQuadratic::InitialPoint(options_.seed, 0, model);
      return;
    default:
      (void)InitModelParameters(spec_, options_.seed, model);
      return;
  }
}

Status Task::Gradient(std::size_t worker, std::span<const float> point, std::uint32_t round,
                      std::uint32_t local_step, std::span<float> gradient, std::size_t thread) {
  if (worker >= states_.size()) return Status::OutOfRange();
  if (options_.evaluates_only) {
    return Status::FailedPrecondition("this process scores the model and computes no gradient");
  }
  CounterRng rng(options_.seed, round, local_step,
                 StreamId(RandomPurpose::kDataSampling, static_cast<std::uint32_t>(worker)));
  if (options_.kind == TaskKind::kQuadraticNoise) {
    NormalRng normal(rng);
    return SparseNoiseQuadratic::StochasticGradient(point, normal, gradient);
  }
  if (thread >= compute_.size()) return Status::OutOfRange("no compute scratch for this thread");
  ComputeScratch& scratch = compute_[thread];
  const WorkerState& state = states_[worker];
  const std::size_t rows = samples_per_step(worker);
  const BatchBuffers buffers{
      std::span<float>(scratch.batch_features).first(rows * spec_.features),
      std::span<std::uint8_t>(scratch.batch_labels).first(std::min(rows, scratch.batch_labels.size())),
      std::span<float>(scratch.batch_targets).first(std::min(rows, scratch.batch_targets.size()))};
  Result<DatasetView> batch = state.source;
  if (options_.batch == 0) {
    if (!state.pool.empty()) batch = GatherRows(state.source, state.pool, buffers);
  } else {
    batch = SampleBatch(state.source, state.pool, options_.batch, rng, buffers);
  }
  EDGESGD_TRY(batch.status());
  // Classification batches are always gathered into the worker's own buffers (its pool is never
  // empty), so flipping them leaves the shared data alone.
  if (worker < options_.label_flipped_workers) FlipLabels(buffers.labels, spec_.classes);
  return scratch.model->LossAndGradient(point, *batch, gradient).status();
}

TaskEvaluation Task::Evaluate(std::span<const float> model) {
  TaskEvaluation evaluation;
  if (options_.kind == TaskKind::kQuadraticNoise) {
    evaluation.loss = static_cast<double>(SparseNoiseQuadratic::Loss(model));
    return evaluation;
  }
  const Result<Evaluation> result =
      eval_model_->Evaluate(model, test_, {eval_features_, eval_labels_, {}});
  if (result.ok()) {
    evaluation.loss = static_cast<double>(result->loss);
    if (spec_.kind != ModelKind::kLinearRegression) {
      evaluation.accuracy = static_cast<double>(result->accuracy);
    }
  }
  if (!optimum_.empty()) {
    double squared = 0;
    for (std::size_t i = 0; i < optimum_.size(); ++i) {
      const double diff = static_cast<double>(model[i]) - static_cast<double>(optimum_[i]);
      squared += diff * diff;
    }
    evaluation.log10_dist_to_opt = squared > 0 ? std::log10(squared) : -std::numeric_limits<double>::infinity();
  }
  return evaluation;
}

Status Task::GradientCallback(void* user, std::span<const float> point, std::uint32_t round,
                              std::uint32_t local_step, std::span<float> gradient) {
  auto* binding = static_cast<WorkerBinding*>(user);
  return binding->task->Gradient(binding->worker, point, round, local_step, gradient);
}

}  // namespace edgesgd::cli
