#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"
#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/random.h"

namespace edgesgd {

struct StochasticSignParams {
  SignScale scale = SignScale::kMeanAbs;
  // B (Jin et al., 2020): coordinate x is sent as +1 with probability (B + x) / (2B), clamped
  // to [0, 1], so votes of devices whose data disagree add up to the sign of their mean rather
  // than of their majority.
  float noise_bound = 1.0f;
  friend constexpr bool operator==(const StochasticSignParams&,
                                   const StochasticSignParams&) = default;
};

// The stochastic sign: the sign codec's payload (kSignWords, one scale per tensor), with bit 1
// meaning x >= B (1 - 2u) rather than x >= 0, u uniform in [0, 1) from the sender's private
// stream (seed, round, tensor, RandomPurpose::kSignNoise, worker). u is exact and the threshold
// one multiply, so the bits are the same on every architecture. Scales and decoding are the
// sign codec's.
struct StochasticSignCodec {
  using Params = StochasticSignParams;
  static constexpr std::string_view kName = "stochastic_sign";
  static constexpr std::string_view kSummary =
      "1 bit per coordinate, +1 with probability (B + x) / 2B, and one scale per tensor; votes "
      "with --aggregate majority where devices' data differ";
  static constexpr PayloadLayout kLayout = PayloadLayout::kSignWords;
  // Recompressing on the server draws from its own stream; no consensus step was measured.
  static constexpr CodecTraits kTraits{.downlink_recompress = true};
  static constexpr bool KeepsNormBound(const Params& params) {
    return params.scale == SignScale::kMeanAbs;
  }
  static constexpr std::array<ParamField<Params>, 2> kFields{
      SignScaleField<Params>(),
      Field<&Params::noise_bound>(
          "sign_noise_bound",
          "B: x is sent as +1 with probability (B + x) / (2B), clamped to [0, 1]; about the "
          "largest |x| a device sends")};

  static constexpr Status Validate(const Params& params) {
    EDGESGD_TRY(SignCodec::Validate(SignParams{params.scale}));
    if (!PositiveFinite(params.noise_bound)) {
      return Status::InvalidArgument("the sign noise bound must be positive and finite");
    }
    return Status::Ok();
  }
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    return SignCodec::Shape(SignParams{params.scale}, layout);
  }
  // Needs no scratch (0 bytes).
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }
  // Majority vote counts unit votes, drawn as stochastically as the run's.
  static constexpr Params VoteForm(const Params& params) {
    return Params{SignScale::kUnit, params.noise_bound};
  }
  // Encode and DecodeAdd: as the sign codec's (sign.h), with the stochastic bits above.
  EDGESGD_CODEC_OPERATIONS(Params);
};

namespace internal {
// Packs the stochastic signs of `x` (bit 1 iff x >= bound * (1 - 2u), u = UniformFloat of the
// next word of `rng`) into `words`, padding bits 0. Preconditions (CHECKed): words.size() >=
// SignCodec::WordsFor(x.size()). Does not allocate.
void StochasticSignPack(std::span<const float> x, float bound, CounterRng& rng,
                        std::span<std::uint32_t> words);
}  // namespace internal

}  // namespace edgesgd
