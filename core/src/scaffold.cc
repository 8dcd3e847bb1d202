#include "edgesgd/core/scaffold.h"

#include <algorithm>
#include <cmath>

#include "edgesgd/core/internal/codec_checks.h"

namespace edgesgd {

Status ScaffoldDevice::Init(Arena& arena, const CodecRegistry& codecs, const TensorLayout& layout,
                            const CodecParams& codec) {
  if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(codec, layout));
  EDGESGD_TRY_ASSIGN(const CodecOps* ops, codecs.For(codec));
  if (ops->selector_encode != nullptr) {
    return Status::InvalidArgument(
        "a codec that selects from its own past updates cannot compress the control variates");
  }
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(layout, codec)) {
    return Status::ResourceExhausted("the arena is too small for the control variates");
  }
  const std::size_t d = layout.dimension();
  EDGESGD_TRY_ASSIGN(device_control_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(server_control_, arena.Allocate<float>(d));
  EDGESGD_TRY_ASSIGN(scratch_, arena.AllocateBytes(CodecScratchBytes(codec, layout)));
  std::fill(device_control_.begin(), device_control_.end(), 0.0f);
  std::fill(server_control_.begin(), server_control_.end(), 0.0f);
  layout_ = layout;
  codec_ = codec;
  ops_ = ops;
  shape_ = shape;
  return Status::Ok();
}

Status ScaffoldDevice::SetServerControl(std::span<const float> server_control) {
  if (ops_ == nullptr) return Status::FailedPrecondition("Init has not been called");
  if (server_control.size() != server_control_.size()) {
    return Status::InvalidArgument("the server's control variate differs in size from the model");
  }
  if (!internal::AllFinite(server_control)) {
    return Status::InvalidArgument("the server's control variate is not finite");
  }
  std::copy(server_control.begin(), server_control.end(), server_control_.begin());
  return Status::Ok();
}

Status ScaffoldDevice::Correct(std::span<float> gradient) const {
  if (ops_ == nullptr) return Status::FailedPrecondition("Init has not been called");
  if (gradient.size() != device_control_.size()) {
    return Status::InvalidArgument("the gradient differs in size from the model");
  }
  for (std::size_t i = 0; i < gradient.size(); ++i) {
    gradient[i] += server_control_[i] - device_control_[i];
  }
  return Status::Ok();
}

Result<PayloadShape> ScaffoldDevice::CompressChange(const CodecContext& context,
                                                    std::span<const float> delta,
                                                    std::uint32_t steps, float learning_rate,
                                                    std::span<float> work,
                                                    const PayloadSpans& out) {
  if (ops_ == nullptr) return Status::FailedPrecondition("Init has not been called");
  const std::size_t d = device_control_.size();
  if (delta.size() != d || work.size() != d) {
    return Status::InvalidArgument("the delta or the work buffer differs in size from the model");
  }
  if (steps == 0 || !(learning_rate > 0.0f && std::isfinite(learning_rate))) {
    return Status::InvalidArgument(
        "the change of a control variate needs at least one step and a positive finite rate");
  }
  if (out.indices.size() < shape_.indices || out.values.size() < shape_.values ||
      out.words.size() < shape_.words || out.scales.size() < shape_.scales) {
    return Status::ResourceExhausted("an output span is smaller than the codec's payload");
  }
  const float scale = static_cast<float>(steps) * learning_rate;
  for (std::size_t i = 0; i < d; ++i) work[i] = delta[i] / scale - server_control_[i];
  EDGESGD_TRY(ops_->encode(codec_, layout_, context, work, out, scratch_));
  EDGESGD_TRY(ops_->decode_add(codec_, layout_, context, PayloadView(out, shape_), 1.0f,
                               device_control_, scratch_));
  return shape_;
}

}  // namespace edgesgd
