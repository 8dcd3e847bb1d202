#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec_params.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// Where in the run an encode or decode happens. Shared random choices (rand_k indices,
// random_block starts) depend on (seed, round, tensor) only, so every worker and the server derive
// the same ones; private randomness (qsgd dither) also depends on `worker`.
struct CodecContext {
  std::uint64_t seed = 0;
  std::uint32_t round = 0;
  std::uint32_t worker = 0;
};

// Every codec is a struct of static functions with these signatures (no virtual dispatch):
//
//   static constexpr Result<PayloadShape> Shape(const CodecParams&, const TensorLayout&);
//     Exact element counts of the payload. Errors: kInvalidArgument for bad parameters.
//   static constexpr std::size_t ScratchBytes(const CodecParams&, const TensorLayout&);
//     Temporary bytes Encode/DecodeAdd need (0 if none); 0 for bad parameters.
//   static Status Encode(const CodecParams&, const TensorLayout&, const CodecContext&,
//                        std::span<const float> input, const PayloadSpans& out,
//                        std::span<std::byte> scratch);
//     Compresses `input` (layout.dimension() floats) into the first Shape() elements of `out`.
//   static Status DecodeAdd(const CodecParams&, const TensorLayout&, const CodecContext&,
//                           const PayloadView& payload, float weight,
//                           std::span<float> accumulator, std::span<std::byte> scratch);
//     accumulator += weight * decode(payload). Verifies the payload first: field sizes must
//     equal Shape(), indices must be in range; a bad payload returns kDataLoss and leaves the
//     accumulator untouched.
//
// Encode/DecodeAdd errors: kInvalidArgument (parameters, input size), kResourceExhausted (an
// output span or the scratch is too small), kDataLoss (malformed payload). None allocates.

using ShapeFunction = Result<PayloadShape> (*)(const CodecParams&, const TensorLayout&);
using ScratchFunction = std::size_t (*)(const CodecParams&, const TensorLayout&);
using EncodeFunction = Status (*)(const CodecParams&, const TensorLayout&, const CodecContext&,
                                  std::span<const float>, const PayloadSpans&,
                                  std::span<std::byte>);
using DecodeAddFunction = Status (*)(const CodecParams&, const TensorLayout&,
                                     const CodecContext&, const PayloadView&, float,
                                     std::span<float>, std::span<std::byte>);

struct CodecOps {
  CodecKind kind;
  ShapeFunction shape;
  ScratchFunction scratch_bytes;
  EncodeFunction encode;
  DecodeAddFunction decode_add;
};

}  // namespace edgesgd
