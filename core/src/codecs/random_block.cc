#include "edgesgd/core/codecs/random_block.h"

#include <algorithm>
#include <cstdint>

#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/random.h"

namespace edgesgd {

std::uint32_t RandomBlockCodec::BlockStart(const CodecContext& context, std::size_t tensor,
                                           std::size_t size) {
  if (size == 0) return 0;
  CounterRng rng(context.seed, context.round, static_cast<std::uint32_t>(tensor),
                 StreamId(RandomPurpose::kBlockStart));
  return rng.NextBelow(static_cast<std::uint32_t>(size));
}

Status RandomBlockCodec::CheckShared(const RandomBlockParams&, const TensorLayout& layout,
                                     const CodecContext& context, const PayloadView& payload) {
  if (payload.indices.size() != layout.tensor_count()) {
    return Status::DataLoss("a random_block payload needs one block start per tensor");
  }
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    if (payload.indices[t] != BlockStart(context, t, layout.size(t))) {
      return Status::DataLoss("a block starts elsewhere than the shared seed puts it");
    }
  }
  return Status::Ok();
}

Status RandomBlockCodec::Encode(const RandomBlockParams& params, const TensorLayout& layout,
                                const CodecContext& context, std::span<const float> input,
                                const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedEncodeShape<RandomBlockCodec>(params, layout, input, out, scratch));
  std::size_t first_value = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(input, t);
    const std::size_t length = BlockLength(x.size(), params.block_ratio);
    const std::uint32_t start = BlockStart(context, t, x.size());
    out.indices[t] = start;
    // The block is [start, start + length) modulo size: at most two contiguous runs.
    const std::size_t head = std::min<std::size_t>(length, x.size() - start);
    const auto values = out.values.subspan(first_value, length);
    std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(start), head, values.begin());
    std::copy_n(x.begin(), length - head, values.begin() + static_cast<std::ptrdiff_t>(head));
    first_value += length;
  }
  return Status::Ok();
}

Status RandomBlockCodec::DecodeAdd(const RandomBlockParams& params, const TensorLayout& layout,
                                   const CodecContext&, const PayloadView& payload, float weight,
                                   std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY(internal::CheckedDecodeShape<RandomBlockCodec>(params, layout, payload, accumulator,
                                                             scratch));
  // Verify everything before the first write, so a rejected payload changes nothing.
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    if (payload.indices[t] >= layout.size(t)) {
      return Status::DataLoss("a block starts outside its tensor");
    }
  }
  if (!internal::AllFinite(payload.values)) {
    return Status::DataLoss("a random_block payload value is a NaN or an infinity");
  }

  std::size_t first_value = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<float> acc = layout.Slice(accumulator, t);
    const std::size_t length = BlockLength(acc.size(), params.block_ratio);
    const std::size_t start = payload.indices[t];
    const std::size_t head = std::min<std::size_t>(length, acc.size() - start);
    const std::span<const float> values = payload.values.subspan(first_value, length);
    for (std::size_t i = 0; i < head; ++i) acc[start + i] += weight * values[i];
    for (std::size_t i = head; i < length; ++i) acc[i - head] += weight * values[i];
    first_value += length;
  }
  return Status::Ok();
}

}  // namespace edgesgd
