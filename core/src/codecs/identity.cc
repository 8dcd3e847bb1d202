#include "edgesgd/core/codecs/identity.h"

#include <algorithm>

#include "edgesgd/core/internal/codec_checks.h"

namespace edgesgd {

Status IdentityCodec::Encode(const IdentityParams& params, const TensorLayout& layout,
                             const CodecContext&, std::span<const float> input,
                             const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, Shape(params, layout));
  EDGESGD_TRY(internal::CheckEncodeArgs(layout, input, out, shape, scratch, 0));
  std::copy(input.begin(), input.end(), out.values.begin());
  return Status::Ok();
}

Status IdentityCodec::DecodeAdd(const IdentityParams& params, const TensorLayout& layout,
                                const CodecContext&, const PayloadView& payload, float weight,
                                std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, Shape(params, layout));
  EDGESGD_TRY(internal::CheckDecodeArgs(layout, payload, shape, accumulator, scratch, 0));
  for (std::size_t i = 0; i < accumulator.size(); ++i) {
    accumulator[i] += weight * payload.values[i];
  }
  return Status::Ok();
}

}  // namespace edgesgd
