#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

// Exact Top-k per tensor: the k = SparseCount(size, k_ratio) coordinates of largest |x|, ties
// broken by lower index. Payload: `indices` (global positions in the flat vector, ascending)
// and `values` (x at those positions), k of each per tensor.
struct TopKCodec {
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    EDGESGD_TRY(ValidateCodecParams(params));
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(t), params.k_ratio));
      shape.indices += k;
      shape.values += k;
    }
    return shape;
  }
  // Candidates of the threshold pass (index + key per slot) for the largest tensor, plus a
  // radix histogram.
  static constexpr std::size_t CandidateCapacity(std::size_t k, std::size_t size) {
    const std::size_t capacity = 2 * k + 1024;
    return capacity < size ? capacity : size;
  }
  static constexpr std::size_t kHistogramBins = 2048;
  static constexpr std::size_t ScratchBytes(const CodecParams& params,
                                            const TensorLayout& layout) {
    std::size_t largest = 0;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      const Result<std::size_t> k = SparseCount(layout.size(t), params.k_ratio);
      if (!k.ok()) return 0;
      const std::size_t capacity = CandidateCapacity(k.value(), layout.size(t));
      if (capacity > largest) largest = capacity;
    }
    return largest * 2 * sizeof(std::uint32_t) + kHistogramBins * sizeof(std::uint32_t);
  }
  static Status Encode(const CodecParams& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);
  static Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

}  // namespace edgesgd
