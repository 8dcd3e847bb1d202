#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

// QSGD stochastic quantization with s = qsgd_levels levels over buckets of qsgd_bucket
// coordinates (per tensor; the last bucket of a tensor may be shorter). For bucket v with norm
// ||v||_2 and r = |v_j| s / ||v||: level l = floor(r) + 1 with probability r - floor(r), else
// floor(r); decoded value ||v|| sign(v_j) l / s. Unbiased. The dither comes from the worker's
// private stream (seed, round, tensor, worker).
// Payload: `words` packs each coordinate as a field of QsgdBitsPerCoordinate(s) bits — the
// level in the low bits, the sign (1 = negative) in the top bit — LSB-first into u32 words,
// fields may straddle words, each tensor starts on a fresh word; `scales` holds the bucket
// norms, tensor after tensor.
struct QsgdCodec {
  static constexpr std::size_t WordsFor(std::size_t size, std::uint32_t levels) {
    return (size * QsgdBitsPerCoordinate(levels) + 31) / 32;
  }
  static constexpr std::size_t BucketsFor(std::size_t size, std::uint32_t bucket) {
    return (size + bucket - 1) / bucket;
  }
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    EDGESGD_TRY(ValidateCodecParams(params));
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      shape.words += WordsFor(layout.size(t), params.qsgd_levels);
      shape.scales += BucketsFor(layout.size(t), params.qsgd_bucket);
    }
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
