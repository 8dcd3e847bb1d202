#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"
#include "edgesgd/core/codecs/sign.h"

namespace edgesgd {

// What a stochastic sign payload's per-tensor scale is.
enum class StochasticSignScale : std::uint8_t {
  kBound,  // B: a vote decodes to +-B, an unbiased estimate of the input clipped to [-B, B]
  kUnit,   // 1 (majority vote)
};

struct StochasticSignParams {
  // B: inputs are clipped to [-B, B] and vote +1 with probability (B + x) / 2B. A fixed bound,
  // the same on every device and in every round, keeps E[vote] = x / B one scale for all: a
  // bound taken from each device's own max |x| would weigh the devices' votes differently
  // (and reveal each one's gradient scale). Should bound most coordinates of what is encoded;
  // larger makes every vote closer to a coin flip.
  float bound = 0.1f;
  StochasticSignScale scale = StochasticSignScale::kBound;
  friend constexpr bool operator==(const StochasticSignParams&,
                                   const StochasticSignParams&) = default;
};

// Stochastic sign (Jin et al., 2020): coordinate x votes +1 with probability (B + clip(x)) / 2B
// and -1 otherwise, so E[vote] = clip(x) / B, where plain sign gives sign(x) whatever the
// magnitudes: a majority of devices voting on a coordinate then follows the sum of their
// inputs rather than the number of devices on each side, which is what non-iid data needs.
//
// The payload is SignCodec's (1 bit per coordinate, bit 1 = +1, one scale per tensor: B or 1),
// and decodes as SignCodec's does. The draws are private to each worker:
// CounterRng(seed, round, tensor, StreamId(kQuantizationDither, worker)), one uniform u per
// coordinate in order (NextFloat); the bit is 1 unless u >= 0.5f + x * (0.5f / B), computed in
// float as written, so x >= B always votes +1, x <= -B always -1, and NaN +1 (as sign(NaN) in
// SignCodec).
struct StochasticSignCodec {
  using Params = StochasticSignParams;
  static constexpr std::string_view kName = "stochastic_sign";
  static constexpr std::string_view kSummary =
      "1 bit per coordinate, +1 with probability (B + x) / 2B (unbiased); votes with "
      "--aggregate majority on non-iid data";
  static constexpr PayloadLayout kLayout = PayloadLayout::kSignWords;
  static constexpr CodecTraits kTraits{.downlink_recompress = true};
  static constexpr std::array<std::string_view, 2> kScaleNames{"bound", "unit"};
  static constexpr std::array<ParamField<Params>, 2> kFields{
      Field<&Params::bound>("sign_bound",
                            "B: coordinates are clipped to [-B, B] and vote +1 with probability "
                            "(B + x) / 2B"),
      Field<&Params::scale>("stochastic_sign_scale",
                            "each tensor's scale: bound (votes decode to +-B, unbiased, for "
                            "mean aggregation) or unit (majority vote always sends these)",
                            kScaleNames)};

  static constexpr Status Validate(const Params& params) {
    if (!PositiveFinite(params.bound)) {
      return Status::InvalidArgument("the sign bound B must be positive and finite");
    }
    if (params.scale != StochasticSignScale::kBound && params.scale != StochasticSignScale::kUnit) {
      return Status::InvalidArgument("unknown stochastic sign scale");
    }
    return Status::Ok();
  }
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    return SignCodec::Shape(SignParams{}, layout);
  }
  // Needs no scratch (0 bytes).
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }
  // Majority vote counts the votes with unit scales.
  static constexpr Params VoteForm(const Params& params) {
    return Params{params.bound, StochasticSignScale::kUnit};
  }
  // Encode reads `input` (layout.dimension() floats) and writes Shape().words words and one
  // scale per tensor into `out`. Errors: kInvalidArgument (parameters, input length),
  // kResourceExhausted (an output span too small). Does not allocate.
  // DecodeAdd is SignCodec's: it verifies the payload (field sizes, zero padding bits, scales
  // finite and >= 0), then accumulator[i] += weight * (bit ? +scale : -scale). Errors:
  // kInvalidArgument (parameters, accumulator length), kDataLoss (malformed payload; the
  // accumulator is left untouched). Does not allocate.
  EDGESGD_CODEC_OPERATIONS(Params);
};

}  // namespace edgesgd
