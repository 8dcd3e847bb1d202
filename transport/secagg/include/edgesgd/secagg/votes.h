#pragma once

// Majority vote under secure aggregation: the server must learn, per coordinate, how many
// devices voted +1 — and nothing else. Each vote enters the sum as 0 or 1 in a lane of
// `lane_bits` bits, several lanes to a 32-bit word. Masks are added to whole words modulo 2^32;
// once they are removed, the word sum is the lane-wise sum exactly, because no lane's count
// (at most the cohort) reaches 2^lane_bits and so never carries into the next lane. A masked word
// is as random as any other, so packing costs nothing in secrecy; it costs lane_bits per
// coordinate instead of the plain vote's one bit, the least any masking can take, since each
// coordinate's sum has n + 1 possible values.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"

namespace edgesgd::secagg {

// The narrowest lane that holds a count of up to `voters`: ceil(log2(voters + 1)) bits.
// Errors: kInvalidArgument for no voters; kOutOfRange above 2^31 - 1 voters.
Result<std::uint32_t> VoteLaneBits(std::uint32_t voters);

// Words a vector of `coordinates` votes takes with `lane_bits` lanes (whole lanes per word).
std::size_t VoteWords(std::size_t coordinates, std::uint32_t lane_bits);

// Packs `coordinates` votes given as bits (bit i of `signs` set = a +1 vote for coordinate i,
// LSB first, as the sign codec packs them) into lanes of `words` (VoteWords long).
void PackVotes(std::span<const std::uint32_t> signs, std::size_t coordinates,
               std::uint32_t lane_bits, std::span<std::uint32_t> words);

// The +1 count of each coordinate from an unmasked sum of packed votes.
void UnpackVoteCounts(std::span<const std::uint32_t> words, std::size_t coordinates,
                      std::uint32_t lane_bits, std::span<std::uint32_t> counts);

}  // namespace edgesgd::secagg
