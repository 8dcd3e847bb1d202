#include "edgesgd/core/codecs/top_k.h"

#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/internal/top_k_select.h"

namespace edgesgd {

Status TopKCodec::Encode(const TopKParams& params, const TensorLayout& layout, const CodecContext&,
                         std::span<const float> input, const PayloadSpans& out,
                         std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<TopKCodec>(params, layout, input, out, scratch));
  std::size_t written = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(t), params.k_ratio));
    EDGESGD_TRY(internal::SelectTopKeys(layout.Slice(input, t), k, out.indices.subspan(written, k),
                                        out.values.subspan(written, k), scratch,
                                        static_cast<std::uint32_t>(layout.offset(t))));
    written += k;
  }
  return Status::Ok();
}

Status TopKCodec::DecodeAdd(const TopKParams& params, const TensorLayout& layout,
                            const CodecContext&, const PayloadView& payload, float weight,
                            std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY(
      internal::CheckedDecodeShape<TopKCodec>(params, layout, payload, accumulator, scratch));
  // Verify everything before the first write, so a bad payload leaves no partial sum behind.
  std::size_t position = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(t), params.k_ratio));
    // Indices of tensor t must lie in [begin, end) and increase strictly; `next` is the least
    // index the following one may take.
    const std::uint64_t end = std::uint64_t{layout.offset(t)} + layout.size(t);
    std::uint64_t next = layout.offset(t);
    for (std::size_t j = position; j < position + k; ++j) {
      const std::uint64_t index = payload.indices[j];
      if (index < next || index >= end) {
        return Status::DataLoss("a top_k index lies outside its tensor or does not increase");
      }
      next = index + 1;
    }
    position += k;
  }
  if (!internal::AllFinite(payload.values)) {
    return Status::DataLoss("a top_k payload value is a NaN or an infinity");
  }
  for (std::size_t j = 0; j < payload.indices.size(); ++j) {
    accumulator[payload.indices[j]] += weight * payload.values[j];
  }
  return Status::Ok();
}

}  // namespace edgesgd
