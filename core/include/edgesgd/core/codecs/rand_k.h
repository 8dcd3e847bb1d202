#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec.h"

namespace edgesgd {

// Whether rand_k rescales kept values by d/k. Error feedback wants the biased form (kNone);
// unbiased estimation without feedback wants kUnbiased.
enum class RandKScaling : std::uint8_t { kNone, kUnbiased };

struct RandKParams {
  // Fraction of each tensor's coordinates kept, in (0, 1] (SparseCount(size, k_ratio) each).
  float k_ratio = 0.01f;
  RandKScaling scaling = RandKScaling::kNone;
  friend constexpr bool operator==(const RandKParams&, const RandKParams&) = default;
};

// Random-k per tensor: k = SparseCount(size, k_ratio) distinct coordinates drawn uniformly from
// the shared stream (seed, round, tensor), so no index travels: `values` holds x at the chosen
// coordinates in ascending coordinate order, multiplied by size/k when the scaling is kUnbiased.
//
// Selection: CounterRng(seed, round, tensor, StreamId(kSparsifySelection)) drives Floyd's
// algorithm, which marks a membership bitmap; a word-at-a-time scan then yields the indices in
// ascending order. When k > size / 2 Floyd draws the size - k coordinates left out instead (the
// complement of a uniform subset is uniform), so no selection needs more than size / 2 draws.
// The worker id is not used: every worker and the server derive the same indices.
struct RandKCodec {
  using Params = RandKParams;
  static constexpr std::string_view kName = "rand_k";
  static constexpr std::string_view kSummary =
      "k coordinates of each tensor drawn from the shared seed: values only, 4 bytes each";
  static constexpr PayloadLayout kLayout = PayloadLayout::kDense;
  static constexpr CodecTraits kTraits{.payload_sum = true, .consensus_step = 0.05f};
  // The unbiased form multiplies kept values by d/k.
  static constexpr bool KeepsNormBound(const Params& params) {
    return params.scaling == RandKScaling::kNone;
  }
  static constexpr std::array<std::string_view, 2> kScalingNames{"none", "unbiased"};
  static constexpr std::array<ParamField<Params>, 2> kFields{
      Field<&Params::k_ratio>("k_ratio", "fraction of each tensor's coordinates sent, in (0, 1]"),
      Field<&Params::scaling>("rand_k_scaling",
                              "none (error feedback's biased form) or unbiased (values times "
                              "d/k)",
                              kScalingNames)};

  static constexpr Status Validate(const Params& params) {
    if (!UnitRatio(params.k_ratio)) return Status::InvalidArgument("k ratio must be in (0, 1]");
    if (params.scaling != RandKScaling::kNone && params.scaling != RandKScaling::kUnbiased) {
      return Status::InvalidArgument("unknown rand_k scaling");
    }
    return Status::Ok();
  }
  static constexpr Result<PayloadShape> Shape(const Params& params, const TensorLayout& layout) {
    EDGESGD_TRY(Validate(params));
    return SumOverTensors(layout, [&params](std::size_t size) -> Result<PayloadShape> {
      EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(size, params.k_ratio));
      return PayloadShape{.values = k};
    });
  }
  // A membership bitmap over the largest tensor (one bit per coordinate, in u32 words); 0 for
  // bad parameters. Scratch must be 4-byte aligned (an Arena's is).
  static constexpr std::size_t ScratchBytes(const Params& params, const TensorLayout& layout) {
    if (!Shape(params, layout).ok()) return 0;
    return (LargestTensorSize(layout) + 31) / 32 * sizeof(std::uint32_t);
  }
  // The factor kept values are multiplied by for a tensor of `size` coordinates keeping `k`:
  // size / k (rounded once, from double) for kUnbiased, 1 for kNone.
  static constexpr float ValueScale(RandKScaling scaling, std::size_t size, std::size_t k) {
    if (scaling != RandKScaling::kUnbiased || k == 0) return 1.0f;
    return static_cast<float>(static_cast<double>(size) / static_cast<double>(k));
  }
  // Writes the coordinates rand_k keeps of `tensor` in `context`'s round — ascending, relative
  // to the tensor's start — into the first k = SparseCount(layout.size(tensor), k_ratio)
  // elements of `indices`, and returns k. Uses `scratch` (ScratchBytes()) as the bitmap.
  // Errors: kInvalidArgument (parameters, tensor >= tensor_count(), scratch not 4-byte
  // aligned), kResourceExhausted (`indices` shorter than k, scratch too small). Does not
  // allocate.
  static Result<std::size_t> SelectedIndices(const Params& params, const TensorLayout& layout,
                                             const CodecContext& context, std::size_t tensor,
                                             std::span<std::uint32_t> indices,
                                             std::span<std::byte> scratch);
  // Encode reads `input` (layout.dimension() floats) and writes Shape().values values into
  // out.values, tensor after tensor. Errors: kInvalidArgument (parameters, input length,
  // misaligned scratch), kResourceExhausted (out.values or scratch too small). Does not
  // allocate.
  // DecodeAdd regenerates each tensor's indices from `context` (same seed and round as the encoder)
  // and adds weight * value at each. Verifies first (field sizes, finite values). Errors:
  // kInvalidArgument (parameters, accumulator length, misaligned scratch), kResourceExhausted
  // (scratch too small), kDataLoss (malformed payload; the accumulator is left untouched).
  // Does not allocate.
  EDGESGD_CODEC_OPERATIONS(Params);
};

}  // namespace edgesgd
