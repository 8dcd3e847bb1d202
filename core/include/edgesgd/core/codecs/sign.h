#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd {

// What a sign payload's per-tensor scale is.
enum class SignScale : std::uint8_t {
  kMeanAbs,  // mean |x| of the tensor (EF-signSGD, keeps magnitude for error feedback)
  kUnit,     // 1 (plain signSGD and majority vote)
};

struct SignParams {
  SignScale scale = SignScale::kMeanAbs;
  friend constexpr bool operator==(const SignParams&, const SignParams&) = default;
};

// The sign_scale field, shared by the codecs that send sign words (Params has a SignScale scale).
inline constexpr std::array<std::string_view, 2> kSignScaleNames{"mean_abs", "unit"};
template <typename Params>
constexpr ParamField<Params> SignScaleField() {
  return Field<&Params::scale>("sign_scale",
                               "each tensor's scale: mean_abs (mean |x|, for error feedback) or "
                               "unit (plain signs; majority vote always sends these)",
                               kSignScaleNames);
}

// 1-bit sign per coordinate. Bit j of word w of a tensor is coordinate 32w + j of that tensor;
// bit 1 means x >= 0 — so sign(0) = +1, the majority-vote convention (also for -0.0 and NaN).
// Each tensor starts on a fresh word; unused high bits of its last word are 0. `scales` holds
// one scale per tensor: mean |x| (SignScale::kMeanAbs) or 1 (kUnit). Decoded value: +-scale.
//
// The mean |x| is internal::SumAbs(tensor) / size: a fixed lane order, so the scale has the
// same bits on every architecture and SIMD path. A NaN in the input makes that tensor's scale
// the canonical quiet NaN (0x7FC00000) so the bytes do not depend on how an FPU propagates NaN
// payloads; decoders reject such a payload with kDataLoss.
struct SignCodec {
  using Params = SignParams;
  static constexpr std::string_view kName = "sign";
  static constexpr std::string_view kSummary =
      "1 bit per coordinate (x >= 0) and one scale per tensor; votes with --aggregate majority";
  static constexpr PayloadLayout kLayout = PayloadLayout::kSignWords;
  static constexpr CodecTraits kTraits{.downlink_recompress = true, .consensus_step = 0.5f};
  // mean|x| * sign(x) has norm |x|_1 / sqrt(n) <= |x|_2 per tensor; unit votes have sqrt(n).
  static constexpr bool KeepsNormBound(const Params& params) {
    return params.scale == SignScale::kMeanAbs;
  }
  static constexpr std::array<ParamField<Params>, 1> kFields{SignScaleField<Params>()};

  static constexpr Status Validate(const Params& params) {
    if (params.scale != SignScale::kMeanAbs && params.scale != SignScale::kUnit) {
      return Status::InvalidArgument("unknown sign scale");
    }
    return Status::Ok();
  }
  static constexpr std::size_t WordsFor(std::size_t size) { return (size + 31) / 32; }
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    return SumOverTensors(layout, [](std::size_t size) {
      return PayloadShape{.words = WordsFor(size), .scales = 1};
    });
  }
  // Needs no scratch (0 bytes).
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }
  // Majority vote counts plain (unit) signs.
  static constexpr Params VoteForm(const Params&) { return Params{SignScale::kUnit}; }
  // Encode reads `input` (layout.dimension() floats) and writes Shape().words words and one
  // scale per tensor into `out`. Errors: kInvalidArgument (parameters, input length),
  // kResourceExhausted (an output span too small). Does not allocate.
  // DecodeAdd verifies the payload (field sizes, zero padding bits, scales finite and >= 0), then
  // accumulator[i] += weight * (bit ? +scale : -scale). Errors: kInvalidArgument (parameters,
  // accumulator length), kDataLoss (malformed payload; the accumulator is left untouched).
  // Does not allocate.
  EDGESGD_CODEC_OPERATIONS(Params);
};

namespace internal {
// Packs the signs of one tensor `x` into `words` (WordsFor(x.size()) words, padding bits 0) and
// returns internal::SumAbs(x), bit for bit. SignPack uses the fastest path compiled in (SSE2 on
// x86-64, NEON on AArch64); SignPackPortable is the plain C++ path. Both are exposed so tests
// can check that they write identical bytes. Preconditions (CHECKed): words.size() >=
// WordsFor(x.size()). Do not allocate.
float SignPack(std::span<const float> x, std::span<std::uint32_t> words);
float SignPackPortable(std::span<const float> x, std::span<std::uint32_t> words);
// A tensor's mean_abs scale from its internal::SumAbs: the canonical quiet NaN for a NaN.
float MeanAbsScale(float sum_abs, std::size_t size);
// DecodeAdd of a payload laid out as kSignWords, whose shape the caller checked: verifies the
// scales and padding bits (kDataLoss, nothing written), then adds weight * +-scale.
Status AddSignWords(const TensorLayout& layout, const PayloadView& payload, float weight,
                    std::span<float> accumulator);
}  // namespace internal

}  // namespace edgesgd
