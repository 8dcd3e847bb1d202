#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

// Dense fp32: the uncompressed baseline (4 bytes per coordinate in `values`).
struct IdentityCodec {
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    EDGESGD_TRY(ValidateCodecParams(params));
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    shape.values = layout.dimension();
    return shape;
  }
  static constexpr std::size_t ScratchBytes(const CodecParams&, const TensorLayout&) { return 0; }
  static Status Encode(const CodecParams& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);
  static Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

}  // namespace edgesgd
