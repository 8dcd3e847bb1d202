#include "edgesgd/core/codecs/fp16.h"

#include <bit>

#include "edgesgd/core/internal/codec_checks.h"

// x86-64 Linux builds get the loops compiled for AVX2 as well and pick at load time (the results
// are the same bits: the conversion is integer arithmetic and one exact float addition).
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define EDGESGD_FP16_CLONES [[gnu::target_clones("avx2", "default")]]
#else
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

}  // namespace

Status Fp16Codec::Encode(const Fp16Params& params, const TensorLayout& layout, const CodecContext&,
                         std::span<const float> input, const PayloadSpans& out,
                         std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<Fp16Codec>(params, layout, input, out, scratch));
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(input, t);
    if (!PackHalves(x.data(), x.size(), out.words.data() + word)) {
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
  word = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<float> acc = layout.Slice(accumulator, t);
    AddHalves(payload.words.data() + word, weight, acc.data(), acc.size());
    word += WordsFor(acc.size());
  }
  return Status::Ok();
}

}  // namespace edgesgd
