#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd {

// Uniform random sparse block (DEF's URSB) per tensor: k = max(1, floor(size / block_ratio))
// consecutive coordinates starting at a shared-seed start in [0, size), wrapping at the tensor's
// end. Every worker picks the same block in a round, so blocks sum like dense slices
// (all-reduce compatible). Payload: `indices` holds one start per tensor (relative to the
// tensor), `values` the blocks' values, tensor after tensor. No rescaling.
struct RandomBlockCodec {
  // Coordinates of the block of a tensor of `size`: max(1, floor(size / block_ratio)).
  // block_ratio 0 is rejected by Shape; here it only yields 1 instead of dividing by zero.
  static constexpr std::size_t BlockLength(std::size_t size, std::uint32_t block_ratio) {
    const std::size_t length = block_ratio == 0 ? 0 : size / block_ratio;
    return length == 0 ? 1 : length;
  }
  // Errors: kInvalidArgument for bad parameters (block_ratio 0) or an empty layout.
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    EDGESGD_TRY(ValidateCodecParams(params));
    if (params.block_ratio < 1) return Status::InvalidArgument();
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    shape.indices = layout.tensor_count();
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      shape.values += BlockLength(layout.size(t), params.block_ratio);
    }
    return shape;
  }
  // Needs no scratch (0 bytes).
  static constexpr std::size_t ScratchBytes(const CodecParams&, const TensorLayout&) { return 0; }

  // The shared block start of `tensor` (of `size` coordinates) in the context's round:
  // CounterRng(seed, round, tensor, StreamId(kBlockStart)).NextBelow(size), uniform in
  // [0, size). The worker id is not used. `size` must fit in 32 bits (TensorLayout guarantees
  // it); size 0 gives 0. Reads nothing else, does not allocate.
  static std::uint32_t BlockStart(const CodecContext& context, std::size_t tensor,
                                  std::size_t size);

  // Reads `input` (layout.dimension() floats); writes one start per tensor into out.indices and
  // the blocks' values into out.values. Errors: kInvalidArgument (parameters, input length),
  // kResourceExhausted (an output span too small). Does not allocate.
  static Status Encode(const CodecParams& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);

  // Adds weight * value over each tensor's block, located by the transmitted start (the
  // context is not consulted, so a payload decodes the same whatever round the receiver is in).
  // Verifies first: field sizes, start < tensor size, finite values. Errors: kInvalidArgument
  // (parameters, accumulator length), kDataLoss (malformed payload; the accumulator is left
  // untouched). Does not allocate.
  static Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

}  // namespace edgesgd
