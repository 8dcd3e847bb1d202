#include "training.h"

#include <algorithm>
#include <utility>

namespace custom_model {

Dataset ShardOf(const Dataset& train, std::uint32_t index, std::uint32_t workers) {
  const std::size_t rows = train.rows();
  return Rows(train, rows * index / workers, rows * (index + 1) / workers);
}

double Accuracy(Mlp& model, std::span<const float> parameters, const Dataset& data) {
  std::size_t correct = 0;
  for (std::size_t i = 0; i < data.rows(); ++i) {
    if (model.Predict(parameters, data.row(i)) == data.labels[i]) ++correct;
  }
  return static_cast<double>(correct) / static_cast<double>(data.rows());
}

ShardTrainer::ShardTrainer(MlpShape shape) : model_(shape) {}

void ShardTrainer::SetShard(Dataset shard, std::uint32_t batch, std::uint32_t local_steps) {
  shard_ = std::move(shard);
  batch_ = batch;
  local_steps_ = local_steps;
}

edgesgd::Status ShardTrainer::Gradient(std::span<const float> point, std::uint32_t round,
                                       std::uint32_t local_step, std::span<float> gradient) {
  // The worker skips the round (and counts it) rather than train on nonsense.
  if (point.size() != model_.Layout().dimension()) {
    return edgesgd::Status::InvalidArgument("the run's model is not this program's MLP");
  }
  if (shard_.rows() == 0) return edgesgd::Status::FailedPrecondition("no rows to train on");

  const std::uint64_t step = std::uint64_t{round} * local_steps_ + local_step;
  const std::size_t first = static_cast<std::size_t>(step * batch_ % shard_.rows());
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  for (std::size_t i = 0; i < batch_; ++i) {
    const std::size_t row = (first + i) % shard_.rows();
    model_.AddSampleGradient(point, shard_.row(row), shard_.labels[row], gradient);
  }
  const float mean = 1.0f / static_cast<float>(batch_);
  for (float& g : gradient) g *= mean;
  return edgesgd::Status::Ok();
}

edgesgd::Status ShardTrainer::GradientFunction(void* user, std::span<const float> point,
                                               std::uint32_t round, std::uint32_t local_step,
                                               std::span<float> gradient) {
  return static_cast<ShardTrainer*>(user)->Gradient(point, round, local_step, gradient);
}

}  // namespace custom_model
