#include "edgesgd/secagg/votes.h"

#include <algorithm>

#include "edgesgd/core/check.h"

namespace edgesgd::secagg {
namespace {

std::size_t LanesPerWord(std::uint32_t lane_bits) { return 32 / lane_bits; }

}  // namespace

Result<std::uint32_t> VoteLaneBits(std::uint32_t voters) {
  if (voters == 0) return Status::InvalidArgument("a vote needs at least one voter");
  if (voters > 0x7FFFFFFFu) return Status::OutOfRange("too many voters for 32-bit counts");
  std::uint32_t bits = 1;
  while ((std::uint64_t{1} << bits) <= voters) ++bits;
  return bits;
}

std::size_t VoteWords(std::size_t coordinates, std::uint32_t lane_bits) {
  const std::size_t lanes = LanesPerWord(lane_bits);
  return (coordinates + lanes - 1) / lanes;
}

void PackVotes(std::span<const std::uint32_t> signs, std::size_t coordinates,
               std::uint32_t lane_bits, std::span<std::uint32_t> words) {
  EDGESGD_CHECK(lane_bits >= 1 && lane_bits <= 32);
  EDGESGD_CHECK(signs.size() * 32 >= coordinates);
  EDGESGD_CHECK(words.size() == VoteWords(coordinates, lane_bits));
  const std::size_t lanes = LanesPerWord(lane_bits);
  std::fill(words.begin(), words.end(), 0u);
  for (std::size_t i = 0; i < coordinates; ++i) {
    const std::uint32_t vote = (signs[i / 32] >> (i % 32)) & 1u;
    words[i / lanes] |= vote << (lane_bits * (i % lanes));
  }
}

void UnpackVoteCounts(std::span<const std::uint32_t> words, std::size_t coordinates,
                      std::uint32_t lane_bits, std::span<std::uint32_t> counts) {
  EDGESGD_CHECK(lane_bits >= 1 && lane_bits <= 32);
  EDGESGD_CHECK(words.size() == VoteWords(coordinates, lane_bits));
  EDGESGD_CHECK(counts.size() == coordinates);
  const std::size_t lanes = LanesPerWord(lane_bits);
  const std::uint32_t lane_mask = lane_bits == 32 ? 0xFFFFFFFFu : (1u << lane_bits) - 1u;
  for (std::size_t i = 0; i < coordinates; ++i) {
    counts[i] = (words[i / lanes] >> (lane_bits * (i % lanes))) & lane_mask;
  }
}

}  // namespace edgesgd::secagg
