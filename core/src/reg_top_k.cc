#include "edgesgd/core/codecs/reg_top_k.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/internal/top_k_select.h"

namespace edgesgd {
namespace {

// The regularising weight tanh(|1 + Delta| / mu) of one coordinate.
float ScoreWeight(float delta, float mu) { return std::tanh(std::fabs(1.0f + delta) / mu); }

}  // namespace

Status RegTopKCodec::Encode(const CodecParams& params, const TensorLayout& layout,
                            const CodecContext&, std::span<const float> input,
                            const PayloadSpans& out, std::span<std::byte> scratch) {
  return EncodeWithDistortion(params, layout, std::span<const float>(), input, out, scratch);
}

Status RegTopKCodec::EncodeWithDistortion(const CodecParams& params, const TensorLayout& layout,
                                          std::span<const float> distortion,
                                          std::span<const float> input, const PayloadSpans& out,
                                          std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, Shape(params, layout));
  EDGESGD_TRY(
      internal::CheckEncodeArgs(layout, input, out, shape, scratch, ScratchBytes(params, layout)));
  if (!distortion.empty() && distortion.size() != layout.dimension()) {
    return Status::InvalidArgument();
  }
  // The scores of one tensor at a time, at the first 4-byte boundary of the scratch; the
  // selection gets the rest.
  const auto address = reinterpret_cast<std::uintptr_t>(scratch.data());
  const std::size_t skip = (sizeof(float) - address % sizeof(float)) % sizeof(float);
  const std::size_t largest = LargestTensorSize(layout);
  const std::span<float> scores = internal::ScratchAs<float>(scratch.subspan(skip), largest);
  const std::span<std::byte> select_scratch = scratch.subspan(skip + largest * sizeof(float));

  const float mu = params.reg_top_k_mu;
  // Every coordinate without a posterior has the same weight; computed once.
  const float weight_q = ScoreWeight(params.reg_top_k_q, mu);
  std::size_t written = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> values = layout.Slice(input, t);
    const std::span<float> tensor_scores = scores.first(values.size());
    if (distortion.empty()) {
      for (std::size_t j = 0; j < values.size(); ++j) {
        tensor_scores[j] = weight_q * std::fabs(values[j]);
      }
    } else {
      const std::span<const float> delta = layout.Slice(distortion, t);
      for (std::size_t j = 0; j < values.size(); ++j) {
        const float weight = delta[j] == params.reg_top_k_q ? weight_q : ScoreWeight(delta[j], mu);
        tensor_scores[j] = weight * std::fabs(values[j]);
      }
    }
    EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(t), params.k_ratio));
    const std::span<std::uint32_t> indices = out.indices.subspan(written, k);
    EDGESGD_TRY(internal::SelectTopKeys(std::span<const float>(tensor_scores), k, indices,
                                        select_scratch,
                                        static_cast<std::uint32_t>(layout.offset(t))));
    // What travels is the accumulated value itself, not its score.
    for (std::size_t i = 0; i < k; ++i) out.values[written + i] = input[indices[i]];
    written += k;
  }
  return Status::Ok();
}

Status RegTopKCodec::DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                               const CodecContext& context, const PayloadView& payload,
                               float weight, std::span<float> accumulator,
                               std::span<std::byte> scratch) {
  EDGESGD_TRY(Shape(params, layout).status());
  return TopKCodec::DecodeAdd(params, layout, context, payload, weight, accumulator, scratch);
}

// ---- RegTopKState ----

Status RegTopKState::Init(Arena& arena, const TensorLayout& layout, const CodecParams& params) {
  if (layout.tensor_count() == 0 || params.kind != CodecKind::kRegTopK) {
    return Status::InvalidArgument();
  }
  EDGESGD_TRY(RegTopKCodec::Shape(params, layout).status());
  EDGESGD_TRY_ASSIGN(buffer_, arena.Allocate<float>(layout.dimension()));
  layout_ = layout;
  params_ = params;
  Forget();
  return Status::Ok();
}

void RegTopKState::Forget() {
  std::fill(buffer_.begin(), buffer_.end(), params_.reg_top_k_q);
  awaiting_aggregate_ = false;
}

Status RegTopKState::Encode(std::span<const float> input, const PayloadSpans& out,
                            std::span<std::byte> scratch) {
  if (buffer_.empty()) return Status::FailedPrecondition();
  // Still awaiting an aggregate means the last one never came: no posterior (Delta = Q).
  const std::span<const float> distortion =
      awaiting_aggregate_ ? std::span<const float>() : std::span<const float>(buffer_);
  EDGESGD_TRY(
      RegTopKCodec::EncodeWithDistortion(params_, layout_, distortion, input, out, scratch));
  // Only now, with the selection done, may the buffer stop holding Delta.
  const std::size_t sent = RegTopKCodec::Shape(params_, layout_).value().indices;
  std::fill(buffer_.begin(), buffer_.end(), 0.0f);
  for (std::size_t i = 0; i < sent; ++i) buffer_[out.indices[i]] = out.values[i];
  awaiting_aggregate_ = true;
  return Status::Ok();
}

template <typename MeanAt>
Status RegTopKState::Observe(std::uint32_t contributors, MeanAt mean_at) {
  if (buffer_.empty() || !awaiting_aggregate_) return Status::FailedPrecondition();
  if (contributors == 0) {
    Forget();
    return Status::Ok();
  }
  const auto n = static_cast<float>(contributors);
  const float q = params_.reg_top_k_q;
  for (std::size_t j = 0; j < buffer_.size(); ++j) {
    const float sent = buffer_[j];
    // s == 0 (nothing sent, or a zero sent) has no ratio: Q. A non-finite ratio (an overflowing
    // aggregate) would poison the scores: Q as well.
    float delta = q;
    if (sent != 0.0f) {
      const float ratio = (n * mean_at(j) - sent) / sent;
      if (std::isfinite(ratio)) delta = ratio;
    }
    buffer_[j] = delta;
  }
  awaiting_aggregate_ = false;
  return Status::Ok();
}

Status RegTopKState::ObserveAggregate(std::span<const float> mean_update,
                                      std::uint32_t contributors) {
  if (!buffer_.empty() && mean_update.size() != buffer_.size()) return Status::InvalidArgument();
  return Observe(contributors, [mean_update](std::size_t j) { return mean_update[j]; });
}

Status RegTopKState::ObserveModelChange(std::span<const float> model_before,
                                        std::span<const float> model_after,
                                        std::uint32_t contributors) {
  if (!buffer_.empty() &&
      (model_before.size() != buffer_.size() || model_after.size() != buffer_.size())) {
    return Status::InvalidArgument();
  }
  return Observe(contributors, [model_before, model_after](std::size_t j) {
    return model_before[j] - model_after[j];
  });
}

}  // namespace edgesgd
