#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd {

struct RandomBlockParams {
  // Each tensor sends max(1, floor(size / block_ratio)) coordinates; >= 1.
  std::uint32_t block_ratio = 64;
  friend constexpr bool operator==(const RandomBlockParams&, const RandomBlockParams&) = default;
};

// Uniform random sparse block (DEF's URSB) per tensor: k = max(1, floor(size / block_ratio))
// consecutive coordinates starting at a shared-seed start in [0, size), wrapping at the tensor's
// end. Every worker picks the same block in a round, so blocks sum like dense slices
// (all-reduce compatible). Payload: `indices` holds one start per tensor (relative to the
// tensor), `values` the blocks' values, tensor after tensor. No rescaling.
struct RandomBlockCodec {
  using Params = RandomBlockParams;
  static constexpr std::string_view kName = "random_block";
  static constexpr std::string_view kSummary =
      "one contiguous block per tensor at a shared-seed start: start + values";
  static constexpr PayloadLayout kLayout = PayloadLayout::kBlock;
  static constexpr CodecTraits kTraits{.payload_sum = true, .consensus_step = 0.05f};
  static constexpr bool KeepsNormBound(const Params&) { return true; }
  static constexpr std::array<ParamField<Params>, 1> kFields{Field<&Params::block_ratio>(
      "block_ratio", "send one block of size/ratio coordinates per tensor (>= 1)")};

  static constexpr Status Validate(const Params& params) {
    return params.block_ratio >= 1 ? Status::Ok()
                                   : Status::InvalidArgument("block ratio must be at least 1");
  }
  // Coordinates of the block of a tensor of `size`: max(1, floor(size / block_ratio)).
  // block_ratio 0 is rejected by Shape; here it only yields 1 instead of dividing by zero.
  static constexpr std::size_t BlockLength(std::size_t size, std::uint32_t block_ratio) {
    const std::size_t length = block_ratio == 0 ? 0 : size / block_ratio;
    return length == 0 ? 1 : length;
  }
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    return SumOverTensors(layout, [&params](std::size_t size) {
      return PayloadShape{.indices = 1, .values = BlockLength(size, params.block_ratio)};
    });
  }
  // Needs no scratch (0 bytes).
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }
  // The shared block start of `tensor` (of `size` coordinates) in the context's round:
  // CounterRng(seed, round, tensor, StreamId(kBlockStart)).NextBelow(size), uniform in
  // [0, size). The worker id is not used. `size` must fit in 32 bits (TensorLayout guarantees
  // it); size 0 gives 0. Reads nothing else, does not allocate.
  static std::uint32_t BlockStart(const CodecContext& context, std::size_t tensor,
                                  std::size_t size);
  // Encode reads `input` (layout.dimension() floats) and writes one start per tensor into
  // out.indices and the blocks' values into out.values. Errors: kInvalidArgument (parameters,
  // input length), kResourceExhausted (an output span too small). Does not allocate.
  // DecodeAdd adds weight * value over each tensor's block, located by the transmitted start
  // (the context is not consulted, so a payload decodes the same whatever round the receiver is
  // in). Verifies first: field sizes, start < tensor size, finite values. Errors:
  // kInvalidArgument (parameters, accumulator length), kDataLoss (malformed payload; the
  // accumulator is left untouched). Does not allocate.
  EDGESGD_CODEC_OPERATIONS(Params);
  // Every block starts where the shared seed puts it in the context's round: a block elsewhere
  // still decodes, but it is not the compressor every other worker ran, and sums of payloads
  // would not line up. Errors: kDataLoss (a start differs, or the field has the wrong size).
  static Status CheckShared(const Params& params, const TensorLayout& layout,
                            const CodecContext& context, const PayloadView& payload);
};

}  // namespace edgesgd
