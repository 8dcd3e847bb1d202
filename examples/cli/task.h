#pragma once

// The training problems `edgesgd simulate` (and later `server`/`worker`) run: data for every
// worker, the model, the per-worker gradient oracle handed to the worker sessions, and the
// evaluation of a model (loss, accuracy, distance to the optimum). Host-side: buffers are
// allocated once at Setup; gradient and evaluation calls do not allocate.

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/data_sources.h"
#include "cli/model_flags.h"
#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/model.h"

namespace edgesgd::cli {

enum class TaskKind { kLinreg, kLogregToy, kQuadraticNoise, kSoftmax, kMlp };
enum class SplitKind { kIid, kSorted, kDirichlet };

struct TaskOptions {
  TaskKind kind = TaskKind::kSoftmax;
  // softmax/mlp: fashion-mnist, synthetic (a Gaussian mixture) or a data-file spec, and the
  // data file's test set (cli/data_sources.h)
  std::string data = "fashion-mnist";
  std::string test_data;
  platform::CsvLabelColumn csv_label = platform::CsvLabelColumn::kFirst;  // of CSV files
  SplitKind split = SplitKind::kIid;
  float dirichlet_alpha = 0.5f;
  std::size_t workers = 8;
  std::size_t batch = 32;       // 0 = full local batch
  std::size_t dimension = 100;  // linreg and quadratic-noise (d), synthetic softmax/mlp (features)
  std::size_t samples = 500;    // per worker: linreg and synthetic softmax/mlp
  std::size_t hidden = 64;      // mlp
  // softmax: a network of layers instead of softmax regression, when network.model is set.
  ModelFlags network;
  std::size_t train_limit = 0;  // Fashion-MNIST or a data file: first N samples (0 = all)
  std::uint64_t seed = 1;
  // Fashion-MNIST or a data file in a process that trains one worker alone (`edgesgd worker`):
  // that worker's index. The process then keeps every label (to split them as every process
  // does) but the features of its own rows only, and no test set: it cannot Evaluate.
  static constexpr std::size_t kEveryWorker = static_cast<std::size_t>(-1);
  std::size_t own_worker = kEveryWorker;
  // softmax/mlp: workers 0..label_flipped_workers-1 train on every label y read as
  // classes - 1 - y (`simulate --attack label_flip`, cli/attacks.h).
  std::size_t label_flipped_workers = 0;
  // A process that scores the model but computes no gradient (`edgesgd server`): of Fashion-MNIST
  // or a data file with a test set it keeps the training labels alone (to split them as the
  // workers do), and Gradient is refused.
  bool evaluates_only = false;
  // Gradients computed at once, on as many threads (a simulator's device threads): one batch
  // buffer and model scratch each.
  std::size_t compute_threads = 1;
};

// Figures of one evaluation; NaN where a figure does not apply.
struct TaskEvaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  double log10_dist_to_opt = std::numeric_limits<double>::quiet_NaN();
};

class Task {
 public:
  // Builds the data and per-worker buffers. Errors: a one-line explanation (missing data files,
  // invalid sizes).
  HostResult<> Setup(const TaskOptions& options);

  std::size_t dimension() const { return layout_.dimension(); }
  const TensorLayout& layout() const { return layout_; }
  std::size_t workers() const { return options_.workers; }
  // Samples behind one gradient call of a worker (for compute-time modelling).
  std::size_t samples_per_step(std::size_t worker) const;
  // The common starting point.
  void InitialModel(std::span<float> model) const;

  // Gradient of worker `worker`'s loss at `point` for (round, local step): a mini-batch drawn
  // from the worker's shard by CounterRng(seed, round, step, kDataSampling/worker) — or the full
  // shard when the batch is 0 — so it is a pure function of its arguments; with flipped labels
  // for a label-flipping worker (TaskOptions::label_flipped_workers). kFailedPrecondition for a
  // task that only evaluates (TaskOptions::evaluates_only). `thread` (below
  // TaskOptions::compute_threads) names the scratch the call uses: concurrent calls need
  // distinct threads. Does not allocate.
  Status Gradient(std::size_t worker, std::span<const float> point, std::uint32_t round,
                  std::uint32_t local_step, std::span<float> gradient, std::size_t thread = 0);

  // Test loss/accuracy (classification), training loss and log10 ||x - x*||^2 (linreg), or
  // f(x) (quadratic). Does not allocate.
  TaskEvaluation Evaluate(std::span<const float> model);

  // The adapter for protocol::WorkerOptions' gradient callback: `user` is a WorkerBinding.
  struct WorkerBinding {
    Task* task;
    std::size_t worker;
  };
  static Status GradientCallback(void* user, std::span<const float> point, std::uint32_t round,
                                 std::uint32_t local_step, std::span<float> gradient);
  WorkerBinding* binding(std::size_t worker) { return &bindings_[worker]; }

 private:
  struct WorkerState {
    DatasetView source;                   // the data the worker samples from
    std::span<const std::uint32_t> pool;  // its sample indices in `source` (empty: all)
  };
  // Where a gradient is computed: the gathered batch and the model's scratch. One per compute
  // thread, shared by all workers, so a simulated fleet of thousands costs its data and not
  // thousands of batch buffers.
  struct ComputeScratch {
    std::vector<float> batch_features;
    std::vector<std::uint8_t> batch_labels;
    std::vector<float> batch_targets;
    std::vector<std::byte> model_arena;
    std::unique_ptr<Model> model;
  };

  HostResult<> SetupClassification();
  HostResult<> SetupNetwork();
  HostResult<> SetupLinreg();
  HostResult<> SetupWorkers();
  HostResult<> KeepOwnShard(WorkerState& state);

  TaskOptions options_;
  ModelSpec spec_;
  TensorLayout layout_;
  // Owned sample storage (generated, or read from files into labeled_); classification workers
  // sample from train_ through index pools.
  std::vector<float> train_features_, test_features_, targets_, optimum_;
  std::vector<std::uint8_t> train_labels_, test_labels_;
  LabeledSets labeled_;
  DatasetView train_, test_;
  std::vector<std::uint32_t> shard_indices_;
  std::vector<std::size_t> shard_offsets_;
  // options_.own_worker's samples (its rows of the training set, in file order) and its pool
  // renumbered into them.
  platform::LabeledData own_shard_;
  std::vector<std::uint32_t> own_pool_;
  std::vector<WorkerState> states_;
  std::vector<ComputeScratch> compute_;  // one per compute thread
  std::vector<WorkerBinding> bindings_;
  std::vector<std::byte> eval_arena_;
  std::unique_ptr<Model> eval_model_;
  std::vector<float> eval_gradient_;
  // Float rows byte features are evaluated in.
  std::vector<float> eval_features_;
  std::vector<std::uint8_t> eval_labels_;
};

}  // namespace edgesgd::cli
