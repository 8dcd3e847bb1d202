#include "edgesgd/core/optimizer.h"

#include <algorithm>

#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/majority_vote.h"

namespace edgesgd {

Status Optimizer::Init(Arena& arena, std::size_t dimension, const OptimizerParams& params) {
  EDGESGD_TRY(ValidateOptimizerParams(params));
  if (dimension == 0) return Status::InvalidArgument("the dimension is 0");
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(dimension, params)) {
    return Status::ResourceExhausted("the arena is too small for the optimizer's state");
  }
  momentum_ = {};
  if (params.kind != OptimizerKind::kSgd) {
    EDGESGD_TRY_ASSIGN(momentum_, arena.Allocate<float>(dimension));
  }
  params_ = params;
  dimension_ = dimension;
  initialized_ = true;
  return Status::Ok();
}

void Optimizer::Reset() { std::fill(momentum_.begin(), momentum_.end(), 0.0f); }

Status Optimizer::SetLearningRate(float learning_rate) {
  OptimizerParams changed = params_;
  changed.learning_rate = learning_rate;
  EDGESGD_TRY(ValidateOptimizerParams(changed));
  params_ = changed;
  return Status::Ok();
}

Status Optimizer::Step(std::span<float> model, std::span<const float> gradient) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (model.size() != dimension_ || gradient.size() != dimension_) {
    return Status::InvalidArgument("the model's or the gradient's size differs from the dimension");
  }
  const float lr = params_.learning_rate;
  const float wd = params_.weight_decay;
  const float beta = params_.momentum;
  const std::size_t d = dimension_;
  switch (params_.kind) {
    case OptimizerKind::kSgd:
      for (std::size_t i = 0; i < d; ++i) model[i] -= lr * (gradient[i] + wd * model[i]);
      break;
    case OptimizerKind::kMomentum:
      // The grouping beta*m + (g + wd*x) is the error-feedback worker's, so a 1-worker identity
      // EF run and this optimizer produce the same bits.
      for (std::size_t i = 0; i < d; ++i) {
        const float m = beta * momentum_[i] + (gradient[i] + wd * model[i]);
        momentum_[i] = m;
        model[i] -= lr * m;
      }
      break;
    case OptimizerKind::kSignum: {
      const float one_minus_beta = 1.0f - beta;
      for (std::size_t i = 0; i < d; ++i) {
        const float m = beta * momentum_[i] + one_minus_beta * gradient[i];
        momentum_[i] = m;
        const float sign = m < 0.0f ? -1.0f : 1.0f;
        model[i] -= lr * (sign + wd * model[i]);
      }
      break;
    }
  }
  return Status::Ok();
}

Status SignumMomentumUpdate(float beta, std::span<const float> gradient, std::span<float> state) {
  if (!(beta >= 0.0f && beta < 1.0f)) {
    return Status::InvalidArgument("the Signum momentum (beta) must be in [0, 1)");
  }
  if (gradient.size() != state.size()) {
    return Status::InvalidArgument("the gradient's size differs from the state's");
  }
  const float one_minus_beta = 1.0f - beta;
  for (std::size_t i = 0; i < state.size(); ++i) {
    state[i] = beta * state[i] + one_minus_beta * gradient[i];
  }
  return Status::Ok();
}

Status ApplySignVote(std::span<const std::uint32_t> vote_words, const TensorLayout& layout,
                     float learning_rate, float weight_decay, std::span<float> model) {
  OptimizerParams check;
  check.learning_rate = learning_rate;
  check.weight_decay = weight_decay;
  EDGESGD_TRY(ValidateOptimizerParams(check));
  if (layout.tensor_count() == 0 || model.size() != layout.dimension()) {
    return Status::InvalidArgument(
        "the layout is empty or the model's size differs from its dimension");
  }
  std::size_t total_words = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    total_words += SignCodec::WordsFor(layout.size(t));
  }
  if (vote_words.size() != total_words) {
    return Status::DataLoss("the vote's word count differs from the layout's");
  }
  EDGESGD_TRY(internal::CheckSignPadding(layout, vote_words));

  const float lr = learning_rate;
  const float wd = weight_decay;
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<float> x = layout.Slice(model, t);
    // A word at a time, the vote as arithmetic on its bit: the inner loop has a fixed trip count
    // and no branch, so the compiler vectorizes it.
    for (std::size_t base = 0; base < x.size(); base += 32) {
      const std::uint32_t bits = vote_words[word + base / 32];
      const std::size_t count = std::min<std::size_t>(32, x.size() - base);
      float* const coordinates = x.data() + base;
      for (std::size_t j = 0; j < count; ++j) {
        const auto bit = static_cast<std::int32_t>((bits >> j) & 1u);
        const auto vote = static_cast<float>(2 * bit - 1);
        coordinates[j] -= lr * (vote + wd * coordinates[j]);
      }
    }
    word += SignCodec::WordsFor(x.size());
  }
  return Status::Ok();
}

}  // namespace edgesgd
