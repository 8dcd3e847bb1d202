#pragma once

// Small non-negative integers summed under masking. Each value sits in a lane of `lane_bits`
// bits, as many whole lanes to a 32-bit word as fit. Masks are added to whole words modulo 2^32;
// once they are removed, the word sum is the lane-wise sum exactly, provided no lane's sum
// reaches 2^lane_bits and carries into the next lane: lanes are sized for the largest sum the
// cohort can produce (LaneBits). A masked word is as random as any other, so packing costs
// nothing in secrecy. Lanes never straddle words, since a carry does not cross a word boundary.
//
// Two encodings use lanes: majority-vote signs (PackVotes, a lane sum is a count of +1 votes)
// and QSGD levels with a shared scale (qsgd_levels.h).

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"

namespace edgesgd::secagg {

// The narrowest lane that holds sums up to `largest_sum`: ceil(log2(largest_sum + 1)) bits.
// Errors: kInvalidArgument for 0 (nothing to sum); kOutOfRange above 2^32 - 1.
Result<std::uint32_t> LaneBits(std::uint64_t largest_sum);

// Words that `lanes` lanes of `lane_bits` bits take (whole lanes per word); 0 for lane_bits
// outside 1..32.
constexpr std::size_t LaneWords(std::size_t lanes, std::uint32_t lane_bits) {
  if (lane_bits == 0 || lane_bits > 32) return 0;
  const std::size_t per_word = 32 / lane_bits;
  return (lanes + per_word - 1) / per_word;
}

// Lane `lane` of packed words, and setting it in words that start zeroed. lane_bits in 1..32.
constexpr std::uint32_t LaneValue(std::span<const std::uint32_t> words, std::size_t lane,
                                  std::uint32_t lane_bits) {
  const std::size_t per_word = 32 / lane_bits;
  const std::uint32_t mask = lane_bits == 32 ? 0xFFFFFFFFu : (1u << lane_bits) - 1u;
  return (words[lane / per_word] >> (lane_bits * (lane % per_word))) & mask;
}
constexpr void SetZeroedLane(std::span<std::uint32_t> words, std::size_t lane,
                             std::uint32_t lane_bits, std::uint32_t value) {
  const std::size_t per_word = 32 / lane_bits;
  words[lane / per_word] |= value << (lane_bits * (lane % per_word));
}

// Every lane of `words` (LaneWords long).
void UnpackLaneSums(std::span<const std::uint32_t> words, std::size_t lanes,
                    std::uint32_t lane_bits, std::span<std::uint32_t> sums);

// Majority vote: the server must learn, per coordinate, how many devices voted +1 and nothing
// else. Packs `coordinates` votes given as bits (bit i of `signs` set = a +1 vote for coordinate
// i, LSB first, as the sign codec packs them) as 0 or 1 into lanes of LaneBits(voters) bits;
// UnpackLaneSums then gives each coordinate's count. That is ceil(log2(n + 1)) bits a coordinate
// instead of the plain vote's one, the least any masking can take, since each count has n + 1
// possible values.
void PackVotes(std::span<const std::uint32_t> signs, std::size_t coordinates,
               std::uint32_t lane_bits, std::span<std::uint32_t> words);

}  // namespace edgesgd::secagg
