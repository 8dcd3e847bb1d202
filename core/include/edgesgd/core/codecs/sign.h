#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

// 1-bit sign per coordinate. Bit j of word w of a tensor is coordinate 32w + j of that tensor;
// bit 1 means x >= 0 — so sign(0) = +1, the majority-vote convention (also for -0.0 and NaN).
// Each tensor starts on a fresh word; unused high bits of its last word are 0. `scales` holds
// one scale per tensor: mean |x| (SignScale::kMeanAbs) or 1 (kUnit). Decoded value: +-scale.
struct SignCodec {
  static constexpr std::size_t WordsFor(std::size_t size) { return (size + 31) / 32; }
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    EDGESGD_TRY(ValidateCodecParams(params));
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    shape.scales = layout.tensor_count();
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) shape.words += WordsFor(layout.size(t));
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
