#pragma once

// Server-side (or all-reduce) averaging of compressed contributions, in two flavours:
//
// - MeanAggregator decodes every payload into one dense accumulator (any codec). This is the
//   x_{t+1} = x_t - mean_i C(p_i) step of error feedback and the ghat of Top-k
//   (docs/algorithms.md).
// - PayloadAggregator sums payloads in payload space for codecs whose payloads from different
//   workers describe the same coordinates in the same order (identity; rand_k, whose indices
//   come from the shared seed; random_block, whose starts do). The result is again a payload of
//   the same shape, so a server can send the compressed aggregate downstream instead of d
//   floats.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// Weighted mean of decoded contributions: Add() decodes payload i with weight w_i into a dense
// sum, Mean() divides by sum_i w_i. A contribution that fails to decode (kDataLoss) leaves the
// sum untouched, so one corrupt message never poisons a round.
class MeanAggregator {
 public:
  // Exact arena bytes Init takes: d floats plus the codec's scratch; 0 for bad parameters.
  static constexpr std::size_t StateBytes(const TensorLayout& layout, const CodecParams& codec) {
    if (layout.tensor_count() == 0 || !EncodedShape(codec, layout).ok()) return 0;
    return ArenaBytesFor<float>(layout.dimension()) + ArenaBytes(CodecScratchBytes(codec, layout));
  }

  // Takes the accumulator and codec scratch from `arena`; the aggregator starts empty and
  // decodes with the codec's operations in `codecs` (which must outlive it). Allocates from the
  // arena only. Errors: kInvalidArgument (empty layout, bad codec parameters),
  // kFailedPrecondition (codec not registered, arena sealed), kResourceExhausted (arena too
  // small; nothing is taken then).
  Status Init(Arena& arena, const CodecRegistry& codecs, const TensorLayout& layout,
              const CodecParams& codec);

  // Forgets all contributions (zeroes the accumulator). Does not allocate.
  void Reset();

  // sum += weight * decode(payload), decoded with `context` (same seed and round as the
  // sender's). Reads `payload`, writes the accumulator. Does not allocate.
  // Errors: kFailedPrecondition before Init or after Mean() (until Reset); kInvalidArgument for
  // a weight that is not finite and positive; kDataLoss for a malformed payload (nothing added).
  Status Add(const PayloadView& payload, const CodecContext& context, float weight = 1.0f);

  // Add, decoding with `params` instead of the Init codec's: a frame that names its own
  // parameters (a qsgd level count chosen by a quantization schedule). The codec must be the
  // Init one and its scratch no larger. Errors as Add, plus kInvalidArgument for a mismatch.
  Status AddWithParams(const CodecParams& params, const PayloadView& payload,
                       const CodecContext& context, float weight = 1.0f);

  // sum += decode(payload) for a payload that already sums `contributions` updates (decoded
  // with `params` as AddWithParams), counted as that many contributions of weight 1 — the sum
  // secure aggregation unmasks. A sum the codec's payloads cannot hold (qsgd levels add up past
  // s) comes as identity parameters, d dense values, whatever the Init codec. Errors as
  // AddWithParams (AddDense's for a dense sum); kInvalidArgument for no contributions.
  Status AddSumWithParams(const CodecParams& params, const PayloadView& payload,
                          const CodecContext& context, std::uint32_t contributions);

  // sum += weight * values for an uncompressed contribution (d floats), e.g. the workers'
  // residuals for DeAveragedReadoutFromMean. Does not allocate. Errors as Add, with
  // kInvalidArgument for a wrong size.
  Status AddDense(std::span<const float> values, float weight = 1.0f);

  // Finishes the round: divides the sum by the total weight, in place, and returns it (d
  // floats). Later calls return the same mean; Add is refused until Reset. Does not allocate.
  // Errors: kFailedPrecondition before Init or when nothing was added.
  Result<std::span<const float>> Mean();

  // model += scale * Mean() (finishing the round if needed). With scale = -1 this is the
  // error-feedback server step x -= mean_i C(p_i); with scale = -eta, x -= eta * ghat.
  // Reads the mean, writes `model` (d floats). Does not allocate.
  // Errors: as Mean; kInvalidArgument for a wrong size or a non-finite scale.
  Status AddScaledMean(float scale, std::span<float> model);

  // Contributions added since the last Reset, and their total weight.
  std::uint32_t count() const { return count_; }
  float total_weight() const { return total_weight_; }
  const TensorLayout& layout() const { return layout_; }

 private:
  Status CheckAddable(float weight) const;

  TensorLayout layout_;
  CodecParams codec_;
  const CodecOps* ops_ = nullptr;
  std::span<float> sum_;
  std::span<std::byte> scratch_;
  float total_weight_ = 0.0f;
  std::uint32_t count_ = 0;
  bool initialized_ = false;
  bool finished_ = false;
};

// Weighted mean in payload space, for codecs whose payloads sum (CodecTraits::payload_sum: every
// worker's payload lists the same coordinates in the same order, given the same seed and
// round). The aggregate's `values` are sum_i w_i v_i / sum_i w_i; its `indices` (random_block
// starts) are the contributors' common starts. Decoding the aggregate
// with the round's context gives the same vector as MeanAggregator over the same payloads.
// rand_k payloads carry no indices, so that all of them come from the same seed and round is
// the caller's contract; random_block starts travel and are checked.
class PayloadAggregator {
 public:
  // Exact arena bytes Init takes: the payload's index and value fields; 0 for bad parameters
  // or a codec without payload sums.
  static constexpr std::size_t StateBytes(const TensorLayout& layout, const CodecParams& codec) {
    if (!TraitsOf(codec).payload_sum) return 0;
    const Result<PayloadShape> shape = EncodedShape(codec, layout);
    if (layout.tensor_count() == 0 || !shape.ok()) return 0;
    return ArenaBytesFor<std::uint32_t>(shape.value().indices) +
           ArenaBytesFor<float>(shape.value().values);
  }

  // Takes the aggregate payload's storage from `arena`. Allocates from the arena only.
  // Errors: kInvalidArgument (empty layout, bad codec parameters, or a codec whose payloads do
  // not sum), kFailedPrecondition (arena sealed), kResourceExhausted (arena
  // too small; nothing is taken then).
  Status Init(Arena& arena, const TensorLayout& layout, const CodecParams& codec);

  // Forgets all contributions. Does not allocate.
  void Reset();

  // values += weight * payload.values; the first contribution fixes the indices. Reads
  // `payload`, writes the aggregate. Does not allocate.
  // Errors: kFailedPrecondition before Init or after Mean() (until Reset); kInvalidArgument for
  // a weight that is not finite and positive, or for random_block starts that differ from the
  // first contribution's; kDataLoss for field sizes other than the shape's, a start outside its
  // tensor, or a non-finite value. On any error nothing is added.
  Status Add(const PayloadView& payload, float weight = 1.0f);

  // Divides the summed values by the total weight, in place, and returns the aggregate payload
  // (views into this object's storage). Later calls return the same view; Add is refused until
  // Reset. Does not allocate. Errors: kFailedPrecondition before Init or when nothing was added.
  Result<PayloadView> Mean();

  const PayloadShape& payload_shape() const { return shape_; }
  std::uint32_t count() const { return count_; }
  float total_weight() const { return total_weight_; }

 private:
  TensorLayout layout_;
  CodecParams codec_;
  PayloadShape shape_;
  std::span<std::uint32_t> indices_;
  std::span<float> values_;
  float total_weight_ = 0.0f;
  std::uint32_t count_ = 0;
  bool initialized_ = false;
  bool finished_ = false;
};

}  // namespace edgesgd
