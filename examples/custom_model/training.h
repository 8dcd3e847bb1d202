#pragma once

// Where the model meets edgesgd: a device's shard of the training rows, and the gradient function
// its worker session calls at every local step.

#include <cstdint>
#include <span>

#include "csv_data.h"
#include "edgesgd/core/status.h"
#include "model.h"

namespace custom_model {

// The rows worker `index` (0-based) of `workers` trains on: the index-th of `workers` contiguous
// blocks of nearly equal size. The rows come in random order, so every block is a fair sample.
Dataset ShardOf(const Dataset& train, std::uint32_t index, std::uint32_t workers);

// The fraction of `data`'s rows whose label `model` predicts.
double Accuracy(Mlp& model, std::span<const float> parameters, const Dataset& data);

// One device's training: a model of its own (with the scratch the gradient needs), its shard
// and the mini-batch schedule. Allocates in the constructor and SetShard, never in Gradient.
class ShardTrainer {
 public:
  explicit ShardTrainer(MlpShape shape);

  // The rows this device trains on, `batch` rows per gradient and `local_steps` gradients per
  // round (the run's RunConfig::batch and feedback.local_steps). A worker over TCP learns the
  // run in tcp::WorkerSettings::on_welcome, and calls this there.
  void SetShard(Dataset shard, std::uint32_t batch, std::uint32_t local_steps);

  // What protocol::GradientFunction asks for: the mean cross-entropy gradient at `point` over
  // the mini-batch of (round, local_step), into `gradient`. Each step takes the next `batch`
  // rows of the shard, wrapping around: the same arguments always give the same gradient, so
  // a run repeats exactly.
  edgesgd::Status Gradient(std::span<const float> point, std::uint32_t round,
                           std::uint32_t local_step, std::span<float> gradient);

  // Gradient as a protocol::GradientFunction: `user` is the ShardTrainer.
  static edgesgd::Status GradientFunction(void* user, std::span<const float> point,
                                          std::uint32_t round, std::uint32_t local_step,
                                          std::span<float> gradient);

 private:
  Mlp model_;
  Dataset shard_;
  std::uint32_t batch_ = 1;
  std::uint32_t local_steps_ = 1;
};

}  // namespace custom_model
