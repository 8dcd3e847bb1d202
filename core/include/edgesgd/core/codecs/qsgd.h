#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd {

// 2^15 - 1: the most levels a 16-bit field (sign + 15 level bits) holds.
inline constexpr std::uint32_t kMaxQsgdLevels = 32767;
inline constexpr std::uint32_t kMinQsgdBits = 2;
// The smallest shared scale: the encoder multiplies by levels / S, which must stay finite (a
// tinier S would turn a zero coordinate into 0 * inf).
inline constexpr float kMinQsgdSharedScale = 1e-30f;
inline constexpr std::uint32_t kMaxQsgdBits = 16;

// Bits one quantized coordinate occupies: a sign bit plus ceil(log2(levels + 1)) level bits.
constexpr std::uint32_t QsgdBitsPerCoordinate(std::uint32_t levels) {
  std::uint32_t level_bits = 0;
  while ((std::uint64_t{1} << level_bits) < std::uint64_t{levels} + 1) ++level_bits;
  return 1 + level_bits;
}

// The largest level count that fits `bits` per coordinate: 2^(bits-1) - 1.
// Errors: kInvalidArgument unless 2 <= bits <= 16 (one bit leaves no room for a level; that
// codec is `sign`).
constexpr Result<std::uint32_t> QsgdLevelsForBits(std::uint32_t bits) {
  if (bits < kMinQsgdBits || bits > kMaxQsgdBits) {
    return Status::InvalidArgument("qsgd bits must be in 2..16");
  }
  return (std::uint32_t{1} << (bits - 1)) - 1;
}

// How each round's level count is chosen.
//   kFixed  every round uses `levels` (plain QSGD).
//   kDq     DQ-SGD [reconstructed rule]: from the norm of the round's gradient, the rounds left
//           and the contraction rho = 1 - eta * mu of a strongly convex problem,
//             s_t    = ceil(||g_t|| * rho^((T - 1 - t) / 2) * K)
//             bits_t = 1 + ceil(log2(s_t + 1)), clipped to [bits_min, bits_max]
//           and the round quantizes with the most levels bits_t holds: 2^(bits_t - 1) - 1.
//           Few bits early and while gradients are small, more towards the end, where the
//           quantization error is no longer damped by the remaining contraction.
// Each sender applies the rule to its own gradient and every payload carries its level count
// (QuantizedHeader), so receivers decode each frame with the levels it names and only check that
// the schedule could have produced them (ParamsForHeader); nothing extra travels and no round
// waits for a broadcast s_t. Frames are sized for bits_max: a round never needs more.
enum class QuantScheduleKind : std::uint8_t { kFixed = 0, kDq = 1 };

struct QsgdParams {
  // s, the number of nonzero levels, in 1..kMaxQsgdLevels; a coordinate costs
  // QsgdBitsPerCoordinate(s) bits. The flag gives it as bits (QsgdLevelsForBits).
  std::uint32_t levels = 127;
  std::uint32_t bucket = 512;  // coordinates sharing one norm, >= 1 (the QSGD paper's 512)
  QuantScheduleKind schedule = QuantScheduleKind::kFixed;
  // kDq: the clip range of bits_t, 2 <= bits_min <= bits_max <= 16.
  std::uint32_t bits_min = 2;
  std::uint32_t bits_max = 8;
  // kDq: K > 0, finite. In the analysis K = sqrt(T L eta^2 d / (2 n eps_Q)); in practice one
  // tuned constant.
  float dq_k = 20.0f;
  // kDq: the contraction rho in (0, 1]; 1 makes the level count depend on the norm only.
  float dq_rho = 0.99f;
  // S > 0 quantizes every bucket with this one magnitude instead of its own norm (values beyond
  // it clip to the top level), so every device's levels mean the same — what secure aggregation
  // sums (docs/secure-aggregation.md). 0: each bucket's norm, plain QSGD.
  float shared_scale = 0.0f;
  friend constexpr bool operator==(const QsgdParams&, const QsgdParams&) = default;
};

namespace internal {
constexpr const char* QsgdUnusedWithDq(const QsgdParams& params) {
  return params.schedule == QuantScheduleKind::kDq
             ? "the dq schedule picks each round's bits within bits_min..bits_max"
             : nullptr;
}
constexpr const char* QsgdUnusedWithoutDq(const QsgdParams& params) {
  return params.schedule != QuantScheduleKind::kDq
             ? "bits_min, bits_max, dq_k and dq_rho configure the dq schedule"
             : nullptr;
}
}  // namespace internal

// QSGD stochastic quantization with s levels over buckets of `bucket` coordinates (per tensor;
// the last bucket of a tensor may be shorter). For bucket v with norm ||v||_2 and
// r = |v_j| s / ||v||: level l = floor(r) + 1 with probability r - floor(r), else floor(r);
// decoded value ||v|| sign(v_j) l / s. Unbiased. The dither comes from the worker's private
// stream (seed, round, tensor, worker). s is `levels`, or with the dq schedule the most levels
// bits_max holds (QsgdCodec::MaxLevels) unless RoundParams chose the round's own.
// Payload: `words` packs each coordinate as a field of QsgdBitsPerCoordinate(s) bits — the
// level in the low bits, the sign (1 = negative) in the top bit — LSB-first into u32 words,
// fields may straddle words, each tensor starts on a fresh word; `scales` holds the bucket
// norms, tensor after tensor; the QuantizedHeader says s and the bucket.
//
// Exact arithmetic (all float32, round-to-nearest, no fused multiply-add; the same bits on every
// architecture and every SIMD path):
//   Encode, per bucket:  norm   = sqrtf(internal::SumSquares(bucket))   (fixed lane order)
//                        norm   = S instead, once found finite, with a shared scale S
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
// every norm finite and >= 0 (equal to S with a shared scale), every level <= s, the unused
// high bits of each tensor's last word zero (all kDataLoss). Neither allocates; each uses at most
// about 2.5 KiB of stack.
struct QsgdCodec {
  using Params = QsgdParams;
  static constexpr std::string_view kName = "qsgd";
  static constexpr std::string_view kSummary =
      "stochastic s-level quantization over buckets (unbiased): packed levels + bucket norms";
  static constexpr PayloadLayout kLayout = PayloadLayout::kQuantized;
  static constexpr CodecTraits kTraits{.downlink_recompress = true, .consensus_step = 1.0f};
  static constexpr std::array<std::string_view, 2> kScheduleNames{"fixed", "dq"};

  static constexpr std::array<ParamField<Params>, 8> kFields{
      AsBitWidth(ConditionalField<&Params::levels>(
          "bits", "bits per coordinate including the sign (levels = 2^(bits-1) - 1)",
          &internal::QsgdUnusedWithDq)),
      Field<&Params::bucket>("bucket", "coordinates sharing one norm (>= 1)"),
      Field<&Params::schedule>(
          "quant_schedule",
          "fixed (--bits every round) or dq (DQ-SGD: each sender picks the round's bits from "
          "its gradient norm and the rounds left, s = ceil(||g|| rho^((T-1-t)/2) K), bits = 1 + "
          "ceil(log2(s+1)) clipped to --bits-min..--bits-max)",
          kScheduleNames),
      ConditionalField<&Params::bits_min>("bits_min", "dq: fewest bits per coordinate",
                                          &internal::QsgdUnusedWithoutDq),
      ConditionalField<&Params::bits_max>("bits_max",
                                          "dq: most bits per coordinate (frames are sized for it)",
                                          &internal::QsgdUnusedWithoutDq),
      ConditionalField<&Params::dq_k>("dq_k", "dq: the constant K scaling the level count, > 0",
                                      &internal::QsgdUnusedWithoutDq),
      ConditionalField<&Params::dq_rho>(
          "dq_rho", "dq: contraction rho = 1 - lr * mu in (0, 1]; smaller spends fewer bits early",
          &internal::QsgdUnusedWithoutDq),
      Field<&Params::shared_scale>(
          "shared_scale",
          "one magnitude S for every bucket instead of its norm (values beyond S clip to the top "
          "level; secure aggregation needs it); 0 = each bucket's own norm")};

  static constexpr Status Validate(const Params& params) {
    if (params.levels < 1 || params.levels > kMaxQsgdLevels) {
      return Status::InvalidArgument("qsgd levels must be in 1..32767 (2..16 bits)");
    }
    if (params.bucket < 1) return Status::InvalidArgument("qsgd bucket must be at least 1");
    if (!(params.shared_scale == 0.0f ||
          (PositiveFinite(params.shared_scale) && params.shared_scale >= kMinQsgdSharedScale))) {
      return Status::InvalidArgument(
          "the qsgd shared scale must be 0 (off) or finite and at least 1e-30");
    }
    switch (params.schedule) {
      case QuantScheduleKind::kFixed:
        return Status::Ok();
      case QuantScheduleKind::kDq:
        break;
      default:
        return Status::InvalidArgument("unknown quantization schedule");
    }
    if (params.bits_min < kMinQsgdBits || params.bits_max > kMaxQsgdBits ||
        params.bits_min > params.bits_max) {
      return Status::InvalidArgument("quantization bits must satisfy 2 <= min <= max <= 16");
    }
    if (!PositiveFinite(params.dq_k)) {
      return Status::InvalidArgument("the DQ-SGD constant K must be positive and finite");
    }
    if (!(params.dq_rho > 0.0f && params.dq_rho <= 1.0f)) {
      return Status::InvalidArgument("the DQ-SGD contraction rho must be in (0, 1]");
    }
    return Status::Ok();
  }
  // The level count frames are sized for: `levels`, or with the dq schedule the most levels
  // bits_max holds. Valid parameters assumed.
  static constexpr std::uint32_t MaxLevels(const Params& params) {
    if (params.schedule != QuantScheduleKind::kDq) return params.levels;
    const Result<std::uint32_t> levels = QsgdLevelsForBits(params.bits_max);
    return levels.ok() ? levels.value() : params.levels;
  }
  // Words of one tensor of `size` coordinates (computed without overflowing a 32-bit size_t).
  static constexpr std::size_t WordsFor(std::size_t size, std::uint32_t levels) {
    const std::size_t width = QsgdBitsPerCoordinate(levels);
    return size / 32 * width + (size % 32 * width + 31) / 32;
  }
  static constexpr std::size_t BucketsFor(std::size_t size, std::uint32_t bucket) {
    return (size + bucket - 1) / bucket;
  }
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    const std::uint32_t levels = MaxLevels(params);
    return SumOverTensors(layout, [&params, levels](std::size_t size) {
      return PayloadShape{.words = WordsFor(size, levels),
                          .scales = BucketsFor(size, params.bucket)};
    });
  }
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }

  static constexpr QuantizedHeader QuantizedHeaderOf(const Params& params) {
    return QuantizedHeader{MaxLevels(params), params.bucket};
  }
  // The parameters a frame with `header` decodes with, when the run's `configured` parameters
  // could have produced it: the same bucket, and the configured levels (fixed) or a width
  // within bits_min..bits_max (dq). Errors: kDataLoss naming what differs.
  static constexpr Result<Params> ParamsForHeader(const Params& configured,
                                                  const QuantizedHeader& header) {
    if (header.bucket != configured.bucket) {
      return Status::DataLoss("the qsgd bucket differs from the run's");
    }
    if (configured.schedule != QuantScheduleKind::kDq) {
      if (header.levels != configured.levels) {
        return Status::DataLoss("the qsgd level count differs from the run's");
      }
      return configured;
    }
    for (std::uint32_t bits = configured.bits_min; bits <= configured.bits_max; ++bits) {
      const Result<std::uint32_t> allowed = QsgdLevelsForBits(bits);
      if (allowed.ok() && allowed.value() == header.levels) {
        return Params{.levels = header.levels,
                      .bucket = configured.bucket,
                      .shared_scale = configured.shared_scale};
      }
    }
    return Status::DataLoss("the qsgd level count is not one the dq schedule produces");
  }
  // The round's parameters: `params` itself (fixed), or with the dq schedule a fixed schedule at
  // the levels DqBits picks from the norm of `gradient` (summed in the codecs' fixed lane
  // order). Errors: kInvalidArgument for a non-finite gradient, rounds == 0 or bad parameters.
  static Result<Params> RoundParams(const Params& params, std::uint32_t round, std::uint32_t rounds,
                                    std::span<const float> gradient);

  // Encode reads `input` (layout.dimension() floats) and writes the first Shape().words elements
  // of out.words and Shape().scales elements of out.scales. DecodeAdd reads `payload`:
  // accumulator += weight * decode(payload), or untouched on any error. Errors as above;
  // neither allocates.
  EDGESGD_CODEC_OPERATIONS(Params);
};

// DQ-SGD's bits_t for a gradient of norm `gradient_norm` in round `round` of `rounds` (T >= 1;
// a round >= T counts as the last), clipped to [bits_min, bits_max]. A level count too large to
// represent clips to bits_max. Reads only its arguments; does not allocate.
// Errors: kInvalidArgument for invalid dq parameters (whatever `params.schedule` says),
// rounds == 0, or a norm that is negative or not finite.
Result<std::uint32_t> DqBits(const QsgdParams& params, float gradient_norm, std::uint32_t round,
                             std::uint32_t rounds);

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
Status QsgdEncodeWith(QsgdKernel kernel, const QsgdParams& params, const TensorLayout& layout,
                      const CodecContext& context, std::span<const float> input,
                      const PayloadSpans& out, std::span<std::byte> scratch);
Status QsgdDecodeAddWith(QsgdKernel kernel, const QsgdParams& params, const TensorLayout& layout,
                         const CodecContext& context, const PayloadView& payload, float weight,
                         std::span<float> accumulator, std::span<std::byte> scratch);

}  // namespace internal

}  // namespace edgesgd
