#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace edgesgd {

// How many elements of each typed field a codec's payload holds. Every field element is four
// bytes on the wire (u32 or f32, little-endian), so the byte size follows from the counts.
// For every codec the shape is known from the layout and parameters before encoding, which lets
// the wire layer reserve exactly-sized vectors and hand their storage to the codec.
struct PayloadShape {
  std::size_t indices = 0;  // u32: top_k coordinates, random_block starts
  std::size_t values = 0;   // f32: kept coordinate values
  std::size_t words = 0;    // u32: packed sign bits or quantization levels
  std::size_t scales = 0;   // f32: per-tensor sign scales or per-bucket qsgd norms

  constexpr std::size_t elements() const { return indices + values + words + scales; }
  constexpr std::size_t bytes() const { return 4 * elements(); }
  friend constexpr bool operator==(const PayloadShape&, const PayloadShape&) = default;
};

// Which fields a payload uses; the wire format has one table per layout (numbered as here), and
// each codec names the one its payloads take.
enum class PayloadLayout : std::uint8_t {
  kDense = 1,  // values: every coordinate, or coordinates both ends derive from a shared seed
  kSparse,     // indices (global positions, ascending per tensor) + values
  kBlock,      // indices (one block start per tensor) + values
  kSignWords,  // words (packed bits) + scales (one per tensor)
  kQuantized,  // words (packed fields) + scales (one norm per bucket) + a QuantizedHeader
  kPackedWords,  // words only: fixed-width fields packed LSB-first, each tensor on fresh words
};
inline constexpr std::size_t kPayloadLayoutCount = 6;

// Whether a payload of `layout` can hold a payload of `shape` (it stores every nonzero field).
constexpr bool LayoutHolds(PayloadLayout layout, const PayloadShape& shape) {
  switch (layout) {
    case PayloadLayout::kDense:
      return shape.indices == 0 && shape.words == 0 && shape.scales == 0;
    case PayloadLayout::kSparse:
    case PayloadLayout::kBlock:
      return shape.words == 0 && shape.scales == 0;
    case PayloadLayout::kSignWords:
    case PayloadLayout::kQuantized:
      return shape.indices == 0 && shape.values == 0;
    case PayloadLayout::kPackedWords:
      return shape.indices == 0 && shape.values == 0 && shape.scales == 0;
  }
  return false;
}

// What a kQuantized payload says about its own encoding: the level count and the bucket size it
// was quantized with (a quantization schedule may change them from round to round).
struct QuantizedHeader {
  std::uint32_t levels = 0;
  std::uint32_t bucket = 0;
  friend constexpr bool operator==(const QuantizedHeader&, const QuantizedHeader&) = default;
};

// Writable storage for one encoded payload; each span must hold at least the shape's count.
struct PayloadSpans {
  std::span<std::uint32_t> indices;
  std::span<float> values;
  std::span<std::uint32_t> words;
  std::span<float> scales;
};

// A received payload, read-only; each span must hold exactly the shape's count.
struct PayloadView {
  std::span<const std::uint32_t> indices;
  std::span<const float> values;
  std::span<const std::uint32_t> words;
  std::span<const float> scales;

  PayloadView() = default;
  PayloadView(std::span<const std::uint32_t> indices_in, std::span<const float> values_in,
              std::span<const std::uint32_t> words_in, std::span<const float> scales_in)
      : indices(indices_in), values(values_in), words(words_in), scales(scales_in) {}
  // The first `shape` elements of each field of an encoder's output.
  PayloadView(const PayloadSpans& spans, const PayloadShape& shape)
      : indices(spans.indices.first(shape.indices)),
        values(spans.values.first(shape.values)),
        words(spans.words.first(shape.words)),
        scales(spans.scales.first(shape.scales)) {}
};

}  // namespace edgesgd
