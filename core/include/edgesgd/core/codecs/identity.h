#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

struct IdentityParams {
  friend constexpr bool operator==(const IdentityParams&, const IdentityParams&) = default;
};

// Dense fp32: the uncompressed baseline (4 bytes per coordinate in `values`).
struct IdentityCodec {
  using Params = IdentityParams;
  static constexpr std::string_view kName = "identity";
  static constexpr std::string_view kSummary = "dense fp32, 4 bytes per coordinate (no compression)";
  static constexpr PayloadLayout kLayout = PayloadLayout::kDense;
  static constexpr CodecTraits kTraits{.payload_sum = true};
  static constexpr std::array<ParamField<Params>, 0> kFields{};

  static constexpr Status Validate(const Params&) { return Status::Ok(); }
  static constexpr Result<PayloadShape> Shape(const Params&, const TensorLayout& layout) {
    if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
    PayloadShape shape;
    shape.values = layout.dimension();
    return shape;
  }
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }
  static Status Encode(const Params& params, const TensorLayout& layout,
                       const CodecContext& context, std::span<const float> input,
                       const PayloadSpans& out, std::span<std::byte> scratch);
  static Status DecodeAdd(const Params& params, const TensorLayout& layout,
                          const CodecContext& context, const PayloadView& payload, float weight,
                          std::span<float> accumulator, std::span<std::byte> scratch);
};

}  // namespace edgesgd
