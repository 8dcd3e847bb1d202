#pragma once

// RegTop-k (ALGORITHMS.md §3, Bereyhi et al.): Top-k whose selection is regularised by what the
// previous aggregate did to the coordinates this worker sent. Worker i keeps a posterior
// distortion Delta_i (d floats) and selects by
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
// a[j]. Receivers need no RegTop-k state. The stateless Encode of the codec table is RegTop-k
// without a posterior (every Delta = Q), i.e. its first round; the per-worker RegTopKState
// carries Delta from round to round (ErrorFeedbackWorker owns one for this codec).

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codecs/top_k.h"

namespace edgesgd {

struct RegTopKCodec {
  // TopKCodec's shape, after checking k_ratio, mu and Q. Errors: kInvalidArgument.
  static constexpr Result<PayloadShape> Shape(const CodecParams& params,
                                              const TensorLayout& layout) {
    if (!ValidRegTopKMu(params.reg_top_k_mu) || !ValidRegTopKQ(params.reg_top_k_q)) {
      return Status::InvalidArgument();
    }
    return TopKCodec::Shape(params, layout);
  }
  // Scratch for Encode: the scores of the largest tensor (plus up to 3 bytes to align them) and
  // Top-k's selection scratch. DecodeAdd needs none. 0 for bad parameters.
  static constexpr std::size_t ScratchBytes(const CodecParams& params, const TensorLayout& layout) {
    if (!Shape(params, layout).ok()) return 0;
    return (sizeof(float) - 1) + LargestTensorSize(layout) * sizeof(float) +
           TopKCodec::ScratchBytes(params, layout);
  }
  // Coordinates of the layout's largest tensor: the scores Encode holds at a time.
  static constexpr std::size_t LargestTensorSize(const TensorLayout& layout) {
    std::size_t largest = 0;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      if (layout.size(t) > largest) largest = layout.size(t);
    }
    return largest;
  }
  // RegTop-k with no posterior (Delta = Q everywhere): EncodeWithDistortion with an empty
  // distortion. Same contract as TopKCodec::Encode.
  static Status Encode(const CodecParams& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);
  // Selects, per tensor in layout order, the k = SparseCount(size, k_ratio) coordinates of
  // largest score (ties by lower index; a NaN score ranks first, as in TopKCodec) and writes
  // their global indices (ascending) to out.indices and input there to out.values.
  // `distortion` is Delta (layout.dimension() floats), or empty for Delta = Q everywhere.
  // Reads `input` and `distortion`, uses `scratch`; does not allocate.
  // Errors: kInvalidArgument (bad parameters, input or non-empty distortion of the wrong size),
  // kResourceExhausted (an output span or the scratch too small).
  static Status EncodeWithDistortion(const CodecParams& params, const TensorLayout& layout,
                                     std::span<const float> distortion,
                                     std::span<const float> input, const PayloadSpans& out,
                                     std::span<std::byte> scratch);
  // TopKCodec::DecodeAdd (the payloads are the same), after checking mu and Q.
  static Status DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

// One worker's RegTop-k posterior: Delta between rounds, and what it sent while the round's
// aggregate is outstanding. Both live in one d-float buffer: after Encode it holds the sent
// vector s (zero where nothing was sent), and the aggregate turns it into Delta in one pass —
// which also makes "s[j] == 0 counts as not sent" the natural guard of the division.
//
//   Init                Delta = Q
//   Encode(a)           select by the scores of Delta, buffer := s         (awaiting)
//   ObserveAggregate    buffer := Delta from s, ghat and n                 (ready)
//   Encode again without an aggregate in between (the worker missed it): Delta = Q first.
class RegTopKState {
 public:
  // Exact arena bytes Init takes: d floats; 0 for an empty layout.
  static constexpr std::size_t StateBytes(const TensorLayout& layout) {
    return layout.tensor_count() == 0 ? 0 : ArenaBytesFor<float>(layout.dimension());
  }

  // Takes the buffer from `arena` and sets Delta = Q. Allocates from the arena only.
  // Errors: kInvalidArgument (empty layout, params not a valid reg_top_k configuration),
  // kFailedPrecondition (arena sealed), kResourceExhausted (arena too small; nothing taken).
  Status Init(Arena& arena, const TensorLayout& layout, const CodecParams& params);

  // RegTopKCodec::EncodeWithDistortion of `input` with the current Delta, then remembers the
  // sent values for ObserveAggregate. `scratch` holds RegTopKCodec::ScratchBytes. Does not
  // allocate. Errors: kFailedPrecondition before Init; otherwise the codec's (state unchanged).
  Status Encode(std::span<const float> input, const PayloadSpans& out,
                std::span<std::byte> scratch);

  // The round's aggregate, as the mean of the contributions `mean_update` (ghat, d floats) over
  // `contributors` workers (n, this one included), turns the sent values into Delta.
  // contributors == 0 means there was no aggregate: Delta = Q. Does not allocate.
  // Errors: kFailedPrecondition before Init or when nothing was encoded since the last
  // aggregate (nothing changes); kInvalidArgument for a wrong size (nothing changes).
  Status ObserveAggregate(std::span<const float> mean_update, std::uint32_t contributors);

  // As ObserveAggregate with ghat = model_before - model_after: the change the aggregate made to
  // a model that applies x -= ghat (both d floats). A worker that receives the new model rather
  // than the aggregate learns ghat this way without another buffer.
  Status ObserveModelChange(std::span<const float> model_before,
                            std::span<const float> model_after, std::uint32_t contributors);

  // Drops the posterior (Delta = Q): the worker could not learn the last aggregate. Does not
  // allocate; nothing before Init.
  void Forget();

  // Delta (d floats) while no aggregate is outstanding; empty before Init and between Encode and
  // the aggregate (then the buffer holds the sent values).
  std::span<const float> distortion() const {
    return awaiting_aggregate_ ? std::span<const float>() : buffer_;
  }
  bool awaiting_aggregate() const { return awaiting_aggregate_; }
  const CodecParams& params() const { return params_; }

 private:
  template <typename MeanAt>
  Status Observe(std::uint32_t contributors, MeanAt mean_at);

  TensorLayout layout_;
  CodecParams params_;
  std::span<float> buffer_;  // Delta, or the sent values while awaiting the aggregate
  bool awaiting_aggregate_ = false;
};

}  // namespace edgesgd
