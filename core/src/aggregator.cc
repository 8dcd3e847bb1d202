#include "edgesgd/core/aggregator.h"

#include <algorithm>
#include <limits>

#include "edgesgd/core/internal/codec_checks.h"

namespace edgesgd {
namespace {

constexpr bool IsPositiveFinite(float weight) {
  return weight > 0.0f && weight <= std::numeric_limits<float>::max();
}

}  // namespace

Status MeanAggregator::Init(Arena& arena, const CodecRegistry& codecs, const TensorLayout& layout,
                            const CodecParams& codec) {
  if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
  EDGESGD_TRY(EncodedShape(codec, layout));
  EDGESGD_TRY_ASSIGN(const CodecOps* ops, codecs.For(codec));
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(layout, codec)) {
    return Status::ResourceExhausted("the arena is too small for the aggregator's state");
  }
  EDGESGD_TRY_ASSIGN(sum_, arena.Allocate<float>(layout.dimension()));
  EDGESGD_TRY_ASSIGN(scratch_, arena.AllocateBytes(CodecScratchBytes(codec, layout)));
  layout_ = layout;
  codec_ = codec;
  ops_ = ops;
  initialized_ = true;
  Reset();
  return Status::Ok();
}

void MeanAggregator::Reset() {
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  total_weight_ = 0.0f;
  count_ = 0;
  finished_ = false;
}

Status MeanAggregator::CheckAddable(float weight) const {
  if (!initialized_ || finished_) {
    return Status::FailedPrecondition(
        "Init has not been called, or Mean was taken without a Reset");
  }
  if (!IsPositiveFinite(weight)) {
    return Status::InvalidArgument("the weight must be positive and finite");
  }
  return Status::Ok();
}

Status MeanAggregator::Add(const PayloadView& payload, const CodecContext& context, float weight) {
  return AddWithParams(codec_, payload, context, weight);
}

Status MeanAggregator::AddWithParams(const CodecParams& params, const PayloadView& payload,
                                     const CodecContext& context, float weight) {
  EDGESGD_TRY(CheckAddable(weight));
  if (CodecIdOf(params) != CodecIdOf(codec_) ||
      CodecScratchBytes(params, layout_) > scratch_.size()) {
    return Status::InvalidArgument("the parameters are not of the aggregator's codec");
  }
  EDGESGD_TRY(ops_->decode_add(params, layout_, context, payload, weight, sum_, scratch_));
  total_weight_ += weight;
  ++count_;
  return Status::Ok();
}

Status MeanAggregator::AddSumWithParams(const CodecParams& params, const PayloadView& payload,
                                        const CodecContext& context, std::uint32_t contributions) {
  if (contributions == 0) return Status::InvalidArgument("a sum of no updates");
  if (CodecIdOf(params) == kCodecId<IdentityCodec>) {
    EDGESGD_TRY(AddDense(payload.values, 1.0f));
  } else {
    EDGESGD_TRY(AddWithParams(params, payload, context, 1.0f));
  }
  total_weight_ += static_cast<float>(contributions - 1);
  count_ += contributions - 1;
  return Status::Ok();
}

Status MeanAggregator::AddDense(std::span<const float> values, float weight) {
  EDGESGD_TRY(CheckAddable(weight));
  if (values.size() != sum_.size()) {
    return Status::InvalidArgument("the dense update's size differs from the layout's dimension");
  }
  if (!internal::AllFinite(values)) {
    return Status::DataLoss("the dense update holds a NaN or an infinity");
  }
  for (std::size_t i = 0; i < sum_.size(); ++i) sum_[i] += weight * values[i];
  total_weight_ += weight;
  ++count_;
  return Status::Ok();
}

Result<std::span<const float>> MeanAggregator::Mean() {
  if (!initialized_ || count_ == 0) {
    return Status::FailedPrecondition("Init has not been called, or nothing was added");
  }
  if (!finished_) {
    // Division rather than multiplication by a reciprocal: for n identical contributions the
    // mean is then exactly the contribution.
    const float total = total_weight_;
    for (float& v : sum_) v /= total;
    finished_ = true;
  }
  return std::span<const float>(sum_);
}

Status MeanAggregator::AddScaledMean(float scale, std::span<float> model) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (model.size() != sum_.size()) {
    return Status::InvalidArgument("the model's size differs from the layout's dimension");
  }
  if (!(scale >= -std::numeric_limits<float>::max() &&
        scale <= std::numeric_limits<float>::max())) {
    return Status::InvalidArgument("the scale must be finite");
  }
  if (count_ == 0) return Status::FailedPrecondition("nothing was added");
  // Mean() and the step in one pass over the sum, with Mean()'s division (by 1, exactly, once
  // the round is finished).
  const float total = finished_ ? 1.0f : total_weight_;
  for (std::size_t i = 0; i < model.size(); ++i) {
    const float mean = sum_[i] / total;
    sum_[i] = mean;
    model[i] += scale * mean;
  }
  finished_ = true;
  return Status::Ok();
}

Status PayloadAggregator::Init(Arena& arena, const TensorLayout& layout, const CodecParams& codec) {
  if (layout.tensor_count() == 0 || !TraitsOf(codec).payload_sum) {
    return Status::InvalidArgument("the layout is empty or the codec's payloads cannot be summed");
  }
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(codec, layout));
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(layout, codec)) {
    return Status::ResourceExhausted("the arena is too small for the aggregator's state");
  }
  EDGESGD_TRY_ASSIGN(indices_, arena.Allocate<std::uint32_t>(shape.indices));
  EDGESGD_TRY_ASSIGN(values_, arena.Allocate<float>(shape.values));
  layout_ = layout;
  codec_ = codec;
  shape_ = shape;
  initialized_ = true;
  Reset();
  return Status::Ok();
}

void PayloadAggregator::Reset() {
  std::fill(indices_.begin(), indices_.end(), 0u);
  std::fill(values_.begin(), values_.end(), 0.0f);
  total_weight_ = 0.0f;
  count_ = 0;
  finished_ = false;
}

Status PayloadAggregator::Add(const PayloadView& payload, float weight) {
  if (!initialized_ || finished_) {
    return Status::FailedPrecondition(
        "Init has not been called, or Mean was taken without a Reset");
  }
  if (!IsPositiveFinite(weight)) {
    return Status::InvalidArgument("the weight must be positive and finite");
  }
  if (payload.indices.size() != shape_.indices || payload.values.size() != shape_.values ||
      payload.words.size() != shape_.words || payload.scales.size() != shape_.scales) {
    return Status::DataLoss("a payload field's length differs from the codec's shape");
  }
  if (!internal::AllFinite(payload.values)) {
    return Status::DataLoss("a payload value is a NaN or an infinity");
  }
  // Only random_block has indices: one start per tensor, relative to the tensor.
  for (std::size_t t = 0; t < payload.indices.size(); ++t) {
    if (payload.indices[t] >= layout_.size(t)) {
      return Status::DataLoss("a block starts outside its tensor");
    }
  }
  if (count_ > 0 && !std::equal(payload.indices.begin(), payload.indices.end(), indices_.begin())) {
    return Status::InvalidArgument(
        "the payloads' block starts differ: they were not drawn from one seed");
  }
  std::copy(payload.indices.begin(), payload.indices.end(), indices_.begin());
  for (std::size_t i = 0; i < values_.size(); ++i) values_[i] += weight * payload.values[i];
  total_weight_ += weight;
  ++count_;
  return Status::Ok();
}

Result<PayloadView> PayloadAggregator::Mean() {
  if (!initialized_ || count_ == 0) {
    return Status::FailedPrecondition("Init has not been called, or nothing was added");
  }
  if (!finished_) {
    const float total = total_weight_;
    for (float& v : values_) v /= total;
    finished_ = true;
  }
  return PayloadView(indices_, values_, std::span<const std::uint32_t>(), std::span<const float>());
}

}  // namespace edgesgd
