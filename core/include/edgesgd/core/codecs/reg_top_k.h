#pragma once

// RegTop-k (Bereyhi et al., "Regularized Top-k", arXiv:2501.05633, 2025): Top-k whose
// selection is regularised by what the previous aggregate did to the coordinates this worker
// sent. Worker i keeps a
// posterior distortion Delta_i (d floats) and selects by
//
//   score[j] = tanh(|1 + Delta[j]| / mu) * |a[j]|
//
// sending a[j] (not the score) at the k best-scoring coordinates of every tensor. After the
// round's aggregate ghat = (1/n) sum_i s_i is known:
//
//   Delta[j] = (n * ghat[j] - s[j]) / s[j]   where this worker sent s[j] != 0
//   Delta[j] = Q                             elsewhere (and before the first aggregate)
//
// 1 + Delta[j] is (sum of all contributions at j) / (own contribution at j): a coordinate whose
// aggregate nearly cancelled the worker's push scores low next round; with Delta = Q the weight
// tanh(|1 + Q| / mu) is 1 (for the default Q) and the choice is exactly Top-k's.
//
// The payload, its shape and its decoding are TopKCodec's: indices ascending per tensor, values
// a[j]. Receivers need no RegTop-k state. The stateless Encode is RegTop-k without a posterior
// (every Delta = Q), i.e. its first round; the posterior is the codec's selector state, which
// error feedback keeps from round to round (the Selector* functions).

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codecs/top_k.h"

namespace edgesgd {

struct RegTopKParams {
  float k_ratio = 0.01f;  // as top_k's
  // The score of coordinate j is tanh(|1 + Delta_j| / mu) * |a_j|. mu > 0 sets how strongly a
  // coordinate whose last aggregate cancelled the worker's own contribution (Delta_j near -1) is
  // held back; 4 is the paper's choice for linear regression, 5 for ResNet-18.
  float mu = 4.0f;
  // Delta of a coordinate with no posterior (not sent last round, or no round yet), > 0. Large
  // enough that tanh(|1 + Q| / mu) is 1 in float, so such a coordinate scores |a_j| as in Top-k.
  float q = 1e8f;
  friend constexpr bool operator==(const RegTopKParams&, const RegTopKParams&) = default;
};

struct RegTopKCodec {
  using Params = RegTopKParams;
  static constexpr std::string_view kName = "reg_top_k";
  static constexpr std::string_view kSummary =
      "RegTop-k: top_k's payload, coordinates scored by the last aggregate (see --mu)";
  static constexpr PayloadLayout kLayout = PayloadLayout::kSparse;
  static constexpr CodecTraits kTraits{};
  static constexpr bool KeepsNormBound(const Params&) { return true; }
  static constexpr std::array<ParamField<Params>, 3> kFields{
      Field<&Params::k_ratio>("k_ratio", "fraction of each tensor's coordinates sent, in (0, 1]"),
      Field<&Params::mu>("mu",
                         "score tanh(|1 + Delta| / mu) * |a|; smaller mu holds back coordinates "
                         "whose last aggregate cancelled this worker's push more strongly (> 0; "
                         "4 for linear regression, 5 for ResNet-18)"),
      Field<&Params::q>("reg_q",
                        "Delta of coordinates without a posterior (> 0; large enough that they "
                        "score |a| as in Top-k)")};

  static constexpr TopKParams AsTopK(const Params& params) { return TopKParams{params.k_ratio}; }
  static constexpr Status Validate(const Params& params) {
    EDGESGD_TRY(TopKCodec::Validate(AsTopK(params)));
    if (!PositiveFinite(params.mu)) {
      return Status::InvalidArgument("reg_top_k mu must be positive and finite");
    }
    if (!PositiveFinite(params.q)) {
      return Status::InvalidArgument("reg_top_k Q must be positive and finite");
    }
    return Status::Ok();
  }
  // TopKCodec's shape, after checking k_ratio, mu and Q. Errors: kInvalidArgument.
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    return TopKCodec::Shape(AsTopK(params), layout);
  }
  // Scratch for Encode: the scores of the largest tensor (plus up to 3 bytes to align them) and
  // Top-k's selection scratch. DecodeAdd needs none. 0 for bad parameters.
  static constexpr std::size_t ScratchBytes(const Params& params, const TensorLayout& layout) {
    if (!Shape(params, layout).ok()) return 0;
    return (sizeof(float) - 1) + LargestTensorSize(layout) * sizeof(float) +
           TopKCodec::ScratchBytes(AsTopK(params), layout);
  }
  // Encode is RegTop-k with no posterior (Delta = Q everywhere): EncodeWithDistortion with an
  // empty distortion, under TopKCodec::Encode's contract. DecodeAdd is TopKCodec::DecodeAdd
  // (the payloads are the same), after checking mu and Q.
  EDGESGD_CODEC_OPERATIONS(Params);
  // Selects, per tensor in layout order, the k = SparseCount(size, k_ratio) coordinates of
  // largest score (ties by lower index; a NaN score ranks first, as in TopKCodec) and writes
  // their global indices (ascending) to out.indices and input there to out.values.
  // `distortion` is Delta (layout.dimension() floats), or empty for Delta = Q everywhere.
  // Reads `input` and `distortion`, uses `scratch`; does not allocate.
  // Errors: kInvalidArgument (bad parameters, input or non-empty distortion of the wrong size),
  // kResourceExhausted (an output span or the scratch too small).
  static Status EncodeWithDistortion(const Params& params, const TensorLayout& layout,
                                     std::span<const float> distortion,
                                     std::span<const float> input, const PayloadSpans& out,
                                     std::span<std::byte> scratch);

  // ---- The posterior as selector state ----
  // One d-float buffer holds Delta between rounds and what was sent while the round's aggregate
  // is outstanding: after SelectorEncode it holds the sent vector s (zero where nothing was
  // sent), and the aggregate turns it into Delta in one pass — which also makes "s[j] == 0
  // counts as not sent" the natural guard of the division.
  //
  //   SelectorReset      Delta = Q
  //   SelectorEncode(a)  select by the scores of Delta, buffer := s            (awaiting)
  //   SelectorObserve*   buffer := Delta from s, ghat and n                    (ready)
  //   SelectorEncode again without an aggregate in between (the worker missed it): Delta = Q.
  static constexpr std::size_t SelectorStateFloats(const Params&, const TensorLayout& layout) {
    return layout.dimension();
  }
  static void SelectorReset(const Params& params, SelectorState& state);
  // EncodeWithDistortion with the current Delta, then remembers the sent values. Errors: the
  // codec's (state unchanged), kInvalidArgument for a state of the wrong size.
  static Status SelectorEncode(const Params& params, const TensorLayout& layout,
                               SelectorState& state, std::span<const float> input,
                               const PayloadSpans& out, std::span<std::byte> scratch);
  // The round's aggregate, as the mean of the contributions `mean_update` (ghat, d floats) over
  // `contributors` workers (n, this one included), turns the sent values into Delta.
  // contributors == 0 means there was no aggregate: Delta = Q. Errors: kFailedPrecondition when
  // nothing was encoded since the last aggregate, kInvalidArgument for a wrong size (nothing
  // changes either way).
  static Status SelectorObserve(const Params& params, SelectorState& state,
                                std::span<const float> mean_update, std::uint32_t contributors);
  // As SelectorObserve with ghat = model_before - model_after: the change the aggregate made to
  // a model that applies x -= ghat (both d floats). A worker that receives the new model rather
  // than the aggregate learns ghat this way without another buffer.
  static Status SelectorObserveChange(const Params& params, SelectorState& state,
                                      std::span<const float> model_before,
                                      std::span<const float> model_after,
                                      std::uint32_t contributors);
};

}  // namespace edgesgd
