#include "edgesgd/core/internal/top_k_select.h"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace edgesgd::internal {
namespace {

constexpr std::uint32_t kKeyMask = 0x7FFFFFFFu;

// Keys are 31 bits wide, split into three digits, most significant first: 10 + 11 + 10 bits,
// so every histogram fits the 2048 bins and three passes decide a key.
constexpr std::size_t kDigitCount = 3;
constexpr unsigned kDigitShift[kDigitCount] = {21, 10, 0};
constexpr std::uint32_t kDigitBins[kDigitCount] = {1024, 2048, 1024};
static_assert(2 * kDigitBins[0] <= kTopKeysHistogramBins);
static_assert(kDigitBins[1] <= kTopKeysHistogramBins);

// The filtering loop compares this many keys at once into a bit mask (one 64-byte line).
constexpr std::size_t kBlock = 16;
static_assert(kBlock <= kTopKeysPadding);

// The sample is read in chunks of kBlock consecutive keys (one 64-byte cache line each), which
// costs a sixteenth of the cache misses of a single-key stride. At most kMaxSample keys: enough
// to place a 1% threshold within a few percent while staying a small fraction of a pass.
constexpr std::size_t kMaxSample = 65536;
constexpr std::size_t kMinSample = 1024;
// Standard deviations of margin on both sides of the threshold guess.
constexpr std::uint64_t kMarginSigmas = 4;

inline std::uint32_t BitsOf(float v) { return std::bit_cast<std::uint32_t>(v); }
inline std::uint32_t KeyOf(float v) { return BitsOf(v) & kKeyMask; }

constexpr std::uint64_t ISqrt(std::uint64_t v) {
  std::uint64_t root = 0;
  std::uint64_t bit = std::uint64_t{1} << 62;
  while (bit > v) bit >>= 2;
  while (bit != 0) {
    if (v >= root + bit) {
      v -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
    bit >>= 2;
  }
  return root;
}
static_assert(ISqrt(0) == 0 && ISqrt(15) == 3 && ISqrt(16) == 4 && ISqrt(1u << 30) == 1u << 15);

// Progress of a radix select towards the k-th largest key.
struct Narrowing {
  std::uint32_t prefix = 0;  // decided high bits of the k-th key; undecided bits are zero
  std::uint32_t mask = 0;    // which bits are decided
  std::size_t greater = 0;   // keys whose decided bits exceed the prefix
  std::size_t equal = 0;     // keys whose decided bits equal the prefix
};

// Decides digit `level` of the k-th largest of n keys (1 <= k <= n), given the digits above it
// in `state`. Only keys matching the prefix are counted, so `key_at` may also enumerate a
// superset that contains every key counted in state.greater. Returns false only if the counts
// are inconsistent (a bug).
template <typename KeyAt>
bool NarrowByDigit(std::size_t n, std::size_t k, std::size_t level, KeyAt key_at,
                   std::uint32_t* hist, Narrowing& state) {
  const unsigned shift = kDigitShift[level];
  const std::uint32_t bins = kDigitBins[level];
  if (level == 0) {
    // Two interleaved histograms: consecutive keys often share their top digit (it is mostly
    // the exponent), and alternating counters halves the store-to-load dependency chain.
    std::fill_n(hist, 2 * kDigitBins[0], 0u);
    std::uint32_t* even = hist;
    std::uint32_t* odd = hist + kDigitBins[0];
    std::size_t i = 0;
    for (; i + 2 <= n; i += 2) {
      ++even[key_at(i) >> shift];
      ++odd[key_at(i + 1) >> shift];
    }
    if (i < n) ++even[key_at(i) >> shift];
    for (std::uint32_t b = 0; b < kDigitBins[0]; ++b) even[b] += odd[b];
  } else {
    std::fill_n(hist, bins, 0u);
    // Branch-free: whether a key matches the prefix is close to a coin flip at the first
    // narrowing, and a mispredicted branch costs more than a redundant add of zero.
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t key = key_at(i);
      hist[(key >> shift) & (bins - 1)] +=
          static_cast<std::uint32_t>((key & state.mask) == state.prefix);
    }
  }
  std::size_t remaining = k - state.greater;
  std::uint32_t bin = bins - 1;
  while (hist[bin] < remaining) {
    if (bin == 0) return false;
    remaining -= hist[bin];
    state.greater += hist[bin];
    --bin;
  }
  state.equal = hist[bin];
  state.prefix |= bin << shift;
  state.mask |= (bins - 1) << shift;
  return true;
}

// Masks computed before any candidate is appended: keeping the mask loop apart from the
// append loop lets it run as straight-line vector code.
constexpr std::size_t kChunkBlocks = 64;

// Bit j set when the key of data[j] is > below, for j < kBlock, reading `below` as a signed
// 32-bit number (so 0xFFFFFFFF, i.e. -1, lets every key pass). Keys are below 2^31, so
// `below - key` (mod 2^32) has its top bit set exactly then.
#if defined(__SSE2__)
inline std::uint32_t BlockMask(const float* data, std::uint32_t below) {
  const __m128i below4 = _mm_set1_epi32(static_cast<int>(below));
  const __m128i key_mask4 = _mm_set1_epi32(static_cast<int>(kKeyMask));
  std::uint32_t mask = 0;
  for (std::size_t q = 0; q < kBlock / 4; ++q) {
    const __m128i keys = _mm_and_si128(_mm_castps_si128(_mm_loadu_ps(data + 4 * q)), key_mask4);
    const __m128 top = _mm_castsi128_ps(_mm_sub_epi32(below4, keys));
    mask |= static_cast<std::uint32_t>(_mm_movemask_ps(top)) << (4 * q);
  }
  return mask;
}
#else
// Portable form; GCC vectorises it for NEON.
inline std::uint32_t BlockMask(const float* data, std::uint32_t below) {
  std::uint32_t mask = 0;
  for (std::size_t j = 0; j < kBlock; ++j) {
    mask |= ((below - KeyOf(data[j])) >> 31) << j;
  }
  return mask;
}
#endif

// Where the filtering pass puts what it keeps. Slots [0, capacity) (+ kTopKeysPadding) of two
// parallel arrays (bits, position):
//  - "above" keys fill from the front, in position order;
//  - with kSplitTies, keys equal to the threshold fill from the back (the j-th at slot
//    capacity - 1 - j), also in position order, and give way to the front: when the two meet,
//    the latest tie is dropped. Once no room is left for ties they are not even looked at, so
//    heavy ties at the threshold (all-equal inputs, zeros, quantised values) cost no more than
//    a plain pass. Only the earliest ties are ever needed, and they are the ones kept.
// Without kSplitTies every key >= threshold counts as above.
template <bool kSplitTies>
struct CandidateSink {
  std::uint32_t* bits;
  std::uint32_t* index;
  std::size_t capacity;
  std::uint32_t threshold;
  std::size_t above = 0;
  std::size_t ties = 0;

  void Add(std::uint32_t value_bits, std::size_t position) {
    if constexpr (kSplitTies) {
      if ((value_bits & kKeyMask) == threshold) {
        if (above + ties < capacity) {
          const std::size_t slot = capacity - 1 - ties;
          bits[slot] = value_bits;
          index[slot] = static_cast<std::uint32_t>(position);
          ++ties;
        }
        return;
      }
    }
    bits[above] = value_bits;
    index[above] = static_cast<std::uint32_t>(position);
    ++above;
    if constexpr (kSplitTies) {
      // The slot just written may have held the latest tie.
      const std::size_t room = capacity - std::min(above, capacity);
      ties = std::min(ties, room);
    }
  }
  bool overflowed() const { return above > capacity; }
  bool ties_full() const { return above + ties >= capacity; }
};

// Adds data[first + j] for the set bits j of `mask`, in order. (Filter adds the first hit of a
// block itself: most hit blocks hold one candidate, so this loop is then rarely entered.)
template <bool kSplitTies>
inline void AddMasked(const float* data, std::size_t first, std::uint32_t mask,
                      CandidateSink<kSplitTies>& sink) {
  while (mask != 0) {
    const auto j = static_cast<std::size_t>(std::countr_zero(mask));
    sink.Add(BitsOf(data[first + j]), first + j);
    mask &= mask - 1;
  }
}

// One pass over `values` feeding every key >= sink.threshold to the sink, in position order.
// Stops early once more than `capacity` keys are above (sink.overflowed()).
template <bool kSplitTies>
void Filter(std::span<const float> values, CandidateSink<kSplitTies>& sink) {
  const float* data = values.data();
  const std::size_t n = values.size();
  // Keys >= threshold (ties included) while there is room for ties; see BlockMask for the
  // threshold 0 case.
  std::uint32_t below = sink.threshold - 1;
  constexpr std::size_t kChunk = kChunkBlocks * kBlock;
  std::size_t i = 0;
  for (; i + kChunk <= n; i += kChunk) {
    // The blocks with a hit are listed without branches, so the only data-dependent branch
    // left is the rare one for a block with more than one candidate.
    std::uint32_t masks[kChunkBlocks];
    std::uint32_t hit_blocks[kChunkBlocks];
    std::size_t hit_count = 0;
    for (std::size_t b = 0; b < kChunkBlocks; ++b) {
      const std::uint32_t mask = BlockMask(data + i + b * kBlock, below);
      masks[b] = mask;
      hit_blocks[hit_count] = static_cast<std::uint32_t>(b);
      hit_count += static_cast<std::size_t>(mask != 0);
    }
    for (std::size_t h = 0; h < hit_count; ++h) {
      const std::size_t first = i + hit_blocks[h] * kBlock;
      std::uint32_t mask = masks[hit_blocks[h]];
      const auto j = static_cast<std::size_t>(std::countr_zero(mask));
      sink.Add(BitsOf(data[first + j]), first + j);
      mask &= mask - 1;
      if (mask != 0) AddMasked(data, first, mask, sink);
      if (sink.overflowed()) return;
    }
    if constexpr (kSplitTies) {
      if (sink.ties_full()) below = sink.threshold;  // from now on, strictly above only
    }
  }
  for (; i + kBlock <= n; i += kBlock) {
    AddMasked(data, i, BlockMask(data + i, below), sink);
    if (sink.overflowed()) return;
  }
  for (; i < n; ++i) {
    const std::uint32_t bits = BitsOf(data[i]);
    if (((below - (bits & kKeyMask)) >> 31) != 0) sink.Add(bits, i);
  }
}

// Writes the k candidates that a full sort would keep: every key above the k-th key `kth`,
// then the first `k - greater` (by position) equal to it. Without branches on the data: each
// candidate is written at the next output slot, which advances only if it is kept (the loop
// stops once k are kept, so the slot is always in bounds).
template <bool kWithValues>
void EmitCandidates(std::size_t count, std::size_t k, std::uint32_t kth, std::size_t greater,
                    std::size_t equal, const std::uint32_t* cand_bits,
                    const std::uint32_t* cand_index, std::span<std::uint32_t> out_indices,
                    std::span<float> out_values, std::uint32_t index_base) {
  std::uint32_t* indices = out_indices.data();
  float* values = out_values.data();
  std::size_t kept = 0;
  if (greater + equal == k) {
    // Common case (no tie straddles the cut): every key >= kth is kept, and the loop carries
    // no tie counter.
    for (std::size_t i = 0; i < count && kept < k; ++i) {
      const std::uint32_t bits = cand_bits[i];
      indices[kept] = cand_index[i] + index_base;
      if constexpr (kWithValues) values[kept] = std::bit_cast<float>(bits);
      kept += static_cast<std::size_t>((bits & kKeyMask) >= kth);
    }
    return;
  }
  std::size_t equal_left = k - greater;
  for (std::size_t i = 0; i < count && kept < k; ++i) {
    const std::uint32_t bits = cand_bits[i];
    const std::uint32_t key = bits & kKeyMask;
    const std::size_t tie =
        static_cast<std::size_t>(key == kth) & static_cast<std::size_t>(equal_left != 0);
    indices[kept] = cand_index[i] + index_base;
    if constexpr (kWithValues) values[kept] = std::bit_cast<float>(bits);
    kept += static_cast<std::size_t>(key > kth) | tie;
    equal_left -= tie;
  }
}

// When the k-th key equals the filtering threshold: all `above` candidates (keys above it, at
// the front) and the first k - above ties (at the back, earliest in the last slot), merged by
// position.
void EmitAboveAndTies(std::size_t k, const CandidateSink<true>& sink,
                      std::span<std::uint32_t> out_indices, std::span<float> out_values,
                      std::uint32_t index_base) {
  const std::size_t ties_needed = k - sink.above;
  std::size_t next_above = 0;
  std::size_t next_tie = 0;
  for (std::size_t out = 0; out < k; ++out) {
    const std::size_t tie_slot = sink.capacity - 1 - next_tie;
    const bool take_tie = next_tie < ties_needed && (next_above == sink.above ||
                                                     sink.index[tie_slot] < sink.index[next_above]);
    const std::size_t slot = take_tie ? tie_slot : next_above;
    out_indices[out] = sink.index[slot] + index_base;
    if (!out_values.empty()) out_values[out] = std::bit_cast<float>(sink.bits[slot]);
    next_tie += static_cast<std::size_t>(take_tie);
    next_above += static_cast<std::size_t>(!take_tie);
  }
}

// As EmitCandidates, straight from the input (when no candidate set fitted in scratch).
void EmitFromInput(std::span<const float> values, std::size_t k, std::uint32_t kth,
                   std::size_t greater, std::span<std::uint32_t> out_indices,
                   std::span<float> out_values, std::uint32_t index_base) {
  std::size_t equal_left = k - greater;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < values.size() && kept < k; ++i) {
    const std::uint32_t key = KeyOf(values[i]);
    if (key > kth || (key == kth && equal_left != 0)) {
      if (key == kth) --equal_left;
      out_indices[kept] = static_cast<std::uint32_t>(i) + index_base;
      if (!out_values.empty()) out_values[kept] = values[i];
      ++kept;
    }
  }
}

// Sample size for n keys with `capacity` candidate slots (the sample is stored there): a
// multiple of kBlock, at most n / 16 so that sampling stays a small fraction of a pass.
std::size_t SampleSize(std::size_t n, std::size_t capacity) {
  std::size_t size = std::min({kMaxSample, capacity, n / 16});
  return size - size % kBlock;
}

// Rank r (1-based, from the largest) of the sample key used as threshold, or 0 when a sample of
// this size cannot place a threshold that is likely to keep between k and capacity keys. With
// m = k * sample / n sample keys expected above the true k-th key, r sits kMarginSigmas standard
// deviations above m, so too few candidates is unlikely (and costs only time: the fallback),
// and must stay as many below the sample rank of the capacity-th key, so overflow is unlikely.
// Taking the lowest safe rank keeps the candidate set, and its selection, small.
std::size_t SampleRank(std::size_t n, std::size_t k, std::size_t sample, std::size_t capacity) {
  const std::uint64_t expected = std::uint64_t{k} * sample / n;
  const std::uint64_t low = expected + kMarginSigmas * ISqrt(expected + 1) + 2;
  const std::uint64_t capacity_rank = std::uint64_t{capacity} * sample / n;
  const std::uint64_t spread = kMarginSigmas * ISqrt(capacity_rank) + 2;
  if (capacity_rank <= spread) return 0;
  const std::uint64_t high = std::min<std::uint64_t>(capacity_rank - spread, sample);
  if (low > high) return 0;
  return static_cast<std::size_t>(low);
}

// Scratch carved into 4-byte words: histogram, then candidate bits, then candidate positions.
struct ScratchWords {
  std::uint32_t* hist = nullptr;
  std::uint32_t* cand_bits = nullptr;
  std::uint32_t* cand_index = nullptr;
  std::size_t capacity = 0;
};

bool CarveScratch(std::span<std::byte> scratch, ScratchWords& words) {
  const auto address = reinterpret_cast<std::uintptr_t>(scratch.data());
  const std::size_t skip =
      (sizeof(std::uint32_t) - address % sizeof(std::uint32_t)) % sizeof(std::uint32_t);
  if (scratch.size() < skip) return false;
  const std::size_t count = (scratch.size() - skip) / sizeof(std::uint32_t);
  const std::size_t fixed = kTopKeysHistogramBins + 2 * kTopKeysPadding;
  if (count < fixed) return false;
  // Through void*: the alignment was established above.
  auto* base = static_cast<std::uint32_t*>(static_cast<void*>(scratch.data() + skip));
  words.capacity = (count - fixed) / 2;
  words.hist = base;
  words.cand_bits = base + kTopKeysHistogramBins;
  words.cand_index = words.cand_bits + words.capacity + kTopKeysPadding;
  return true;
}

// The exact k-th key from candidates already filtered (all keys >= some bound, at least k of
// them), continuing from `state` at digit `level`; then emits.
bool SelectAmongCandidates(std::size_t count, std::size_t k, std::size_t level, Narrowing state,
                           const ScratchWords& words, std::span<std::uint32_t> out_indices,
                           std::span<float> out_values, std::uint32_t index_base) {
  const std::uint32_t* bits = words.cand_bits;
  const auto key_at = [bits](std::size_t i) { return bits[i] & kKeyMask; };
  for (; level < kDigitCount; ++level) {
    if (!NarrowByDigit(count, k, level, key_at, words.hist, state)) return false;
  }
  if (out_values.empty()) {
    EmitCandidates<false>(count, k, state.prefix, state.greater, state.equal, words.cand_bits,
                          words.cand_index, out_indices, out_values, index_base);
  } else {
    EmitCandidates<true>(count, k, state.prefix, state.greater, state.equal, words.cand_bits,
                         words.cand_index, out_indices, out_values, index_base);
  }
  return true;
}

}  // namespace

Status SelectTopKeys(std::span<const float> values, std::size_t k,
                     std::span<std::uint32_t> out_indices, std::span<float> out_values,
                     std::span<std::byte> scratch, std::uint32_t index_base) {
  const std::size_t n = values.size();
  if (k > n) return Status::InvalidArgument("k is larger than the number of values");
  if (n > 0 && n - 1 > std::size_t{0xFFFFFFFFu - index_base}) {
    return Status::InvalidArgument("an index would not fit in 32 bits after index_base");
  }
  if (out_indices.size() < k || (!out_values.empty() && out_values.size() < k)) {
    return Status::ResourceExhausted("an output span is shorter than k");
  }
  ScratchWords words;
  if (!CarveScratch(scratch, words)) {
    return Status::ResourceExhausted("the scratch is smaller than kTopKeysMinScratchBytes");
  }
  if (k == 0) return Status::Ok();

  if (k == n) {
    for (std::size_t i = 0; i < n; ++i) out_indices[i] = static_cast<std::uint32_t>(i) + index_base;
    if (!out_values.empty()) std::copy(values.begin(), values.end(), out_values.begin());
    return Status::Ok();
  }

  // Fast path: threshold from a sample, one filtering pass, exact select among the candidates.
  const std::size_t sample = SampleSize(n, words.capacity);
  const std::size_t rank = sample >= kMinSample ? SampleRank(n, k, sample, words.capacity) : 0;
  if (rank != 0) {
    const std::size_t stride = n / (sample / kBlock);
    for (std::size_t chunk = 0; chunk < sample / kBlock; ++chunk) {
      const float* source = values.data() + chunk * stride;
      std::memcpy(words.cand_bits + chunk * kBlock, source, kBlock * sizeof(float));
    }
    Narrowing guess;
    const std::uint32_t* bits = words.cand_bits;
    const auto sample_key = [bits](std::size_t i) { return bits[i] & kKeyMask; };
    for (std::size_t level = 0; level < kDigitCount; ++level) {
      if (!NarrowByDigit(sample, rank, level, sample_key, words.hist, guess)) {
        return Status::Internal("top-k selection: the sample holds fewer keys than its rank");
      }
    }
    CandidateSink<true> sink{words.cand_bits, words.cand_index, words.capacity, guess.prefix};
    Filter(values, sink);
    if (!sink.overflowed()) {
      if (sink.above >= k) {
        return SelectAmongCandidates(sink.above, k, 0, Narrowing{}, words, out_indices, out_values,
                                     index_base)
                   ? Status::Ok()
                   : Status::Internal("top-k selection: fewer candidate keys than k");
      }
      // The k-th key is the threshold itself. The sink kept at least min(ties, capacity -
      // above) ties, which covers k - above whenever there are that many (k <= capacity).
      if (sink.above + sink.ties >= k) {
        EmitAboveAndTies(k, sink, out_indices, out_values, index_base);
        return Status::Ok();
      }
    }
  }

  // Exact fallback: radix select over the whole input. As soon as the keys sharing the decided
  // digits (plus those above) fit in scratch, collect them and finish among the candidates.
  const auto input_key = [values](std::size_t i) { return KeyOf(values[i]); };
  Narrowing state;
  for (std::size_t level = 0; level < kDigitCount; ++level) {
    if (!NarrowByDigit(n, k, level, input_key, words.hist, state)) {
      return Status::Internal("top-k selection: the histogram holds fewer than k keys");
    }
    const std::size_t bounded = state.greater + state.equal;
    if (level + 1 < kDigitCount && bounded <= words.capacity) {
      // key >= prefix exactly when the key's decided digits are >= the prefix's.
      CandidateSink<false> sink{words.cand_bits, words.cand_index, words.capacity, state.prefix};
      Filter(values, sink);
      if (sink.above != bounded) {
        return Status::Internal("top-k selection: the filter's count differs from the histogram's");
      }
      return SelectAmongCandidates(bounded, k, level + 1, state, words, out_indices, out_values,
                                   index_base)
                 ? Status::Ok()
                 : Status::Internal("top-k selection: fewer candidate keys than k");
    }
  }
  EmitFromInput(values, k, state.prefix, state.greater, out_indices, out_values, index_base);
  return Status::Ok();
}

}  // namespace edgesgd::internal
