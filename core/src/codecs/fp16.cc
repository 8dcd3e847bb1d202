#include "edgesgd/core/codecs/fp16.h"

#include <bit>

#include "edgesgd/core/internal/codec_checks.h"

// x86-64 Linux builds get the loops compiled for AVX2 as well and pick at load time (the results
// are the same bits: the conversion is integer arithmetic and one exact float addition), and
// the conversion itself from the F16C instructions where the CPU has them: they round to
// nearest even as the portable code does, and clamping to +-65504 first makes them saturate.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define EDGESGD_FP16_X86 1
#define EDGESGD_FP16_CLONES [[gnu::target_clones("avx2", "default")]]
#include <cpuid.h>
#include <immintrin.h>
#else
#define EDGESGD_FP16_X86 0
#define EDGESGD_FP16_CLONES
#endif

namespace edgesgd {
namespace {

constexpr std::uint32_t kExponentBits = 0x7F800000u;
constexpr std::uint32_t kHalfExponentBits = 0x7C00u;

// Packs the halves of `x` two per word; false when `x` holds a NaN or an infinity.
EDGESGD_FP16_CLONES bool PackHalves(const float* x, std::size_t size, std::uint32_t* words) {
  std::uint32_t non_finite = 0;
  for (std::size_t k = 0; k < size / 2; ++k) {
    const std::uint32_t low = std::bit_cast<std::uint32_t>(x[2 * k]);
    const std::uint32_t high = std::bit_cast<std::uint32_t>(x[2 * k + 1]);
    non_finite |= static_cast<std::uint32_t>((low & kExponentBits) == kExponentBits) |
                  static_cast<std::uint32_t>((high & kExponentBits) == kExponentBits);
    words[k] = internal::HalfFromFloat(x[2 * k]) |
               (std::uint32_t{internal::HalfFromFloat(x[2 * k + 1])} << 16);
  }
  if (size % 2 != 0) {
    const float last = x[size - 1];
    non_finite |= (std::bit_cast<std::uint32_t>(last) & kExponentBits) == kExponentBits ? 1u : 0u;
    words[size / 2] = internal::HalfFromFloat(last);
  }
  return non_finite == 0;
}

#if EDGESGD_FP16_X86
// PackHalves with F16C: eight coordinates per instruction, the rest (fewer than eight) as above.
[[gnu::target("avx2,f16c")]] bool PackHalvesF16c(const float* x, std::size_t size,
                                                 std::uint32_t* words) {
  const __m256 largest = _mm256_set1_ps(65504.0f);
  const __m256 smallest = _mm256_set1_ps(-65504.0f);
  const __m256i exponent = _mm256_set1_epi32(static_cast<int>(kExponentBits));
  __m256i non_finite = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i bits = _mm256_and_si256(_mm256_castps_si256(v), exponent);
    non_finite = _mm256_or_si256(non_finite, _mm256_cmpeq_epi32(bits, exponent));
    // max keeps -0.0 (it is not less than -65504), so the sign of zero survives.
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(v, smallest), largest);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(words + i / 2),
                     _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  const bool tail_finite = PackHalves(x + i, size - i, words + i / 2);
  return _mm256_testz_si256(non_finite, non_finite) != 0 && tail_finite;
}
#endif

#if EDGESGD_FP16_X86
// Whether the CPU runs the F16C versions. Clang 14's __builtin_cpu_supports does not know
// "f16c", so its CPUID bit (leaf 1, ECX bit 29) is read directly; the AVX2 check includes the
// operating system's support for the YMM registers, which F16C needs as well.
bool HasAvx2AndF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
         (ecx & bit_F16C) != 0;
}
#endif

using PackHalvesFunction = bool (*)(const float*, std::size_t, std::uint32_t*);

PackHalvesFunction BestPackHalves() {
#if EDGESGD_FP16_X86
  if (HasAvx2AndF16c()) return &PackHalvesF16c;
#endif
  return &PackHalves;
}

// acc[i] += weight * half i of `words`.
EDGESGD_FP16_CLONES void AddHalves(const std::uint32_t* words, float weight, float* acc,
                                   std::size_t size) {
  for (std::size_t k = 0; k < size / 2; ++k) {
    acc[2 * k] += weight * internal::FloatFromHalf(static_cast<std::uint16_t>(words[k]));
    acc[2 * k + 1] += weight * internal::FloatFromHalf(static_cast<std::uint16_t>(words[k] >> 16));
  }
  if (size % 2 != 0) {
    acc[size - 1] += weight * internal::FloatFromHalf(static_cast<std::uint16_t>(words[size / 2]));
  }
}

#if EDGESGD_FP16_X86
// AddHalves with F16C (exact conversions; the multiply and the add stay separate operations,
// so the sums are the portable loop's bits).
[[gnu::target("avx2,f16c")]] void AddHalvesF16c(const std::uint32_t* words, float weight,
                                                float* acc, std::size_t size) {
  const __m256 scale = _mm256_set1_ps(weight);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const __m256 halves =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words + i / 2)));
    const __m256 sum = _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_mul_ps(scale, halves));
    _mm256_storeu_ps(acc + i, sum);
  }
  AddHalves(words + i / 2, weight, acc + i, size - i);
}
#endif

using AddHalvesFunction = void (*)(const std::uint32_t*, float, float*, std::size_t);

AddHalvesFunction BestAddHalves() {
#if EDGESGD_FP16_X86
  if (HasAvx2AndF16c()) return &AddHalvesF16c;
#endif
  return &AddHalves;
}

}  // namespace

Status Fp16Codec::Encode(const Fp16Params& params, const TensorLayout& layout, const CodecContext&,
                         std::span<const float> input, const PayloadSpans& out,
                         std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<Fp16Codec>(params, layout, input, out, scratch));
  const PackHalvesFunction pack_halves = BestPackHalves();
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(input, t);
    if (!pack_halves(x.data(), x.size(), out.words.data() + word)) {
      return Status::InvalidArgument("fp16 got a NaN or infinite value");
    }
    word += WordsFor(x.size());
  }
  return Status::Ok();
}

Status Fp16Codec::DecodeAdd(const Fp16Params& params, const TensorLayout& layout,
                            const CodecContext&, const PayloadView& payload, float weight,
                            std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY(
      internal::CheckedDecodeShape<Fp16Codec>(params, layout, payload, accumulator, scratch));
  // Verify everything before the first write, so a rejected payload changes nothing.
  std::uint32_t bad = 0;
  for (const std::uint32_t word : payload.words) {
    bad |= ((word & kHalfExponentBits) == kHalfExponentBits ? 1u : 0u) |
           (((word >> 16) & kHalfExponentBits) == kHalfExponentBits ? 1u : 0u);
  }
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    word += WordsFor(layout.size(t));
    if (layout.size(t) % 2 != 0) bad |= payload.words[word - 1] >> 16;
  }
  if (bad != 0) return Status::DataLoss("an fp16 payload holds a NaN, an infinity or padding");
  const AddHalvesFunction add_halves = BestAddHalves();
  word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<float> acc = layout.Slice(accumulator, t);
    add_halves(payload.words.data() + word, weight, acc.data(), acc.size());
    word += WordsFor(acc.size());
  }
  return Status::Ok();
}

}  // namespace edgesgd
