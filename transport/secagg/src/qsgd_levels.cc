#include "edgesgd/secagg/qsgd_levels.h"

#include <algorithm>
#include <cmath>

#include "edgesgd/core/check.h"
#include "edgesgd/core/codecs/qsgd.h"
#include "edgesgd/core/internal/bit_packing.h"
#include "edgesgd/secagg/lanes.h"

namespace edgesgd::secagg {

Result<SharedScaleLevels> ChooseSharedScaleLevels(float scale, std::uint32_t levels,
                                                  std::uint32_t summands) {
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    return Status::InvalidArgument("the shared QSGD scale must be positive and finite");
  }
  if (levels == 0 || levels > kMaxQsgdLevels) {
    return Status::InvalidArgument("QSGD levels must be in 1..32767");
  }
  if (summands == 0) return Status::InvalidArgument("a sum needs at least one summand");
  const Result<std::uint32_t> lane_bits = LaneBits(std::uint64_t{2} * levels * summands);
  if (!lane_bits.ok()) {
    return Status::OutOfRange("2 x levels x cohort does not fit a 32-bit lane: fewer levels");
  }
  return SharedScaleLevels{scale, levels, summands, lane_bits.value()};
}

std::size_t SharedScaleLevelWords(const SharedScaleLevels& format, std::size_t coordinates) {
  return LaneWords(coordinates, format.lane_bits);
}

void EncodeSharedScaleLevels(const SharedScaleLevels& format, std::span<const float> values,
                             CounterRng& dither, std::span<std::uint32_t> words) {
  EDGESGD_CHECK(format.lane_bits >= 1 && format.lane_bits <= 32);
  EDGESGD_CHECK(words.size() == SharedScaleLevelWords(format, values.size()));
  const auto top = static_cast<float>(format.levels);
  const float factor = top / format.scale;
  std::fill(words.begin(), words.end(), 0u);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float value = values[i];
    // Draw for every value, so a coordinate's dither does not depend on the others' values.
    const float u = dither.NextFloat();
    std::uint32_t level = 0;
    if (!std::isnan(value)) {
      const float ratio = std::min(std::fabs(value) * factor, top);
      const float whole = std::floor(ratio);
      level = static_cast<std::uint32_t>(whole) + (u < ratio - whole ? 1u : 0u);
    }
    const std::uint32_t shifted =
        std::signbit(value) ? format.levels - level : format.levels + level;
    SetZeroedLane(words, i, format.lane_bits, shifted);
  }
}

Status EncodeQsgdPayloadLevels(const SharedScaleLevels& format, const TensorLayout& layout,
                               std::span<const std::uint32_t> payload_words,
                               std::span<std::uint32_t> words) {
  EDGESGD_CHECK(format.lane_bits >= 1 && format.lane_bits <= 32);
  EDGESGD_CHECK(words.size() == SharedScaleLevelWords(format, layout.dimension()));
  const std::uint32_t width = QsgdBitsPerCoordinate(format.levels);
  const std::uint32_t level_mask = internal::FieldMask(width - 1);
  std::size_t expected = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    expected += QsgdCodec::WordsFor(layout.size(t), format.levels);
  }
  if (payload_words.size() != expected) {
    return Status::InvalidArgument("the qsgd payload's words are not the layout's");
  }
  std::fill(words.begin(), words.end(), 0u);
  std::size_t word_offset = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::size_t size = layout.size(t);
    const std::span<const std::uint32_t> tensor =
        payload_words.subspan(word_offset, QsgdCodec::WordsFor(size, format.levels));
    for (std::size_t i = 0; i < size; ++i) {
      const std::uint32_t field = internal::ReadField(tensor, i, width);
      const std::uint32_t level = field & level_mask;
      if (level > format.levels) {
        return Status::InvalidArgument("a qsgd level exceeds the level count");
      }
      const bool negative = (field >> (width - 1)) != 0;
      const std::uint32_t shifted = negative ? format.levels - level : format.levels + level;
      SetZeroedLane(words, layout.offset(t) + i, format.lane_bits, shifted);
    }
    word_offset += tensor.size();
  }
  return Status::Ok();
}

void DecodeSharedScaleLevelSum(const SharedScaleLevels& format,
                               std::span<const std::uint32_t> words, std::uint32_t survivors,
                               std::span<float> values) {
  EDGESGD_CHECK(survivors <= format.summands);
  EDGESGD_CHECK(words.size() == SharedScaleLevelWords(format, values.size()));
  const double step = static_cast<double>(format.scale) / format.levels;
  const auto offset = static_cast<std::int64_t>(survivors) * format.levels;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint32_t lane = LaneValue(words, i, format.lane_bits);
    values[i] = static_cast<float>(static_cast<double>(std::int64_t{lane} - offset) * step);
  }
}

}  // namespace edgesgd::secagg
