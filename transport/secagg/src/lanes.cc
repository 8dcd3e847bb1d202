#include "edgesgd/secagg/lanes.h"

#include <algorithm>

#include "edgesgd/core/check.h"

namespace edgesgd::secagg {

Result<std::uint32_t> LaneBits(std::uint64_t largest_sum) {
  if (largest_sum == 0) return Status::InvalidArgument("lanes need a sum of at least 1 to hold");
  if (largest_sum > 0xFFFFFFFFu) return Status::OutOfRange("the sums do not fit 32-bit lanes");
  std::uint32_t bits = 1;
  while ((std::uint64_t{1} << bits) <= largest_sum) ++bits;
  return bits;
}

void UnpackLaneSums(std::span<const std::uint32_t> words, std::size_t lanes,
                    std::uint32_t lane_bits, std::span<std::uint32_t> sums) {
  EDGESGD_CHECK(lane_bits >= 1 && lane_bits <= 32);
  EDGESGD_CHECK(words.size() == LaneWords(lanes, lane_bits));
  EDGESGD_CHECK(sums.size() == lanes);
  for (std::size_t i = 0; i < lanes; ++i) sums[i] = LaneValue(words, i, lane_bits);
}

void PackVotes(std::span<const std::uint32_t> signs, std::size_t coordinates,
               std::uint32_t lane_bits, std::span<std::uint32_t> words) {
  EDGESGD_CHECK(lane_bits >= 1 && lane_bits <= 32);
  EDGESGD_CHECK(signs.size() * 32 >= coordinates);
  EDGESGD_CHECK(words.size() == LaneWords(coordinates, lane_bits));
  std::fill(words.begin(), words.end(), 0u);
  for (std::size_t i = 0; i < coordinates; ++i) {
    SetZeroedLane(words, i, lane_bits, (signs[i / 32] >> (i % 32)) & 1u);
  }
}

}  // namespace edgesgd::secagg
