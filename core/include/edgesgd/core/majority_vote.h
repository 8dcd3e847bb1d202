#pragma once

// The server side of signSGD with majority vote (docs/algorithms.md §5): each worker sends one
// sign bit per coordinate, the server returns V = sign(sum_i sign_i), again one bit per
// coordinate.
// Votes are packed as in SignCodec: bit j of a tensor's word w is its coordinate 32w + j,
// bit 1 = +1 (non-negative), each tensor starts on a fresh word, padding bits are 0.
//
// Counting is bit-sliced: plane b holds bit b of every coordinate's count of +1 votes, so one
// word operation advances 32 counters. Adding a vote is a chain of half adders (sum = plane ^
// carry, carry = plane & carry) that stops as soon as no lane carries; the final comparison
// with the threshold is a bit-sliced comparator. Nothing is unpacked to one integer per
// coordinate, and the state is ceil(log2(max_voters + 1)) bits per coordinate.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

// How an exact tie (count * 2 == n, possible only for an even number of voters) resolves.
// kPositive (the default) matches sign(0) = +1 everywhere else in the library.
enum class TieRule : std::uint8_t { kPositive, kNegative };

// Most voters a MajorityVote can count (counters are at most 24 bits, like worker ids).
inline constexpr std::uint32_t kMaxVoters = 0x00FFFFFFu;

class MajorityVote {
 public:
  // Sign words of a layout: sum over tensors of ceil(size / 32).
  static constexpr std::size_t WordsFor(const TensorLayout& layout) {
    std::size_t words = 0;
    for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
      words += SignCodec::WordsFor(layout.size(t));
    }
    return words;
  }
  // Counter bit planes needed to count up to `max_voters`.
  static constexpr std::size_t PlanesFor(std::uint32_t max_voters) {
    return static_cast<std::size_t>(std::bit_width(max_voters));
  }

  // Exact arena bytes Init takes: one u32 per word and plane; 0 for bad arguments.
  static constexpr std::size_t StateBytes(const TensorLayout& layout, std::uint32_t max_voters) {
    if (layout.tensor_count() == 0 || max_voters < 1 || max_voters > kMaxVoters) return 0;
    return ArenaBytesFor<std::uint32_t>(WordsFor(layout) * PlanesFor(max_voters));
  }

  // Takes the counters (zeroed) from `arena`. Allocates from the arena only.
  // Errors: kInvalidArgument (empty layout, max_voters outside 1..kMaxVoters, unknown tie rule),
  // kFailedPrecondition (arena sealed), kResourceExhausted (arena too small; nothing is taken).
  Status Init(Arena& arena, const TensorLayout& layout, std::uint32_t max_voters,
              TieRule tie_rule = TieRule::kPositive);

  // Forgets all votes. Does not allocate.
  void Reset();

  // Counts one worker's packed signs (WordsFor(layout) words). Does not allocate.
  // Errors: kFailedPrecondition before Init; kResourceExhausted when max_voters votes were
  // already counted; kDataLoss for a wrong word count or a padding bit set (a vote that
  // SignCodec::DecodeAdd would reject too). Nothing is counted on error.
  Status AddVote(std::span<const std::uint32_t> words);

  // Counts `voters` workers' votes at once from their per-coordinate counts of +1 votes:
  // `counts` holds 32 lanes per sign word (lane 32w + j is bit j of word w, padding lanes
  // included, which must be 0) — what secure aggregation unmasks, never seeing a single vote.
  // Does not allocate. Errors: kFailedPrecondition before Init; kResourceExhausted beyond
  // max_voters; kDataLoss for a wrong length, a count above `voters` or a padding lane's count.
  // Nothing is counted on error.
  Status AddCounts(std::span<const std::uint32_t> counts, std::uint32_t voters);

  // Writes V to `out_words` (WordsFor(layout) words): bit 1 (+1) iff count * 2 > n, ties per
  // the TieRule; padding bits are 0. Reads the counters only, so more votes may follow and
  // Finish may be called again. Does not allocate.
  // Errors: kFailedPrecondition before Init or with no votes; kInvalidArgument for a wrong
  // output size.
  Status Finish(std::span<std::uint32_t> out_words) const;

  std::uint32_t voters() const { return voters_; }
  std::size_t words() const { return words_; }
  TieRule tie_rule() const { return tie_rule_; }

 private:
  TensorLayout layout_;
  // counters_[w * planes_ + b] is bit b of the counts of word w's 32 coordinates, so a word's
  // planes are adjacent in memory.
  std::span<std::uint32_t> counters_;
  std::size_t words_ = 0;
  std::size_t planes_ = 0;
  std::uint32_t max_voters_ = 0;
  std::uint32_t voters_ = 0;
  TieRule tie_rule_ = TieRule::kPositive;
  bool initialized_ = false;
};

namespace internal {
// kDataLoss when a padding bit (past a tensor's last coordinate) is set in `words`, which must
// hold WordsFor(layout) words. Shared with ApplySignVote. Does not allocate.
Status CheckSignPadding(const TensorLayout& layout, std::span<const std::uint32_t> words);
}  // namespace internal

// Coordinates at which two packed sign vectors differ (popcount of their XOR): the vote's
// per-coordinate sign error when one of them is the reference sign. Padding bits are expected
// to be 0 in both (as SignCodec and MajorityVote write them). Does not allocate.
// Errors: kInvalidArgument when the sizes differ.
Result<std::size_t> CountDisagreements(std::span<const std::uint32_t> a,
                                       std::span<const std::uint32_t> b);

}  // namespace edgesgd
