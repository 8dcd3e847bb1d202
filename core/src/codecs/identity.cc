#include "edgesgd/core/codecs/identity.h"

#include <algorithm>

#include "edgesgd/core/internal/codec_checks.h"

namespace edgesgd {

Status IdentityCodec::Encode(const IdentityParams& params, const TensorLayout& layout,
                             const CodecContext&, std::span<const float> input,
                             const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<IdentityCodec>(params, layout, input, out, scratch));
  std::copy(input.begin(), input.end(), out.values.begin());
  return Status::Ok();
}

Status IdentityCodec::DecodeAdd(const IdentityParams& params, const TensorLayout& layout,
                                const CodecContext&, const PayloadView& payload, float weight,
                                std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY(
      internal::CheckedDecodeShape<IdentityCodec>(params, layout, payload, accumulator, scratch));
  if (!internal::AllFinite(payload.values)) {
    return Status::DataLoss("a dense payload holds a NaN or an infinity");
  }
  for (std::size_t i = 0; i < accumulator.size(); ++i) {
    accumulator[i] += weight * payload.values[i];
  }
  return Status::Ok();
}

}  // namespace edgesgd
