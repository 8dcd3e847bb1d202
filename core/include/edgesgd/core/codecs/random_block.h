#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

// Uniform random sparse block (DEF's URSB) per tensor: k = max(1, floor(size / block_ratio))
// consecutive coordinates starting at a shared-seed start in [0, size), wrapping at the tensor's
// end. Every worker picks the same block in a round, so blocks sum like dense slices
// (all-reduce compatible). Payload: `indices` holds one start per tensor (relative to the
// tensor), `values` the blocks' values, tensor after tensor. No rescaling.
struct RandomBlockCodec {
  static constexpr std::size_t BlockLength(std::size_t size, std::uint32_t block_ratio) {
    const std::size_t length = size / block_ratio;
    return length == 0 ? 1 : length;
  }
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    EDGESGD_TRY(ValidateCodecParams(params));
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    shape.indices = layout.tensor_count();
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      shape.values += BlockLength(layout.size(t), params.block_ratio);
    }
    return shape;
  }
  static constexpr std::size_t ScratchBytes(const CodecParams&, const TensorLayout&) { return 0; }

  // The shared block start of `tensor` (of `size` coordinates) in the context's round.
  static std::uint32_t BlockStart(const CodecContext& context, std::size_t tensor,
                                  std::size_t size);
  static Status Encode(const CodecParams& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);
  static Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

}  // namespace edgesgd
