#pragma once

// Argument checks shared by every codec, so each Encode/DecodeAdd starts the same way.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd::internal {

// Checks an Encode call against the expected shape: input length, output spans and scratch.
inline Status CheckEncodeArgs(const TensorLayout& layout, std::span<const float> input,
                              const PayloadSpans& out, const PayloadShape& shape,
                              std::span<std::byte> scratch, std::size_t scratch_needed) {
  if (layout.tensor_count() == 0 || input.size() != layout.dimension()) {
    return Status::InvalidArgument("the input's size differs from the layout's dimension");
  }
  if (out.indices.size() < shape.indices || out.values.size() < shape.values ||
      out.words.size() < shape.words || out.scales.size() < shape.scales ||
      scratch.size() < scratch_needed) {
    return Status::ResourceExhausted(
        "an output span or the scratch is smaller than the codec needs");
  }
  return Status::Ok();
}

// Checks a DecodeAdd call: accumulator length and scratch are the caller's responsibility
// (kInvalidArgument / kResourceExhausted); payload field sizes come from outside (kDataLoss).
inline Status CheckDecodeArgs(const TensorLayout& layout, const PayloadView& payload,
                              const PayloadShape& shape, std::span<float> accumulator,
                              std::span<std::byte> scratch, std::size_t scratch_needed) {
  if (layout.tensor_count() == 0 || accumulator.size() != layout.dimension()) {
    return Status::InvalidArgument("the accumulator's size differs from the layout's dimension");
  }
  if (scratch.size() < scratch_needed) {
    return Status::ResourceExhausted("the scratch is smaller than the decoder needs");
  }
  if (payload.indices.size() != shape.indices || payload.values.size() != shape.values ||
      payload.words.size() != shape.words || payload.scales.size() != shape.scales) {
    return Status::DataLoss("a payload field's length differs from the codec's shape");
  }
  return Status::Ok();
}

// The start of every Encode: the payload's shape for `params`, after checking the call against
// it (CheckEncodeArgs) and the codec's ScratchBytes.
template <typename Codec>
Result<PayloadShape> CheckedEncodeShape(const typename Codec::Params& params,
                                        const TensorLayout& layout, std::span<const float> input,
                                        const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, Codec::Shape(params, layout));
  EDGESGD_TRY(
      CheckEncodeArgs(layout, input, out, shape, scratch, Codec::ScratchBytes(params, layout)));
  return shape;
}

// The start of every DecodeAdd, likewise (CheckDecodeArgs), with the decoder's own scratch need
// (most decoders need none even where the encoder does).
template <typename Codec>
Result<PayloadShape> CheckedDecodeShape(const typename Codec::Params& params,
                                        const TensorLayout& layout, const PayloadView& payload,
                                        std::span<float> accumulator, std::span<std::byte> scratch,
                                        std::size_t scratch_needed = 0) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, Codec::Shape(params, layout));
  EDGESGD_TRY(CheckDecodeArgs(layout, payload, shape, accumulator, scratch, scratch_needed));
  return shape;
}

// True when no element is NaN or infinite. Decoders reject payloads with non-finite floats
// (kDataLoss): one poisoned value from a faulty or hostile peer would otherwise spread through
// the aggregate into every model.
inline bool AllFinite(std::span<const float> values) {
  // NaN and +-inf are the floats whose exponent bits are all ones. Tested on the bits, the loop
  // vectorizes (a float test does not: it ran at a quarter of memcpy's speed).
  constexpr std::uint32_t kExponent = 0x7F800000u;
  std::uint32_t non_finite = 0;
  for (const float v : values) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
    non_finite |= static_cast<std::uint32_t>((bits & kExponent) == kExponent);
  }
  return non_finite == 0;
}

// Scratch as an aligned array of T (scratch comes from an Arena or alignas storage).
template <typename T>
std::span<T> ScratchAs(std::span<std::byte> scratch, std::size_t count) {
  return std::span<T>(static_cast<T*>(static_cast<void*>(scratch.data())), count);
}

}  // namespace edgesgd::internal
