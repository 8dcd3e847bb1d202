#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

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
//
// Exact arithmetic (all float32, round-to-nearest, no fused multiply-add; the same bits on every
// architecture and every SIMD path):
//   Encode, per bucket:  norm   = sqrtf(internal::SumSquares(bucket))   (fixed lane order)
//                        factor = float(s) / norm, or 0 when norm == 0
//   per coordinate j (tensor coordinate i):
//                        ratio  = min(|x_j| * factor, float(s))
//                        l      = floor(ratio)                (an integer in 0..s)
//                        u      = UniformFloat(word i % 4 of Philox4x32_10(
//                                   (round, tensor, StreamId(kQuantizationDither, worker), i / 4),
//                                   KeyFromSeed(seed)))
//                        level  = l + 1 if u < ratio - float(l), else l   (ratio - l is exact)
//                        sign   = the sign bit of x_j (so -0.0 encodes sign 1, level 0)
//   A zero-norm bucket (all squares underflow) therefore gets level 0 everywhere. Because u is a
//   multiple of 2^-24 the round-up probability is ceil(frac * 2^24) / 2^24: unbiased to 2^-24 of
//   a level. `tensor` is the tensor's index in the layout.
//   DecodeAdd, per bucket: scale  = weight * (norm / float(s))
//   per coordinate:        acc_j  = acc_j + (sign ? -(scale * float(level)) : scale * float(level))
//
// Encode errors: kInvalidArgument for bad parameters, a wrong input size, or a bucket whose sum
// of squares is not finite (a NaN or infinite input, or values so large that the sum overflows
// float: a norm above ~1.8e19); kResourceExhausted for too-small output spans. On error the
// output is unspecified.
// DecodeAdd verifies the whole payload before touching the accumulator: field sizes (kDataLoss),
// every norm finite and >= 0, every level <= s, the unused high bits of each tensor's last word
// zero (all kDataLoss). Neither allocates; each uses at most about 2.5 KiB of stack.
struct QsgdCodec {
  // Words of one tensor of `size` coordinates (computed without overflowing a 32-bit size_t).
  static constexpr std::size_t WordsFor(std::size_t size, std::uint32_t levels) {
    const std::size_t width = QsgdBitsPerCoordinate(levels);
    return size / 32 * width + (size % 32 * width + 31) / 32;
  }
  static constexpr std::size_t BucketsFor(std::size_t size, std::uint32_t bucket) {
    return (size + bucket - 1) / bucket;
  }
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    // Only the qsgd fields are read, so they are validated whatever `params.kind` says.
    CodecParams qsgd = params;
    qsgd.kind = CodecKind::kQsgd;
    EDGESGD_TRY(ValidateCodecParams(qsgd));
    if (layout.tensor_count() == 0) return Status::InvalidArgument();
    PayloadShape shape;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      shape.words += WordsFor(layout.size(t), params.qsgd_levels);
      shape.scales += BucketsFor(layout.size(t), params.qsgd_bucket);
    }
    return shape;
  }
  static constexpr std::size_t ScratchBytes(const CodecParams&, const TensorLayout&) { return 0; }
  // Reads `input` (layout.dimension() floats); writes the first Shape().words elements of
  // out.words and Shape().scales elements of out.scales. Errors as above; does not allocate.
  static Status Encode(const CodecParams& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);
  // Reads `payload`; accumulator += weight * decode(payload), or untouched on any error. Errors
  // as above; does not allocate.
  static Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

namespace internal {

// The code paths of the qsgd kernels. All produce identical bits; kAuto picks the fastest the CPU
// supports (AVX-512, AVX2 or SSE2 on x86-64, chosen at run time; the portable loop elsewhere).
// Exposed so tests can check every path against the scalar reference.
enum class QsgdKernel : std::uint8_t { kAuto, kPortable, kSse2, kAvx2, kAvx512 };

// Whether `kernel` can run here (kAuto and kPortable always can). Does not allocate.
bool QsgdKernelSupported(QsgdKernel kernel);

// Words per dither call: the 64 Philox blocks of one 256-coordinate encoder chunk.
inline constexpr std::size_t kQsgdDitherWords = 256;

// Writes the dither words of coordinates 4 * first_block .. 4 * first_block + 255 of `tensor`,
// as `kernel` computes them (word i % 4 of Philox block i / 4). Returns false, writing nothing,
// when the kernel is not supported. Does not allocate.
bool QsgdDitherWords(QsgdKernel kernel, const CodecContext& context, std::uint32_t tensor,
                     std::uint32_t first_block, std::span<std::uint32_t, kQsgdDitherWords> out);

// QsgdCodec::Encode / DecodeAdd on a chosen code path; an unsupported kernel is
// kFailedPrecondition. Otherwise identical to the codec's functions.
Status QsgdEncodeWith(QsgdKernel kernel, const CodecParams& params, const TensorLayout& layout,
                      const CodecContext& context, std::span<const float> input,
                      const PayloadSpans& out, std::span<std::byte> scratch);
Status QsgdDecodeAddWith(QsgdKernel kernel, const CodecParams& params, const TensorLayout& layout,
                         const CodecContext& context, const PayloadView& payload, float weight,
                         std::span<float> accumulator, std::span<std::byte> scratch);

}  // namespace internal

}  // namespace edgesgd
