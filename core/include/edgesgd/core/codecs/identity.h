#pragma once

#include "edgesgd/core/codec.h"

namespace edgesgd {

using IdentityParams = NoParams<struct IdentityCodec>;

// Dense fp32: the uncompressed baseline (4 bytes per coordinate in `values`).
struct IdentityCodec : WithoutParameters<IdentityParams> {
  using Params = IdentityParams;
  static constexpr std::string_view kName = "identity";
  static constexpr std::string_view kSummary =
      "dense fp32, 4 bytes per coordinate (no compression)";
  static constexpr PayloadLayout kLayout = PayloadLayout::kDense;
  static constexpr CodecTraits kTraits{.payload_sum = true, .consensus_step = 1.0f};
  static constexpr bool KeepsNormBound(const Params&) { return true; }

  static constexpr Result<PayloadShape> Shape(const Params&, const TensorLayout& layout) {
    return SumOverTensors(layout, [](std::size_t size) { return PayloadShape{.values = size}; });
  }
  static constexpr std::size_t ScratchBytes(const Params&, const TensorLayout&) { return 0; }
  EDGESGD_CODEC_OPERATIONS(Params);
};

}  // namespace edgesgd
