#pragma once

#include "edgesgd/core/codec.h"
#include "edgesgd/core/internal/top_k_select.h"

namespace edgesgd {

struct TopKParams {
  // Fraction of each tensor's coordinates kept, in (0, 1]: a tensor keeps
  // SparseCount(size, k_ratio) coordinates (at least one).
  float k_ratio = 0.01f;
  friend constexpr bool operator==(const TopKParams&, const TopKParams&) = default;
};

// Exact Top-k per tensor: the k = SparseCount(size, k_ratio) coordinates of largest |x|, ties
// broken by lower index. Payload: `indices` (global positions in the flat vector, ascending)
// and `values` (x at those positions), k of each per tensor. Magnitude order is that of the
// float bits with the sign cleared: -0 ties +0, and NaN ranks above +-infinity.
struct TopKCodec {
  using Params = TopKParams;
  static constexpr std::string_view kName = "top_k";
  static constexpr std::string_view kSummary =
      "the k largest |x| of each tensor, exactly: index + value, 8 bytes per kept coordinate";
  static constexpr PayloadLayout kLayout = PayloadLayout::kSparse;
  static constexpr CodecTraits kTraits{.downlink_recompress = true, .consensus_step = 0.05f};
  static constexpr bool KeepsNormBound(const Params&) { return true; }
  static constexpr std::array<ParamField<Params>, 1> kFields{
      Field<&Params::k_ratio>("k_ratio", "fraction of each tensor's coordinates sent, in (0, 1]")};

  static constexpr Status Validate(const Params& params) {
    return UnitRatio(params.k_ratio) ? Status::Ok()
                                     : Status::InvalidArgument("k ratio must be in (0, 1]");
  }
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    return SumOverTensors(layout, [&params](std::size_t size) -> Result<PayloadShape> {
      EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(size, params.k_ratio));
      return PayloadShape{.indices = k, .values = k};
    });
  }
  // Candidate slots (index + bits each) that make the one-pass selection of k of `size`
  // coordinates likely; see internal/top_k_select.h.
  static constexpr std::size_t CandidateCapacity(std::size_t k, std::size_t size) {
    return internal::TopKeysCandidateCapacity(size, k);
  }
  // Scratch for Encode: candidates for the tensor that needs most, plus the radix histogram.
  // Every tensor reuses the same scratch. DecodeAdd needs none. 0 for bad parameters.
  static constexpr std::size_t ScratchBytes(const Params& params, const TensorLayout& layout) {
    if (layout.tensor_count() == 0) return 0;
    std::size_t largest = 0;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      const Result<std::size_t> k = SparseCount(layout.size(t), params.k_ratio);
      if (!k.ok()) return 0;
      const std::size_t capacity = CandidateCapacity(k.value(), layout.size(t));
      if (capacity > largest) largest = capacity;
    }
    return internal::TopKeysScratchBytesForCapacity(largest);
  }
  // Encode writes, per tensor in layout order, its k indices (global positions, strictly ascending)
  // to out.indices and the input values there to out.values. Reads `input`, uses `scratch`.
  // Does not allocate. Errors: kInvalidArgument (k_ratio outside (0, 1], input size differs
  // from layout.dimension()), kResourceExhausted (an output span or scratch too small).
  // A NaN input ranks above infinities (see internal/top_k_select.h) and is sent as is.
  // DecodeAdd: accumulator[i] += weight * value for every (i, value) of the payload. Reads
  // `payload`, writes `accumulator`; needs no scratch and does not allocate. Verifies the whole
  // payload before touching the accumulator: field sizes equal Shape(), each tensor's indices
  // strictly ascending within that tensor, values finite; otherwise kDataLoss. kInvalidArgument for
  // bad parameters or an accumulator whose size differs from layout.dimension().
  EDGESGD_CODEC_OPERATIONS(Params);
};

}  // namespace edgesgd
