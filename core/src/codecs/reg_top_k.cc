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

Status RegTopKCodec::Encode(const RegTopKParams& params, const TensorLayout& layout,
                            const CodecContext&, std::span<const float> input,
                            const PayloadSpans& out, std::span<std::byte> scratch) {
  return EncodeWithDistortion(params, layout, std::span<const float>(), input, out, scratch);
}

Status RegTopKCodec::EncodeWithDistortion(const RegTopKParams& params, const TensorLayout& layout,
                                          std::span<const float> distortion,
                                          std::span<const float> input, const PayloadSpans& out,
                                          std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<RegTopKCodec>(params, layout, input, out, scratch));
  if (!distortion.empty() && distortion.size() != layout.dimension()) {
    return Status::InvalidArgument("the distortion's size differs from the layout's dimension");
  }
  // The scores of one tensor at a time, at the first 4-byte boundary of the scratch; the
  // selection gets the rest.
  const auto address = reinterpret_cast<std::uintptr_t>(scratch.data());
  const std::size_t skip = (sizeof(float) - address % sizeof(float)) % sizeof(float);
  const std::size_t largest = LargestTensorSize(layout);
  const std::span<float> scores = internal::ScratchAs<float>(scratch.subspan(skip), largest);
  const std::span<std::byte> select_scratch = scratch.subspan(skip + largest * sizeof(float));

  const float mu = params.mu;
  // Every coordinate without a posterior has the same weight; computed once.
  const float weight_q = ScoreWeight(params.q, mu);
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
        const float weight = delta[j] == params.q ? weight_q : ScoreWeight(delta[j], mu);
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

Status RegTopKCodec::DecodeAdd(const RegTopKParams& params, const TensorLayout& layout,
                               const CodecContext& context, const PayloadView& payload,
                               float weight, std::span<float> accumulator,
                               std::span<std::byte> scratch) {
  EDGESGD_TRY(Validate(params));
  return TopKCodec::DecodeAdd(AsTopK(params), layout, context, payload, weight, accumulator,
                              scratch);
}

// ---- Selector state ----

namespace {

template <typename MeanAt>
Status Observe(const RegTopKParams& params, SelectorState& state, std::uint32_t contributors,
               MeanAt mean_at) {
  if (state.values.empty() || !state.awaiting_aggregate) {
    return Status::FailedPrecondition("no update was sent since the last aggregate");
  }
  if (contributors == 0) {
    RegTopKCodec::SelectorReset(params, state);
    return Status::Ok();
  }
  const auto n = static_cast<float>(contributors);
  const std::span<float> buffer = state.values;
  for (std::size_t j = 0; j < buffer.size(); ++j) {
    const float sent = buffer[j];
    // s == 0 (nothing sent, or a zero sent) has no ratio: Q. A non-finite ratio (an overflowing
    // aggregate) would poison the scores: Q as well.
    float delta = params.q;
    if (sent != 0.0f) {
      const float ratio = (n * mean_at(j) - sent) / sent;
      if (std::isfinite(ratio)) delta = ratio;
    }
    buffer[j] = delta;
  }
  state.awaiting_aggregate = false;
  return Status::Ok();
}

}  // namespace

void RegTopKCodec::SelectorReset(const RegTopKParams& params, SelectorState& state) {
  std::fill(state.values.begin(), state.values.end(), params.q);
  state.awaiting_aggregate = false;
}

Status RegTopKCodec::SelectorEncode(const RegTopKParams& params, const TensorLayout& layout,
                                    SelectorState& state, std::span<const float> input,
                                    const PayloadSpans& out, std::span<std::byte> scratch) {
  if (state.values.size() != layout.dimension()) {
    return Status::InvalidArgument("the RegTop-k posterior does not match the layout");
  }
  // Still awaiting an aggregate means the last one never came: no posterior (Delta = Q).
  const std::span<const float> distortion =
      state.awaiting_aggregate ? std::span<const float>() : std::span<const float>(state.values);
  EDGESGD_TRY(EncodeWithDistortion(params, layout, distortion, input, out, scratch));
  // Only now, with the selection done, may the buffer stop holding Delta.
  const std::size_t sent = Shape(params, layout).value().indices;
  std::fill(state.values.begin(), state.values.end(), 0.0f);
  for (std::size_t i = 0; i < sent; ++i) state.values[out.indices[i]] = out.values[i];
  state.awaiting_aggregate = true;
  return Status::Ok();
}

Status RegTopKCodec::SelectorObserve(const RegTopKParams& params, SelectorState& state,
                                     std::span<const float> mean_update,
                                     std::uint32_t contributors) {
  if (mean_update.size() != state.values.size()) {
    return Status::InvalidArgument("the aggregate's size differs from the model's");
  }
  return Observe(params, state, contributors,
                 [mean_update](std::size_t j) { return mean_update[j]; });
}

Status RegTopKCodec::SelectorObserveChange(const RegTopKParams& params, SelectorState& state,
                                           std::span<const float> model_before,
                                           std::span<const float> model_after,
                                           std::uint32_t contributors) {
  if (model_before.size() != state.values.size() || model_after.size() != state.values.size()) {
    return Status::InvalidArgument("the models' sizes differ from the posterior's");
  }
  return Observe(params, state, contributors, [model_before, model_after](std::size_t j) {
    return model_before[j] - model_after[j];
  });
}

}  // namespace edgesgd
