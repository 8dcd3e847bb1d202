#include "edgesgd/core/error_feedback.h"

#include <algorithm>
#include <cstdint>
#include <variant>

#include "edgesgd/core/privacy/differential_privacy.h"

namespace edgesgd {

Status ErrorFeedbackWorker::Init(Arena& arena, const CodecRegistry& codecs,
                                 const TensorLayout& layout, const CodecParams& codec,
                                 const FeedbackParams& feedback, CodecScratch scratch) {
  EDGESGD_TRY(ValidateFeedbackParams(feedback));
  if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(codec, layout));
  EDGESGD_TRY_ASSIGN(const CodecOps* ops, codecs.For(codec));
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  // Checking the total first keeps a failed Init from leaving half a worker in the arena.
  if (arena.remaining_bytes() < StateBytes(layout, codec, feedback, scratch)) {
    return Status::ResourceExhausted("the arena is too small for the worker's state");
  }

  const Buffers buffers = BuffersFor(feedback);
  const std::size_t d = layout.dimension();
  EDGESGD_TRY_ASSIGN(point_, arena.Allocate<float>(d));
  local_ = point_;
  gradient_point_ = point_;
  if (buffers.separate_local) {
    EDGESGD_TRY_ASSIGN(local_, arena.Allocate<float>(d));
  }
  momentum_ = {};
  if (buffers.momentum) {
    EDGESGD_TRY_ASSIGN(momentum_, arena.Allocate<float>(d));
  }
  error_ = {};
  if (buffers.error) {
    EDGESGD_TRY_ASSIGN(error_, arena.Allocate<float>(d));
  }
  own_delta_ = error_;
  if (buffers.separate_delta) {
    EDGESGD_TRY_ASSIGN(own_delta_, arena.Allocate<float>(d));
  }
  delta_ = own_delta_;
  selector_ = SelectorState{};
  if (ops->selector_encode != nullptr) {
    EDGESGD_TRY_ASSIGN(selector_.values, arena.Allocate<float>(SelectorStateFloats(codec, layout)));
    ops->selector_reset(codec, selector_);
  }
  scratch_ = {};
  lent_scratch_bytes_ = 0;
  if (scratch == CodecScratch::kOwned) {
    EDGESGD_TRY_ASSIGN(scratch_, arena.AllocateBytes(CodecScratchBytes(codec, layout)));
  } else {
    lent_scratch_bytes_ = CodecScratchBytes(codec, layout);
  }
  scratch_source_ = scratch;

  layout_ = layout;
  codec_ = codec;
  init_codec_ = codec;
  ops_ = ops;
  feedback_ = feedback;
  shape_ = shape;
  init_shape_ = shape;
  buffers_ = buffers;
  detach_ = EffectiveDetach(feedback);
  steps_ = 0;
  phase_ = Phase::kIdle;
  return Status::Ok();
}

Status ErrorFeedbackWorker::SetRoundParams(const CodecParams& params) {
  if (phase_ == Phase::kUninitialized) return Status::FailedPrecondition("not initialized");
  if (CodecIdOf(params) != CodecIdOf(init_codec_)) {
    return Status::InvalidArgument("the round's parameters are of another codec");
  }
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(params, layout_));
  if (shape.indices > init_shape_.indices || shape.values > init_shape_.values ||
      shape.words > init_shape_.words || shape.scales > init_shape_.scales ||
      CodecScratchBytes(params, layout_) > CodecScratchBytes(init_codec_, layout_)) {
    return Status::InvalidArgument("the round's payload would not fit the Init codec's buffers");
  }
  codec_ = params;
  shape_ = shape;
  return Status::Ok();
}

void ErrorFeedbackWorker::FoldDeltaIntoResidual() {
  if (!buffers_.error || !buffers_.separate_delta || delta_is_fresh()) return;
  for (std::size_t i = 0; i < error_.size(); ++i) {
    error_[i] += delta_[i];
    delta_[i] = 0.0f;
  }
}

Status ErrorFeedbackWorker::BeginRound(std::span<const float> synced_model,
                                       PointSource source) {
  if (phase_ == Phase::kUninitialized) {
    return Status::FailedPrecondition("Init has not been called");
  }
  if (synced_model.size() != point_.size()) {
    return Status::InvalidArgument("the synced model's size differs from the layout's dimension");
  }
  if (phase_ == Phase::kInRound) FoldDeltaIntoResidual();

  const std::span<const float> x = synced_model;
  if (buffers_.separate_local) {
    std::copy(x.begin(), x.end(), local_.begin());
  }
  gradient_point_ = point_;
  if (detach_ > 0.0f) {
    const float c = detach_;
    for (std::size_t i = 0; i < point_.size(); ++i) point_[i] = x[i] - c * error_[i];
  } else if (source == PointSource::kBorrow && feedback_.local_steps == 1) {
    gradient_point_ = x;  // the one step reads the point and never advances it
  } else {
    std::copy(x.begin(), x.end(), point_.begin());
  }
  steps_ = 0;  // a separate delta is fresh again (delta_is_fresh)
  delta_ = own_delta_;
  phase_ = Phase::kInRound;
  return Status::Ok();
}

Status ErrorFeedbackWorker::LocalStep(std::span<const float> gradient) {
  if (phase_ != Phase::kInRound || steps_ >= feedback_.local_steps) {
    return Status::FailedPrecondition("no round is open, or its local steps are all taken");
  }
  if (gradient.size() != point_.size()) {
    return Status::InvalidArgument("the gradient's size differs from the layout's dimension");
  }
  const bool fresh_delta = delta_is_fresh();
  if (buffers_.momentum) {
    fresh_delta ? Step<true, true>(gradient) : Step<true, false>(gradient);
  } else {
    fresh_delta ? Step<false, true>(gradient) : Step<false, false>(gradient);
  }
  ++steps_;
  return Status::Ok();
}

bool ErrorFeedbackWorker::CanAccumulateInPayload() const {
  return !buffers_.error && std::holds_alternative<IdentityParams>(codec_);
}

Status ErrorFeedbackWorker::AccumulateInPayload(std::span<float> values) {
  if (phase_ != Phase::kInRound || steps_ != 0 || !CanAccumulateInPayload()) {
    return Status::FailedPrecondition(
        "the delta can go into the payload only at a round's start, without a residual and "
        "with the identity codec");
  }
  if (values.size() != point_.size()) {
    return Status::InvalidArgument("the payload's values differ in size from the model");
  }
  delta_ = values;
  return Status::Ok();
}

Status ErrorFeedbackWorker::AddProximalGradient(std::span<float> gradient) const {
  if (phase_ != Phase::kInRound || steps_ >= feedback_.local_steps) {
    return Status::FailedPrecondition("no round is open, or its local steps are all taken");
  }
  if (gradient.size() != point_.size()) {
    return Status::InvalidArgument("the gradient's size differs from the layout's dimension");
  }
  const float mu = feedback_.prox_mu;
  if (mu == 0.0f || steps_ == 0) return Status::Ok();
  // A round with a second step (H > 1) keeps delta apart from the residual: y = x - delta.
  for (std::size_t i = 0; i < gradient.size(); ++i) gradient[i] -= mu * delta_[i];
  return Status::Ok();
}

template <bool kMomentum, bool kFreshDelta>
void ErrorFeedbackWorker::Step(std::span<const float> gradient) {
  const float lr = feedback_.learning_rate;
  const float beta = feedback_.momentum;
  const float wd = feedback_.weight_decay;
  const std::size_t d = point_.size();
  // m = beta * m + g, kept for the next step; without a buffer (beta = 0) m is g itself.
  // Captures by default: the version without momentum uses neither `this` nor beta.
  const auto next_momentum = [&](std::size_t i, float g) {
    if constexpr (kMomentum) {
      const float m = beta * momentum_[i] + g;
      momentum_[i] = m;
      return m;
    } else {
      return g;
    }
  };
  // delta += step; a fresh delta is zero, so the sum is formed without reading it (0 + step keeps
  // the sign of a zero as the accumulation would).
  const auto accumulate = [&](std::size_t i, float step) {
    if constexpr (kFreshDelta) {
      delta_[i] = 0.0f + step;
    } else {
      delta_[i] += step;
    }
  };
  // Three loops rather than one with branches inside, so each vectorises. The expression
  // order (g + wd*point, then beta*m + g) follows docs/algorithms.md §2; bit-exact tests
  // reproduce it.
  if (feedback_.local_steps == 1) {
    // The only step of the round: the local model is never read again, so only m and delta
    // (which may be the residual itself) advance.
    const std::span<const float> point = gradient_point_;
    if (wd == 0.0f) {
      // Without weight decay the point is not read at all: one stream of d floats fewer.
      for (std::size_t i = 0; i < d; ++i) accumulate(i, lr * next_momentum(i, gradient[i]));
    } else {
      for (std::size_t i = 0; i < d; ++i) {
        const float g = gradient[i] + wd * point[i];
        accumulate(i, lr * next_momentum(i, g));
      }
    }
  } else if (!buffers_.separate_local) {
    // c = 0: the gradient point is the local model.
    for (std::size_t i = 0; i < d; ++i) {
      const float g = gradient[i] + wd * point_[i];
      const float step = lr * next_momentum(i, g);
      point_[i] -= step;
      accumulate(i, step);
    }
  } else {
    // The residual is fixed during a round (delta is separate), so the point follows the
    // local model at a constant offset -c*e.
    const float c = detach_;
    for (std::size_t i = 0; i < d; ++i) {
      const float g = gradient[i] + wd * point_[i];
      const float step = lr * next_momentum(i, g);
      local_[i] -= step;
      accumulate(i, step);
      point_[i] = local_[i] - c * error_[i];
    }
  }
}

Result<PayloadShape> ErrorFeedbackWorker::Compress(const CodecContext& context,
                                                   const PayloadSpans& out,
                                                   std::span<std::byte> lent_scratch) {
  if (phase_ != Phase::kInRound) {
    return Status::FailedPrecondition("no round is open, or its update was already compressed");
  }
  // The codec would reject short spans too, but only after the residual has become p; checking
  // here first makes this error side-effect free.
  if (out.indices.size() < shape_.indices || out.values.size() < shape_.values ||
      out.words.size() < shape_.words || out.scales.size() < shape_.scales ||
      (scratch_source_ == CodecScratch::kLent && lent_scratch.size() < lent_scratch_bytes_)) {
    return Status::ResourceExhausted(
        "an output span or the lent scratch is smaller than the codec needs");
  }
  // Codecs view scratch as arrays of 4- or 8-byte words, as the arena's own would allow.
  if (scratch_source_ == CodecScratch::kLent &&
      reinterpret_cast<std::uintptr_t>(lent_scratch.data()) % kArenaAlignment != 0) {
    return Status::InvalidArgument("the lent scratch is not 16-byte aligned");
  }
  const std::span<std::byte> scratch =
      scratch_source_ == CodecScratch::kLent ? lent_scratch : scratch_;

  if (!buffers_.error) {
    if (delta_is_fresh()) std::fill(delta_.begin(), delta_.end(), 0.0f);  // a round without steps
    if (kDifferentialPrivacy && clip_norm_ > 0.0f)
      norm_before_clipping_ = ClipToNorm(delta_, clip_norm_);
    // A delta accumulated in these very values is already its identity encoding.
    if (delta_.data() != out.values.data()) {
      EDGESGD_TRY(EncodeWithSelection(context, delta_, out, scratch));
    }
    phase_ = Phase::kSent;
    return shape_;
  }
  // p = delta + e, formed in the residual's storage. FoldDeltaIntoResidual clears delta, so a
  // retry after a failure below cannot count it twice.
  FoldDeltaIntoResidual();
  if (kDifferentialPrivacy && clip_norm_ > 0.0f)
    norm_before_clipping_ = ClipToNorm(error_, clip_norm_);
  EDGESGD_TRY(EncodeWithSelection(context, error_, out, scratch));
  // e = p - C(p): the fused decompress-and-subtract.
  EDGESGD_TRY(
      ops_->decode_add(codec_, layout_, context, PayloadView(out, shape_), -1.0f, error_, scratch));
  phase_ = Phase::kSent;
  return shape_;
}

IdleMemory ErrorFeedbackWorker::IdleBuffers() const {
  IdleMemory idle;
  if (phase_ != Phase::kSent) return idle;
  idle.Add(point_);
  if (buffers_.separate_local) idle.Add(local_);
  if (buffers_.separate_delta) idle.Add(own_delta_);
  idle.Add(scratch_);
  return idle;
}

Status ErrorFeedbackWorker::EncodeWithSelection(const CodecContext& context,
                                                std::span<const float> input,
                                                const PayloadSpans& out,
                                                std::span<std::byte> scratch) {
  if (ops_->selector_encode != nullptr) {
    return ops_->selector_encode(codec_, layout_, selector_, input, out, scratch);
  }
  return ops_->encode(codec_, layout_, context, input, out, scratch);
}

Status ErrorFeedbackWorker::ObserveAggregate(std::span<const float> mean_update,
                                             std::uint32_t contributors) {
  if (ops_ == nullptr || ops_->selector_observe == nullptr) return Status::Ok();
  return ops_->selector_observe(codec_, selector_, mean_update, contributors);
}

Status ErrorFeedbackWorker::ObserveModelChange(std::span<const float> model_before,
                                               std::span<const float> model_after,
                                               std::uint32_t contributors) {
  if (ops_ == nullptr || ops_->selector_observe_change == nullptr) return Status::Ok();
  return ops_->selector_observe_change(codec_, selector_, model_before, model_after, contributors);
}

void ErrorFeedbackWorker::ForgetAggregate() {
  if (ops_ != nullptr && ops_->selector_reset != nullptr) ops_->selector_reset(codec_, selector_);
}

Status DeAveragedReadout(std::span<const float> synced_model,
                         std::span<const std::span<const float>> residuals, std::span<float> out) {
  const std::size_t d = synced_model.size();
  if (residuals.empty() || out.size() != d) {
    return Status::InvalidArgument("no residuals, or the output's size differs from the model's");
  }
  for (const std::span<const float> residual : residuals) {
    if (residual.size() != d) {
      return Status::InvalidArgument("a residual's size differs from the model's");
    }
  }
  const auto n = static_cast<float>(residuals.size());
  for (std::size_t i = 0; i < d; ++i) {
    float sum = 0.0f;
    for (const std::span<const float> residual : residuals) sum += residual[i];
    out[i] = synced_model[i] - sum / n;
  }
  return Status::Ok();
}

Status DeAveragedReadoutFromMean(std::span<const float> synced_model,
                                 std::span<const float> mean_residual, std::span<float> out) {
  const std::size_t d = synced_model.size();
  if (mean_residual.size() != d || out.size() != d) {
    return Status::InvalidArgument(
        "the mean residual's or the output's size differs from the model's");
  }
  for (std::size_t i = 0; i < d; ++i) out[i] = synced_model[i] - mean_residual[i];
  return Status::Ok();
}

}  // namespace edgesgd
