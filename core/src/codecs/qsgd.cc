#include "edgesgd/core/codecs/qsgd.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "edgesgd/core/internal/bit_packing.h"
#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/internal/philox_batch.h"
#include "edgesgd/core/internal/reduce.h"
#include "edgesgd/core/internal/simd_target.h"
#include "edgesgd/core/random.h"

// On x86-64 the Philox dither dominates the encoder, so it comes from the SSE2 (baseline), AVX2
// or AVX-512 batch of internal/philox_batch.h, chosen at run time; the quantisation and packing
// loops are portable code that each path compiles with its own instruction set. Everywhere else
// (ARM boards, Cortex-M) only the portable path exists, and compilers vectorise it for NEON where
// they can.

// Forces the shared kernel bodies into each instruction-set wrapper, so that every path gets
// them compiled (and vectorised) for its own target rather than calling one baseline copy.
#if defined(__GNUC__)
#define EDGESGD_QSGD_INLINE inline __attribute__((always_inline))
#else
#define EDGESGD_QSGD_INLINE inline
#endif

namespace edgesgd {
namespace {

using internal::QsgdKernel;

// Coordinates per encoder chunk: 64 Philox blocks, two bit-packing groups. A chunk starts on a
// multiple of 256, so on a Philox block and on a word boundary for every width. (64 blocks keep
// eight independent AVX-512 Philox chains in flight, which hides the multiplier latency; the
// decoder, which has no dither, works a packing group at a time.)
constexpr std::size_t kChunk = 2 * internal::kPackGroup;
static_assert(kChunk == internal::kQsgdDitherWords && kChunk % internal::kPackGroup == 0);
static_assert(kChunk / 4 == internal::kPhiloxBatchBlocks);
constexpr std::size_t kGroup = internal::kPackGroup;

using internal::PhiloxPlan;

// The dither stream of one tensor; see internal::PhiloxPlan.
constexpr PhiloxPlan MakeDitherPlan(const CodecContext& context, std::uint32_t tensor) {
  return internal::MakePhiloxPlan(context.seed, context.round, tensor,
                                  StreamId(RandomPurpose::kQuantizationDither, context.worker));
}

// Dither words of the kChunk / 4 blocks from first_block on into out[0..kChunk), in
// coordinate order: one of internal::PhiloxFill*, fixed per instruction-set entry point.
using DitherFill = internal::PhiloxFillFunction;

// Bucket norms. internal::SumSquares keeps eight lane sums, each a serial chain of adds, so one
// bucket at a time is bound by add latency. Four buckets at once run four independent chains in
// the same lane order, which gives the same bits four times as fast. The test
// QsgdEncodeTest.NormsMatchSumSquaresForEveryBucketSize holds this copy of the order to
// internal::SumSquares.
constexpr std::size_t kNormBatch = 4;
constexpr std::size_t kNormLanes = internal::kReduceLanes;
static_assert(kNormLanes == 8, "the combining tree below is written for 8 lanes");
// Batch only buckets that still sit in L2 when their turn to be quantised comes.
constexpr std::size_t kMaxBatchedBucket = 4096;

// Sums of squares of the kNormBatch consecutive buckets of `bucket` floats at x into sums[].
EDGESGD_QSGD_INLINE void SumSquaresBatchBody(const float* x, std::size_t bucket, float* sums) {
  float lanes[kNormBatch][kNormLanes] = {};
  const std::size_t full = bucket - bucket % kNormLanes;
#if defined(__GNUC__)
  // One 8-float vector per bucket spells out the intended code: the loop vectoriser would rather
  // vectorise across i and reshuffle. Element-wise IEEE operations, so still the same bits.
  using Lanes = float __attribute__((vector_size(4 * kNormLanes)));
  Lanes acc[kNormBatch] = {};
  for (std::size_t i = 0; i < full; i += kNormLanes) {
    for (std::size_t b = 0; b < kNormBatch; ++b) {
      Lanes v;
      std::memcpy(&v, x + b * bucket + i, sizeof(v));
      acc[b] += v * v;
    }
  }
  std::memcpy(lanes, acc, sizeof(lanes));
#else
  for (std::size_t i = 0; i < full; i += kNormLanes) {
    for (std::size_t b = 0; b < kNormBatch; ++b) {
      for (std::size_t lane = 0; lane < kNormLanes; ++lane) {
        const float v = x[b * bucket + i + lane];
        lanes[b][lane] += v * v;
      }
    }
  }
#endif
  for (std::size_t b = 0; b < kNormBatch; ++b) {
    for (std::size_t i = full; i < bucket; ++i) {
      const float v = x[b * bucket + i];
      lanes[b][i - full] += v * v;
    }
    const float* l = lanes[b];
    sums[b] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  }
}

using SumSquaresBatchFunction = void (*)(const float* x, std::size_t bucket, float* sums);
using SumSquaresFunction = float (*)(std::span<const float> x);

void SumSquaresBatchBaseline(const float* x, std::size_t bucket, float* sums) {
  SumSquaresBatchBody(x, bucket, sums);
}
float SumSquaresBaseline(std::span<const float> x) { return internal::SumSquares(x); }

#if EDGESGD_X86_SIMD
// Eight lanes are one AVX2 register. Compiled for AVX-512 instead, GCC 12 spreads them over
// 16-wide vectors and scalar shuffles at several times the cost, so the AVX-512 path uses this.
__attribute__((target("avx2"), noinline)) void SumSquaresBatchAvx2(const float* x,
                                                                   std::size_t bucket,
                                                                   float* sums) {
  SumSquaresBatchBody(x, bucket, sums);
}
__attribute__((target("avx2"), noinline)) float SumSquaresAvx2(std::span<const float> x) {
  return internal::SumSquares(x);
}
#endif

// What every kernel needs to know about the configuration, derived once per call.
struct QsgdShape {
  std::uint32_t levels;
  std::uint32_t bucket;
  std::uint32_t width;       // bits per coordinate
  std::uint32_t sign_shift;  // width - 1: the sign bit's position in a field
  float levels_f;
  float shared_scale;  // > 0: every bucket's norm is replaced by it
};

QsgdShape MakeShape(const QsgdParams& params) {
  const std::uint32_t levels = QsgdCodec::MaxLevels(params);
  const std::uint32_t width = QsgdBitsPerCoordinate(levels);
  return {levels, params.bucket, width, width - 1, static_cast<float>(levels), params.shared_scale};
}

// Quantises coordinates x[0..count) that share one bucket factor. On entry fields[j] holds the
// coordinate's dither word, on exit its field. Written as one branch-free loop over plain arrays
// so that it vectorises; see the arithmetic in qsgd.h.
EDGESGD_QSGD_INLINE void QuantizeRun(const float* x, std::size_t count, float factor,
                                     float levels_f, std::uint32_t sign_shift,
                                     std::uint32_t* fields) {
  // The sign bit moved straight to its place in the field, then masked: with AVX-512 the mask
  // and the merge with the level become one ternary-logic instruction.
  const std::uint32_t sign_bit = std::uint32_t{1} << sign_shift;
  const std::uint32_t sign_move = 31 - sign_shift;
  for (std::size_t j = 0; j < count; ++j) {
    const auto bits = std::bit_cast<std::uint32_t>(x[j]);
    const float magnitude = std::bit_cast<float>(bits & 0x7FFFFFFFu);
    const float ratio = std::min(magnitude * factor, levels_f);
    const auto floor_level = static_cast<std::int32_t>(ratio);
    const float fraction = ratio - static_cast<float>(floor_level);
    const auto level = static_cast<std::uint32_t>(
        UniformFloat(fields[j]) < fraction ? floor_level + 1 : floor_level);
    fields[j] = level | ((bits >> sign_move) & sign_bit);
  }
}

// How far ahead of the chunk being quantised the encoder asks for input, in floats. The input is
// read once, straight from DRAM; fetching it 32 KiB early (a few microseconds of work, well
// inside L2) overlaps that latency with the dither arithmetic instead of stalling on it.
constexpr std::size_t kPrefetchDistance = 8192;

// Hints the cache lines of x[at, at + kChunk) into cache; a no-op past the end.
EDGESGD_QSGD_INLINE void Prefetch(std::span<const float> x, std::size_t at) {
#if defined(__GNUC__)
  constexpr std::size_t kLineFloats = 16;  // 64-byte lines
  for (std::size_t i = at; i < at + kChunk && i < x.size(); i += kLineFloats) {
    __builtin_prefetch(x.data() + i);
  }
#else
  (void)x;
  (void)at;
#endif
}

// Computes the norms of the buckets from `first` on (as many as one batch covers) into
// norms[first..]; returns how many, or 0 when one is not finite.
template <SumSquaresBatchFunction kBatch, SumSquaresFunction kSingle>
EDGESGD_QSGD_INLINE std::size_t ComputeNorms(const QsgdShape& shape, std::span<const float> x,
                                             std::size_t first, std::span<float> norms) {
  const std::size_t begin = first * shape.bucket;
  float sums[kNormBatch];
  std::size_t count = 1;
  if (shape.bucket <= kMaxBatchedBucket && x.size() - begin >= kNormBatch * shape.bucket) {
    kBatch(x.data() + begin, shape.bucket, sums);
    count = kNormBatch;
  } else {
    sums[0] = kSingle(x.subspan(begin, std::min<std::size_t>(shape.bucket, x.size() - begin)));
  }
  bool finite = true;
  for (std::size_t b = 0; b < count; ++b) {
    const float norm = std::sqrt(sums[b]);
    finite &= (norm - norm) == 0.0f;  // false for NaN and infinities
    norms[first + b] = norm;
  }
  return finite ? count : 0;
}

// Encodes one tensor: x (size floats) into its words and bucket norms. Returns false when a
// bucket's norm is not finite.
template <DitherFill kFill, SumSquaresBatchFunction kBatch, SumSquaresFunction kSingle>
EDGESGD_QSGD_INLINE bool EncodeTensor(const QsgdShape& shape, const PhiloxPlan& plan,
                                      std::span<const float> x, std::span<std::uint32_t> words,
                                      std::span<float> norms) {
  alignas(64) std::uint32_t fields[kChunk];
  float factor = 0.0f;  // of the current bucket, which ends at bucket_end
  std::size_t bucket_end = 0;
  std::size_t norms_ready = 0;  // norms[0..norms_ready) are computed
  for (std::size_t start = 0; start < x.size(); start += kChunk) {
    const std::size_t count = std::min(kChunk, x.size() - start);
    Prefetch(x, start + kPrefetchDistance);
    kFill(plan, static_cast<std::uint32_t>(start / 4), std::span<std::uint32_t>(fields, kChunk));
    const std::size_t end = start + count;
    for (std::size_t i = start; i < end;) {
      if (i == bucket_end) {
        const std::size_t bucket_index = i / shape.bucket;
        if (bucket_index == norms_ready) {
          const std::size_t computed = ComputeNorms<kBatch, kSingle>(shape, x, bucket_index, norms);
          if (computed == 0) return false;
          // The norms still vet the input (a NaN or an infinity is refused) before the shared
          // scale takes their place.
          if (shape.shared_scale > 0.0f) {
            std::fill_n(norms.begin() + static_cast<std::ptrdiff_t>(norms_ready), computed,
                        shape.shared_scale);
          }
          norms_ready += computed;
        }
        const float norm = norms[bucket_index];
        factor = norm > 0.0f ? shape.levels_f / norm : 0.0f;
        bucket_end = i + std::min<std::size_t>(shape.bucket, x.size() - i);
      }
      const std::size_t run_end = std::min(end, bucket_end);
      QuantizeRun(x.data() + i, run_end - i, factor, shape.levels_f, shape.sign_shift,
                  fields + (i - start));
      i = run_end;
    }
    for (std::size_t group = 0; group < count; group += kGroup) {
      const std::span<std::uint32_t, kGroup> group_fields(fields + group, kGroup);
      const std::span<std::uint32_t> out = words.subspan((start + group) / 32 * shape.width);
      const std::size_t group_count = std::min(kGroup, count - group);
      if (group_count == kGroup) {
        internal::PackFieldGroup(group_fields, shape.width, out);
      } else {
        // The tensor's last group: zero fields pad it, and only the words that hold real fields
        // are written, so the last word's unused bits come out zero.
        std::fill(group_fields.begin() + static_cast<std::ptrdiff_t>(group_count),
                  group_fields.end(), 0u);
        std::uint32_t group_words[internal::kMaxFieldWidth * kGroup / 32];
        internal::PackFieldGroup(group_fields, shape.width, group_words);
        std::copy(group_words, group_words + internal::PackedWordCount(group_count, shape.width),
                  out.begin());
      }
    }
  }
  return true;
}

template <DitherFill kFill, SumSquaresBatchFunction kBatch, SumSquaresFunction kSingle>
EDGESGD_QSGD_INLINE bool EncodeAll(const QsgdShape& shape, const TensorLayout& layout,
                                   const CodecContext& context, std::span<const float> input,
                                   const PayloadSpans& out) {
  std::size_t word_offset = 0;
  std::size_t norm_offset = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::size_t words = QsgdCodec::WordsFor(size, shape.levels);
    const std::size_t buckets = QsgdCodec::BucketsFor(size, shape.bucket);
    const PhiloxPlan plan = MakeDitherPlan(context, static_cast<std::uint32_t>(t));
    if (!EncodeTensor<kFill, kBatch, kSingle>(shape, plan, input.subspan(layout.offset(t), size),
                                              out.words.subspan(word_offset, words),
                                              out.scales.subspan(norm_offset, buckets))) {
      return false;
    }
    word_offset += words;
    norm_offset += buckets;
  }
  return true;
}

// Loads the fields of group `start` (count of them) of a tensor's words into `fields`.
EDGESGD_QSGD_INLINE void LoadChunk(std::span<const std::uint32_t> words, std::size_t start,
                                   std::size_t count, std::uint32_t width, std::uint32_t* fields) {
  const std::span<const std::uint32_t> in = words.subspan(start / 32 * width);
  if (count == kGroup) {
    internal::UnpackFieldGroup(in, width, std::span<std::uint32_t, kGroup>(fields, kGroup));
  } else {
    std::uint32_t group_words[internal::kMaxFieldWidth * kGroup / 32] = {};
    std::copy(in.begin(), in.end(), group_words);
    internal::UnpackFieldGroup(group_words, width,
                               std::span<std::uint32_t, kGroup>(fields, kGroup));
  }
}

// True when every level of the tensor's fields is <= s. Only called when s + 1 is not a power of
// two; otherwise every level field value is a valid level.
EDGESGD_QSGD_INLINE bool LevelsInRange(const QsgdShape& shape, std::size_t size,
                                       std::span<const std::uint32_t> words) {
  alignas(64) std::uint32_t fields[kGroup];
  const std::uint32_t level_mask = internal::FieldMask(shape.sign_shift);
  for (std::size_t start = 0; start < size; start += kGroup) {
    const std::size_t count = std::min(kGroup, size - start);
    LoadChunk(words, start, count, shape.width, fields);
    std::uint32_t too_big = 0;
    for (std::size_t j = 0; j < count; ++j) {
      too_big |= (fields[j] & level_mask) > shape.levels ? 1u : 0u;
    }
    if (too_big != 0) return false;
  }
  return true;
}

// acc[j] += +-(scale * level) for fields[0..count) sharing one bucket. Branch-free for the
// vectoriser: the sign is applied by flipping the product's sign bit, which is exact.
EDGESGD_QSGD_INLINE void DecodeRun(const std::uint32_t* fields, std::size_t count, float scale,
                                   std::uint32_t sign_shift, float* acc) {
  const std::uint32_t level_mask = internal::FieldMask(sign_shift);
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint32_t field = fields[j];
    const float magnitude =
        scale * static_cast<float>(static_cast<std::int32_t>(field & level_mask));
    const std::uint32_t sign = (field >> sign_shift) << 31;
    acc[j] += std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) ^ sign);
  }
}

EDGESGD_QSGD_INLINE void DecodeTensor(const QsgdShape& shape, std::span<const std::uint32_t> words,
                                      std::span<const float> norms, float weight,
                                      std::span<float> acc) {
  alignas(64) std::uint32_t fields[kGroup];
  float scale = 0.0f;
  std::size_t bucket_end = 0;
  for (std::size_t start = 0; start < acc.size(); start += kGroup) {
    const std::size_t count = std::min(kGroup, acc.size() - start);
    LoadChunk(words, start, count, shape.width, fields);
    const std::size_t end = start + count;
    for (std::size_t i = start; i < end;) {
      if (i == bucket_end) {
        scale = weight * (norms[i / shape.bucket] / shape.levels_f);
        bucket_end = i + std::min<std::size_t>(shape.bucket, acc.size() - i);
      }
      const std::size_t run_end = std::min(end, bucket_end);
      DecodeRun(fields + (i - start), run_end - i, scale, shape.sign_shift, acc.data() + i);
      i = run_end;
    }
  }
}

// Verifies the whole payload (sizes already checked), then decodes it; false means kDataLoss and
// the accumulator untouched.
EDGESGD_QSGD_INLINE bool DecodeAll(const QsgdShape& shape, const TensorLayout& layout,
                                   const PayloadView& payload, float weight,
                                   std::span<float> accumulator) {
  if (!internal::AllFinite(payload.scales)) return false;
  bool valid_norms = true;
  if (shape.shared_scale > 0.0f) {
    for (const float norm : payload.scales) valid_norms &= norm == shape.shared_scale;
  } else {
    for (const float norm : payload.scales) valid_norms &= norm >= 0.0f;
  }
  if (!valid_norms) return false;
  // With s = 2^(width-1) - 1 every level field is a valid level; otherwise scan them.
  const bool check_levels = internal::FieldMask(shape.sign_shift) != shape.levels;
  std::size_t word_offset = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::size_t words = QsgdCodec::WordsFor(size, shape.levels);
    const std::span<const std::uint32_t> tensor_words = payload.words.subspan(word_offset, words);
    const auto used_bits = static_cast<std::uint32_t>(size % 32 * shape.width % 32);
    if (used_bits != 0 && (tensor_words.back() >> used_bits) != 0) return false;
    if (check_levels && !LevelsInRange(shape, size, tensor_words)) return false;
    word_offset += words;
  }
  word_offset = 0;
  std::size_t norm_offset = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::size_t words = QsgdCodec::WordsFor(size, shape.levels);
    const std::size_t buckets = QsgdCodec::BucketsFor(size, shape.bucket);
    DecodeTensor(shape, payload.words.subspan(word_offset, words),
                 payload.scales.subspan(norm_offset, buckets), weight,
                 accumulator.subspan(layout.offset(t), size));
    word_offset += words;
    norm_offset += buckets;
  }
  return true;
}

// One entry point per instruction set, each compiling the shared bodies for its target.
bool EncodePortable(const QsgdShape& shape, const TensorLayout& layout, const CodecContext& context,
                    std::span<const float> input, const PayloadSpans& out) {
  return EncodeAll<internal::PhiloxFillPortable, SumSquaresBatchBaseline, SumSquaresBaseline>(
      shape, layout, context, input, out);
}
bool DecodePortable(const QsgdShape& shape, const TensorLayout& layout, const PayloadView& payload,
                    float weight, std::span<float> accumulator) {
  return DecodeAll(shape, layout, payload, weight, accumulator);
}

#if EDGESGD_X86_SIMD
bool EncodeSse2(const QsgdShape& shape, const TensorLayout& layout, const CodecContext& context,
                std::span<const float> input, const PayloadSpans& out) {
  return EncodeAll<internal::PhiloxFillSse2, SumSquaresBatchBaseline, SumSquaresBaseline>(
      shape, layout, context, input, out);
}
__attribute__((target("avx2"))) bool EncodeAvx2(const QsgdShape& shape, const TensorLayout& layout,
                                                const CodecContext& context,
                                                std::span<const float> input,
                                                const PayloadSpans& out) {
  return EncodeAll<internal::PhiloxFillAvx2, SumSquaresBatchAvx2, SumSquaresAvx2>(
      shape, layout, context, input, out);
}
__attribute__((target("avx2"))) bool DecodeAvx2(const QsgdShape& shape, const TensorLayout& layout,
                                                const PayloadView& payload, float weight,
                                                std::span<float> accumulator) {
  return DecodeAll(shape, layout, payload, weight, accumulator);
}
__attribute__((target(EDGESGD_AVX512_TARGET))) bool EncodeAvx512(const QsgdShape& shape,
                                                                 const TensorLayout& layout,
                                                                 const CodecContext& context,
                                                                 std::span<const float> input,
                                                                 const PayloadSpans& out) {
  return EncodeAll<internal::PhiloxFillAvx512, SumSquaresBatchAvx2, SumSquaresAvx2>(
      shape, layout, context, input, out);
}
__attribute__((target(EDGESGD_AVX512_TARGET))) bool DecodeAvx512(const QsgdShape& shape,
                                                                 const TensorLayout& layout,
                                                                 const PayloadView& payload,
                                                                 float weight,
                                                                 std::span<float> accumulator) {
  return DecodeAll(shape, layout, payload, weight, accumulator);
}
#endif  // EDGESGD_X86_SIMD

// The instruction set behind each kernel: the dither and the encoder's loops use the same one.
internal::PhiloxIsa IsaOf(QsgdKernel kernel) {
  switch (kernel) {
    case QsgdKernel::kSse2:
      return internal::PhiloxIsa::kSse2;
    case QsgdKernel::kAvx2:
      return internal::PhiloxIsa::kAvx2;
    case QsgdKernel::kAvx512:
      return internal::PhiloxIsa::kAvx512;
    default:
      return internal::PhiloxIsa::kPortable;
  }
}

// kAuto resolved to a concrete kernel, or kAuto when `kernel` cannot run here.
QsgdKernel Resolve(QsgdKernel kernel) {
  if (kernel == QsgdKernel::kAuto) {
    switch (internal::BestPhiloxIsa()) {
      case internal::PhiloxIsa::kSse2:
        return QsgdKernel::kSse2;
      case internal::PhiloxIsa::kAvx2:
        return QsgdKernel::kAvx2;
      case internal::PhiloxIsa::kAvx512:
        return QsgdKernel::kAvx512;
      default:
        return QsgdKernel::kPortable;
    }
  }
  if (kernel == QsgdKernel::kPortable) return kernel;
  const bool x86 =
      kernel == QsgdKernel::kSse2 || kernel == QsgdKernel::kAvx2 || kernel == QsgdKernel::kAvx512;
  return x86 && internal::PhiloxIsaSupported(IsaOf(kernel)) ? kernel : QsgdKernel::kAuto;
}

}  // namespace

namespace internal {

bool QsgdKernelSupported(QsgdKernel kernel) {
  return kernel == QsgdKernel::kAuto || Resolve(kernel) != QsgdKernel::kAuto;
}

bool QsgdDitherWords(QsgdKernel kernel, const CodecContext& context, std::uint32_t tensor,
                     std::uint32_t first_block, std::span<std::uint32_t, kQsgdDitherWords> out) {
  const QsgdKernel resolved = Resolve(kernel);
  if (resolved == QsgdKernel::kAuto) return false;
  internal::PhiloxFillFor(IsaOf(resolved))(MakeDitherPlan(context, tensor), first_block, out);
  return true;
}

Status QsgdEncodeWith(QsgdKernel kernel, const QsgdParams& params, const TensorLayout& layout,
                      const CodecContext& context, std::span<const float> input,
                      const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape payload_shape, QsgdCodec::Shape(params, layout));
  EDGESGD_TRY(internal::CheckEncodeArgs(layout, input, out, payload_shape, scratch, 0));
  const QsgdShape shape = MakeShape(params);
  bool ok = false;
  switch (Resolve(kernel)) {
    case QsgdKernel::kPortable:
      ok = EncodePortable(shape, layout, context, input, out);
      break;
#if EDGESGD_X86_SIMD
    case QsgdKernel::kSse2:
      ok = EncodeSse2(shape, layout, context, input, out);
      break;
    case QsgdKernel::kAvx2:
      ok = EncodeAvx2(shape, layout, context, input, out);
      break;
    case QsgdKernel::kAvx512:
      ok = EncodeAvx512(shape, layout, context, input, out);
      break;
#endif
    default:
      return Status::FailedPrecondition("the qsgd kernel cannot run on this CPU");
  }
  return ok ? Status::Ok() : Status::InvalidArgument("the norm of an input bucket is not finite");
}

Status QsgdDecodeAddWith(QsgdKernel kernel, const QsgdParams& params, const TensorLayout& layout,
                         const CodecContext&, const PayloadView& payload, float weight,
                         std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape payload_shape, QsgdCodec::Shape(params, layout));
  EDGESGD_TRY(internal::CheckDecodeArgs(layout, payload, payload_shape, accumulator, scratch, 0));
  const QsgdShape shape = MakeShape(params);
  bool ok = false;
  switch (Resolve(kernel)) {
    case QsgdKernel::kPortable:
      ok = DecodePortable(shape, layout, payload, weight, accumulator);
      break;
#if EDGESGD_X86_SIMD
    case QsgdKernel::kSse2:
      // Decoding has no dither; the baseline build of the portable body is the SSE2 path.
      ok = DecodePortable(shape, layout, payload, weight, accumulator);
      break;
    case QsgdKernel::kAvx2:
      ok = DecodeAvx2(shape, layout, payload, weight, accumulator);
      break;
    case QsgdKernel::kAvx512:
      ok = DecodeAvx512(shape, layout, payload, weight, accumulator);
      break;
#endif
    default:
      return Status::FailedPrecondition("the qsgd kernel cannot run on this CPU");
  }
  return ok ? Status::Ok() : Status::DataLoss("a qsgd payload has a bad norm, level or padding");
}

}  // namespace internal

Status QsgdCodec::Encode(const QsgdParams& params, const TensorLayout& layout,
                         const CodecContext& context, std::span<const float> input,
                         const PayloadSpans& out, std::span<std::byte> scratch) {
  return internal::QsgdEncodeWith(QsgdKernel::kAuto, params, layout, context, input, out, scratch);
}

Status QsgdCodec::DecodeAdd(const QsgdParams& params, const TensorLayout& layout,
                            const CodecContext& context, const PayloadView& payload, float weight,
                            std::span<float> accumulator, std::span<std::byte> scratch) {
  return internal::QsgdDecodeAddWith(QsgdKernel::kAuto, params, layout, context, payload, weight,
                                     accumulator, scratch);
}

Result<std::uint32_t> DqBits(const QsgdParams& params, float gradient_norm, std::uint32_t round,
                             std::uint32_t rounds) {
  QsgdParams dq = params;
  dq.schedule = QuantScheduleKind::kDq;
  EDGESGD_TRY(QsgdCodec::Validate(dq));
  if (rounds == 0) return Status::InvalidArgument("a run has at least one round");
  if (!(gradient_norm >= 0.0f && gradient_norm <= std::numeric_limits<float>::max())) {
    return Status::InvalidArgument("the gradient norm is not finite");
  }
  const std::uint32_t remaining = round < rounds ? rounds - 1 - round : 0;
  // Double precision: rho^(remaining / 2) underflows float long before it stops mattering.
  const double scaled = static_cast<double>(gradient_norm) *
                        std::pow(static_cast<double>(params.dq_rho), 0.5 * remaining) *
                        static_cast<double>(params.dq_k);
  // Past kMaxQsgdLevels every width is clipped to at most 16 bits anyway; comparing first keeps
  // the conversion below in range.
  if (!(scaled <= static_cast<double>(kMaxQsgdLevels))) return params.bits_max;
  const auto levels = static_cast<std::uint32_t>(std::ceil(scaled));
  const std::uint32_t bits = QsgdBitsPerCoordinate(levels);  // 1 + ceil(log2(s + 1))
  if (bits < params.bits_min) return params.bits_min;
  if (bits > params.bits_max) return params.bits_max;
  return bits;
}

Result<QsgdParams> QsgdCodec::RoundParams(const QsgdParams& params, std::uint32_t round,
                                          std::uint32_t rounds, std::span<const float> gradient) {
  EDGESGD_TRY(Validate(params));
  if (params.schedule != QuantScheduleKind::kDq) return params;
  EDGESGD_TRY_ASSIGN(const std::uint32_t bits,
                     DqBits(params, std::sqrt(internal::SumSquares(gradient)), round, rounds));
  EDGESGD_TRY_ASSIGN(const std::uint32_t levels, QsgdLevelsForBits(bits));
  return QsgdParams{.levels = levels, .bucket = params.bucket, .shared_scale = params.shared_scale};
}

}  // namespace edgesgd
