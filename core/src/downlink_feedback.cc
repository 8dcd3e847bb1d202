#include "edgesgd/core/downlink_feedback.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace edgesgd {

Status DownlinkFeedback::Init(Arena& arena, const CodecRegistry& codecs,
                              const TensorLayout& layout, const CodecParams& codec) {
  if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
  if (!TraitsOf(codec).downlink_recompress) {
    return Status::InvalidArgument("the server cannot re-compress its update with this codec");
  }
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(codec, layout));
  EDGESGD_TRY_ASSIGN(const CodecOps* ops, codecs.For(codec));
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(layout, codec)) {
    return Status::ResourceExhausted("the arena is too small for the downlink residual");
  }
  EDGESGD_TRY_ASSIGN(residual_, arena.Allocate<float>(layout.dimension()));
  EDGESGD_TRY_ASSIGN(scratch_, arena.AllocateBytes(CodecScratchBytes(codec, layout)));
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  layout_ = layout;
  codec_ = codec;
  ops_ = ops;
  shape_ = shape;
  initialized_ = true;
  return Status::Ok();
}

Result<PayloadShape> DownlinkFeedback::Compress(std::span<const float> update,
                                                const CodecContext& context,
                                                const PayloadSpans& out) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (update.size() != residual_.size()) {
    return Status::InvalidArgument("the update's size differs from the layout's dimension");
  }
  // Checked before the residual changes, so a short span leaves everything as it was.
  if (out.indices.size() < shape_.indices || out.values.size() < shape_.values ||
      out.words.size() < shape_.words || out.scales.size() < shape_.scales) {
    return Status::ResourceExhausted("an output span is smaller than the codec's payload");
  }
  for (std::size_t i = 0; i < residual_.size(); ++i) residual_[i] += update[i];
  EDGESGD_TRY(ops_->encode(codec_, layout_, context, residual_, out, scratch_));
  EDGESGD_TRY(ops_->decode_add(codec_, layout_, context, PayloadView(out, shape_), -1.0f,
                               residual_, scratch_));
  return shape_;
}

Status DownlinkFeedback::RestoreResidual(std::span<const std::byte> stored) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (stored.size() != residual_.size() * sizeof(float)) {
    return Status::InvalidArgument("the stored residual's size differs from the layout's");
  }
  for (std::size_t offset = 0; offset < stored.size(); offset += sizeof(float)) {
    float value;
    std::memcpy(&value, stored.data() + offset, sizeof(float));
    if (!std::isfinite(value)) {
      return Status::InvalidArgument("the stored residual holds a NaN or an infinity");
    }
  }
  std::memcpy(residual_.data(), stored.data(), stored.size());
  return Status::Ok();
}

}  // namespace edgesgd
