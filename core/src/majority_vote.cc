#include "edgesgd/core/majority_vote.h"

#include <algorithm>

namespace edgesgd {
namespace internal {

Status CheckSignPadding(const TensorLayout& layout, std::span<const std::uint32_t> words) {
  std::size_t end = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    end += SignCodec::WordsFor(layout.size(t));
    const std::size_t used = layout.size(t) % 32;
    if (used != 0 && (words[end - 1] >> used) != 0) {
      return Status::DataLoss("a sign vote has padding bits set");
    }
  }
  return Status::Ok();
}

}  // namespace internal

Status MajorityVote::Init(Arena& arena, const TensorLayout& layout, std::uint32_t max_voters,
                          TieRule tie_rule) {
  if (layout.tensor_count() == 0 || max_voters < 1 || max_voters > kMaxVoters) {
    return Status::InvalidArgument("the layout is empty or max_voters is outside 1..2^24 - 1");
  }
  if (tie_rule != TieRule::kPositive && tie_rule != TieRule::kNegative) {
    return Status::InvalidArgument("unknown tie rule");
  }
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(layout, max_voters)) {
    return Status::ResourceExhausted("the arena is too small for the vote counters");
  }
  const std::size_t words = WordsFor(layout);
  const std::size_t planes = PlanesFor(max_voters);
  EDGESGD_TRY_ASSIGN(counters_, arena.Allocate<std::uint32_t>(words * planes));
  layout_ = layout;
  words_ = words;
  planes_ = planes;
  max_voters_ = max_voters;
  tie_rule_ = tie_rule;
  voters_ = 0;
  initialized_ = true;
  return Status::Ok();
}

void MajorityVote::Reset() {
  std::fill(counters_.begin(), counters_.end(), 0u);
  voters_ = 0;
}

Status MajorityVote::AddVote(std::span<const std::uint32_t> words) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (words.size() != words_) {
    return Status::DataLoss("a sign vote's word count differs from the layout's");
  }
  if (voters_ >= max_voters_) return Status::ResourceExhausted("more votes than max_voters");
  EDGESGD_TRY(internal::CheckSignPadding(layout_, words));
  // Counts never exceed max_voters < 2^planes, so the carry out of the top plane is always 0
  // and the chain below never needs to look past it.
  for (std::size_t w = 0; w < words_; ++w) {
    std::uint32_t* planes = counters_.data() + w * planes_;
    std::uint32_t carry = words[w];
    for (std::size_t b = 0; b < planes_ && carry != 0; ++b) {
      const std::uint32_t next_carry = planes[b] & carry;
      planes[b] ^= carry;
      carry = next_carry;
    }
  }
  ++voters_;
  return Status::Ok();
}

Status MajorityVote::AddCounts(std::span<const std::uint32_t> counts, std::uint32_t voters) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (counts.size() != 32 * words_) {
    return Status::DataLoss("vote counts must hold 32 lanes per sign word");
  }
  if (voters == 0 || voters > max_voters_ - voters_) {
    return Status::ResourceExhausted("more votes than max_voters");
  }
  for (const std::uint32_t count : counts) {
    if (count > voters) return Status::DataLoss("a vote count exceeds the voters");
  }
  // No vote reaches a tensor's padding lanes (past its last coordinate, in its last word).
  std::size_t end = 0;
  for (std::size_t t = 0; t < layout_.tensor_count(); ++t) {
    end += SignCodec::WordsFor(layout_.size(t));
    const std::size_t used = layout_.size(t) % 32;
    for (std::size_t j = used == 0 ? 32 : used; j < 32; ++j) {
      if (counts[32 * (end - 1) + j] != 0) return Status::DataLoss("a padding lane has votes");
    }
  }
  // Each bit b of the counts is added into the bit-sliced counters from plane b up.
  for (std::size_t w = 0; w < words_; ++w) {
    std::uint32_t* planes = counters_.data() + w * planes_;
    const std::span<const std::uint32_t> lanes = counts.subspan(32 * w, 32);
    for (std::size_t b = 0; b < planes_; ++b) {
      std::uint32_t carry = 0;
      for (std::size_t j = 0; j < 32; ++j) carry |= ((lanes[j] >> b) & 1u) << j;
      for (std::size_t k = b; k < planes_ && carry != 0; ++k) {
        const std::uint32_t next_carry = planes[k] & carry;
        planes[k] ^= carry;
        carry = next_carry;
      }
    }
  }
  voters_ += voters;
  return Status::Ok();
}

Status MajorityVote::Finish(std::span<std::uint32_t> out_words) const {
  if (!initialized_ || voters_ == 0) {
    return Status::FailedPrecondition("Init has not been called, or no vote was added");
  }
  if (out_words.size() != words_) {
    return Status::InvalidArgument("the output's word count differs from the layout's");
  }
  // V = +1 iff count >= threshold: count * 2 > n  <=>  count >= floor(n / 2) + 1, and a tie
  // (count * 2 == n) also passes under kPositive  <=>  count >= ceil(n / 2).
  const std::uint32_t n = voters_;
  const std::uint32_t threshold = tie_rule_ == TieRule::kPositive ? (n + 1) / 2 : n / 2 + 1;
  // threshold <= n <= max_voters < 2^planes_: it fits in the planes.
  std::size_t word = 0;
  for (std::size_t t = 0; t < layout_.tensor_count(); ++t) {
    const std::size_t size = layout_.size(t);
    const std::size_t tensor_words = SignCodec::WordsFor(size);
    for (std::size_t w = 0; w < tensor_words; ++w, ++word) {
      // Bit-sliced comparison from the most significant plane down: `greater` marks lanes
      // already known to exceed the threshold, `equal` lanes whose high bits match it so far.
      const std::uint32_t* planes = counters_.data() + word * planes_;
      std::uint32_t greater = 0;
      std::uint32_t equal = ~0u;
      for (std::size_t b = planes_; b-- > 0;) {
        if (((threshold >> b) & 1u) != 0) {
          equal &= planes[b];
        } else {
          greater |= equal & planes[b];
          equal &= ~planes[b];
        }
      }
      std::uint32_t vote = greater | equal;
      const std::size_t used = size - w * 32;
      if (used < 32) vote &= (std::uint32_t{1} << used) - 1u;  // keep padding bits 0
      out_words[word] = vote;
    }
  }
  return Status::Ok();
}

Result<std::size_t> CountDisagreements(std::span<const std::uint32_t> a,
                                       std::span<const std::uint32_t> b) {
  if (a.size() != b.size()) return Status::InvalidArgument("the sign vectors' word counts differ");
  std::size_t count = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    count += static_cast<std::size_t>(std::popcount(a[i] ^ b[i]));
  }
  return count;
}

}  // namespace edgesgd
