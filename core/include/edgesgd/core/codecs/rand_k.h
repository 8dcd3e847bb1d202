#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

// Random-k per tensor: k = SparseCount(size, k_ratio) distinct coordinates drawn uniformly from
// the shared stream (seed, round, tensor), so no index travels: `values` holds x at the chosen
// coordinates in ascending coordinate order, multiplied by size/k when rand_k_scaling is
// kUnbiased.
struct RandKCodec {
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    EDGESGD_TRY(ValidateCodecParams(params));
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(t), params.k_ratio));
      shape.values += k;
    }
    return shape;
  }
  // A membership bitmap over the largest tensor (Floyd's sampling marks chosen coordinates,
  // then a scan yields them in ascending order).
  static constexpr std::size_t ScratchBytes(const CodecParams&, const TensorLayout& layout) {
    std::size_t largest = 0;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      if (layout.size(t) > largest) largest = layout.size(t);
    }
    return (largest + 31) / 32 * sizeof(std::uint32_t);
  }
  static Status Encode(const CodecParams& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);
  static Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

}  // namespace edgesgd
