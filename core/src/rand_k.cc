#include "edgesgd/core/codecs/rand_k.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "edgesgd/core/internal/codec_checks.h"
#include "edgesgd/core/random.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace edgesgd {
namespace {

constexpr std::uint32_t kWordBits = 32;

// The bitmap view of the scratch. Going through void* states that the alignment was checked
// (CheckScratchAlignment) rather than assumed, and keeps -Wcast-align quiet on ARM.
std::span<std::uint32_t> BitmapOf(std::span<std::byte> scratch, std::size_t size) {
  const std::size_t words = (size + kWordBits - 1) / kWordBits;
  return std::span<std::uint32_t>(static_cast<std::uint32_t*>(static_cast<void*>(scratch.data())),
                                  words);
}

// Scratch is reinterpreted as u32 words; a misaligned buffer would fault on strict-alignment
// cores, so it is refused instead.
Status CheckScratchAlignment(std::span<std::byte> scratch) {
  const auto address = reinterpret_cast<std::uintptr_t>(scratch.data());
  return address % alignof(std::uint32_t) == 0 ? Status::Ok() : Status::InvalidArgument();
}

// A tensor's selection in the bitmap: the marked bits are the kept coordinates, or, when
// `complement`, the coordinates left out.
struct Selection {
  std::span<std::uint32_t> bitmap;
  std::uint32_t size = 0;
  bool complement = false;
};

// The same stream as CounterRng(seed, round, tensor, stream), word for word (tests compare
// the two), generated eight Philox blocks at a time. Philox is bound by its 32x32->64-bit
// multiplies; with SSE2 two of them run per instruction, four blocks side by side in each of two
// independent groups, which makes Floyd's draws about twice as fast on x86-64. Elsewhere the
// blocks come from Philox4x32_10 one at a time, as in CounterRng.
class SelectionRng {
 public:
  SelectionRng(std::uint64_t seed, std::uint32_t round, std::uint32_t tensor, std::uint32_t stream)
      : key_(KeyFromSeed(seed)), round_(round), tensor_(tensor), stream_(stream) {}

  // Uniform in [0, bound), bound >= 1: Lemire's multiply-shift with rejection, draw for draw
  // the same as CounterRng::NextBelow.
  std::uint32_t NextBelow(std::uint32_t bound) {
    std::uint64_t product = std::uint64_t{NextU32()} * bound;
    auto low = static_cast<std::uint32_t>(product);
    if (low < bound) {
      const std::uint32_t threshold = (0u - bound) % bound;
      while (low < threshold) {
        product = std::uint64_t{NextU32()} * bound;
        low = static_cast<std::uint32_t>(product);
      }
    }
    return static_cast<std::uint32_t>(product >> 32);
  }

 private:
  static constexpr std::size_t kBlocks = 8;
  static constexpr std::size_t kWords = 4 * kBlocks;

  std::uint32_t NextU32() {
    if (used_ == kWords) Refill();
    return words_[used_++];
  }

#if defined(__SSE2__)
  // Four blocks' counters as four vectors, one per Philox word (lane i = block i).
  struct Group {
    __m128i c0, c1, c2, c3;
  };

  // (hi, lo) 32-bit halves of the four 32x32-bit products a[i] * m.
  static void MulHiLo(__m128i a, __m128i m, __m128i& hi, __m128i& lo) {
    constexpr int kLowsThenHighs = 0xD8;                          // _MM_SHUFFLE(3, 1, 2, 0)
    const __m128i even = _mm_mul_epu32(a, m);                     // products of lanes 0, 2
    const __m128i odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m);  // products of lanes 1, 3
    const __m128i even_sorted = _mm_shuffle_epi32(even, kLowsThenHighs);
    const __m128i odd_sorted = _mm_shuffle_epi32(odd, kLowsThenHighs);
    lo = _mm_unpacklo_epi32(even_sorted, odd_sorted);
    hi = _mm_unpackhi_epi32(even_sorted, odd_sorted);
  }

  static void Round(Group& g, __m128i k0, __m128i k1) {
    const __m128i mul0 = _mm_set1_epi32(static_cast<int>(0xD2511F53u));
    const __m128i mul1 = _mm_set1_epi32(static_cast<int>(0xCD9E8D57u));
    __m128i hi0, lo0, hi1, lo1;
    MulHiLo(g.c0, mul0, hi0, lo0);
    MulHiLo(g.c2, mul1, hi1, lo1);
    g = Group{_mm_xor_si128(_mm_xor_si128(hi1, g.c1), k0), lo1,
              _mm_xor_si128(_mm_xor_si128(hi0, g.c3), k1), lo0};
  }

  // Writes the group's four blocks, block after block, word after word (a 4x4 transpose).
  static void Store(const Group& g, std::uint32_t* out) {
    const __m128i t0 = _mm_unpacklo_epi32(g.c0, g.c1);  // b0w0 b0w1 b1w0 b1w1
    const __m128i t1 = _mm_unpacklo_epi32(g.c2, g.c3);  // b0w2 b0w3 b1w2 b1w3
    const __m128i t2 = _mm_unpackhi_epi32(g.c0, g.c1);  // b2w0 b2w1 b3w0 b3w1
    const __m128i t3 = _mm_unpackhi_epi32(g.c2, g.c3);  // b2w2 b2w3 b3w2 b3w3
    _mm_storeu_si128(static_cast<__m128i*>(static_cast<void*>(out)), _mm_unpacklo_epi64(t0, t1));
    _mm_storeu_si128(static_cast<__m128i*>(static_cast<void*>(out + 4)),
                     _mm_unpackhi_epi64(t0, t1));
    _mm_storeu_si128(static_cast<__m128i*>(static_cast<void*>(out + 8)),
                     _mm_unpacklo_epi64(t2, t3));
    _mm_storeu_si128(static_cast<__m128i*>(static_cast<void*>(out + 12)),
                     _mm_unpackhi_epi64(t2, t3));
  }

  void Refill() {
    const auto splat = [](std::uint32_t v) { return _mm_set1_epi32(static_cast<int>(v)); };
    const auto blocks = [&](std::uint32_t first) {
      return _mm_setr_epi32(static_cast<int>(first), static_cast<int>(first + 1),
                            static_cast<int>(first + 2), static_cast<int>(first + 3));
    };
    Group a{splat(round_), splat(tensor_), splat(stream_), blocks(next_block_)};
    Group b{splat(round_), splat(tensor_), splat(stream_), blocks(next_block_ + 4)};
    next_block_ += kBlocks;
    PhiloxKey key = key_;
    for (int r = 0; r < 10; ++r) {
      if (r > 0) {
        key[0] += 0x9E3779B9u;
        key[1] += 0xBB67AE85u;
      }
      const __m128i k0 = splat(key[0]);
      const __m128i k1 = splat(key[1]);
      Round(a, k0, k1);
      Round(b, k0, k1);
    }
    Store(a, words_.data());
    Store(b, words_.data() + 16);
    used_ = 0;
  }
#else
  void Refill() {
    for (std::size_t b = 0; b < kBlocks; ++b) {
      const PhiloxBlock block = Philox4x32_10({round_, tensor_, stream_, next_block_++}, key_);
      for (std::size_t i = 0; i < 4; ++i) words_[4 * b + i] = block[i];
    }
    used_ = 0;
  }
#endif

  PhiloxKey key_;
  std::uint32_t round_;
  std::uint32_t tensor_;
  std::uint32_t stream_;
  std::uint32_t next_block_ = 0;
  std::size_t used_ = kWords;
  std::array<std::uint32_t, kWords> words_{};
};

// Cache hints for scattered accesses; no-ops where the compiler has none.
inline void PrefetchForRead(const void* address) {
#if defined(__GNUC__)
  __builtin_prefetch(address, 0);
#else
  static_cast<void>(address);
#endif
}

inline void PrefetchForWrite(const void* address) {
#if defined(__GNUC__)
  __builtin_prefetch(address, 1);
#else
  static_cast<void>(address);
#endif
}

// Floyd's algorithm: for j = size - m .. size - 1 draw t uniform in [0, j]; mark t, or j if t is
// already marked. Every m-subset comes out with equal probability, using exactly m draws and no
// rejection loop, and j itself is never marked before its own step. The draws of a chunk are
// taken first and their bitmap words prefetched, so the cache misses of a large bitmap overlap
// instead of queueing behind each other.
Selection MarkSelection(const CodecContext& context, std::size_t tensor, std::uint32_t size,
                        std::uint32_t k, std::span<std::uint32_t> bitmap) {
  std::fill(bitmap.begin(), bitmap.end(), 0u);
  const bool complement = k > size - k;
  const std::uint32_t marks = complement ? size - k : k;
  SelectionRng rng(context.seed, context.round, static_cast<std::uint32_t>(tensor),
                   StreamId(RandomPurpose::kSparsifySelection));
  constexpr std::uint32_t kChunk = 64;
  std::array<std::uint32_t, kChunk> draws;
  for (std::uint32_t first = size - marks; first < size;) {
    const std::uint32_t count = std::min(kChunk, size - first);
    for (std::uint32_t i = 0; i < count; ++i) {
      draws[i] = rng.NextBelow(first + i + 1);
      PrefetchForWrite(&bitmap[draws[i] / kWordBits]);
    }
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::uint32_t t = draws[i];
      const std::uint32_t j = first + i;
      std::uint32_t& word_t = bitmap[t / kWordBits];
      const std::uint32_t bit_t = 1u << (t % kWordBits);
      if ((word_t & bit_t) != 0) {
        bitmap[j / kWordBits] |= 1u << (j % kWordBits);
      } else {
        word_t |= bit_t;
      }
    }
    first += count;
  }
  return Selection{bitmap, size, complement};
}

// Calls visit(ordinal, index) for every kept coordinate in ascending order. The scan goes a word
// at a time (an empty word costs one compare, a set bit one countr_zero) and hands out indices
// in batches: prefetch(index) runs as each index is found, visit only once 64 are pending, so
// the scattered reads or writes at the indices overlap instead of each waiting on memory in
// turn (this halves Encode's time at k_ratio 0.01 on a 16M-float tensor).
template <typename Prefetch, typename Visit>
void ForEachSelected(const Selection& selection, Prefetch prefetch, Visit visit) {
  constexpr std::size_t kBatch = 64;
  std::array<std::uint32_t, kBatch> batch;
  std::size_t pending = 0;
  std::size_t ordinal = 0;
  const std::uint32_t flip = selection.complement ? ~0u : 0u;
  const std::size_t words = selection.bitmap.size();
  const std::uint32_t tail_bits = selection.size % kWordBits;
  for (std::size_t w = 0; w < words; ++w) {
    std::uint32_t bits = selection.bitmap[w] ^ flip;
    if (w + 1 == words && tail_bits != 0) bits &= (1u << tail_bits) - 1u;
    const auto base = static_cast<std::uint32_t>(w * kWordBits);
    while (bits != 0) {
      const std::uint32_t index = base + static_cast<std::uint32_t>(std::countr_zero(bits));
      bits &= bits - 1u;
      prefetch(index);
      batch[pending++] = index;
      if (pending == kBatch) {
        for (std::size_t i = 0; i < kBatch; ++i) visit(ordinal++, batch[i]);
        pending = 0;
      }
    }
  }
  for (std::size_t i = 0; i < pending; ++i) visit(ordinal++, batch[i]);
}

// Marks the selection of `tensor` of `layout`; `k` is its SparseCount.
Selection SelectTensor(const CodecContext& context, const TensorLayout& layout, std::size_t tensor,
                       std::size_t k, std::span<std::byte> scratch) {
  const std::size_t size = layout.size(tensor);
  return MarkSelection(context, tensor, static_cast<std::uint32_t>(size),
                       static_cast<std::uint32_t>(k), BitmapOf(scratch, size));
}

}  // namespace

Result<std::size_t> RandKCodec::SelectedIndices(const CodecParams& params,
                                                const TensorLayout& layout,
                                                const CodecContext& context, std::size_t tensor,
                                                std::span<std::uint32_t> indices,
                                                std::span<std::byte> scratch) {
  EDGESGD_TRY(Shape(params, layout).status());
  if (tensor >= layout.tensor_count()) return Status::InvalidArgument();
  EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(tensor), params.k_ratio));
  if (indices.size() < k || scratch.size() < ScratchBytes(params, layout)) {
    return Status::ResourceExhausted();
  }
  EDGESGD_TRY(CheckScratchAlignment(scratch));
  const Selection selection = SelectTensor(context, layout, tensor, k, scratch);
  ForEachSelected(
      selection, [](std::uint32_t) {},
      [&](std::size_t n, std::uint32_t index) { indices[n] = index; });
  return k;
}

Status RandKCodec::Encode(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context, std::span<const float> input,
                          const PayloadSpans& out, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, Shape(params, layout));
  EDGESGD_TRY(
      internal::CheckEncodeArgs(layout, input, out, shape, scratch, ScratchBytes(params, layout)));
  EDGESGD_TRY(CheckScratchAlignment(scratch));
  std::size_t first_value = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(t), params.k_ratio));
    const std::span<const float> x = layout.Slice(input, t);
    const std::span<float> values = out.values.subspan(first_value, k);
    const Selection selection = SelectTensor(context, layout, t, k, scratch);
    const auto prefetch = [&](std::uint32_t index) { PrefetchForRead(&x[index]); };
    if (params.rand_k_scaling == RandKScaling::kUnbiased) {
      const float scale = ValueScale(params.rand_k_scaling, x.size(), k);
      ForEachSelected(selection, prefetch,
                      [&](std::size_t n, std::uint32_t index) { values[n] = x[index] * scale; });
    } else {
      // A plain copy keeps the values' bits (x * 1 would quieten signalling NaNs).
      ForEachSelected(selection, prefetch,
                      [&](std::size_t n, std::uint32_t index) { values[n] = x[index]; });
    }
    first_value += k;
  }
  return Status::Ok();
}

Status RandKCodec::DecodeAdd(const CodecParams& params, const TensorLayout& layout,
                             const CodecContext& context, const PayloadView& payload, float weight,
                             std::span<float> accumulator, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, Shape(params, layout));
  EDGESGD_TRY(internal::CheckDecodeArgs(layout, payload, shape, accumulator, scratch,
                                        ScratchBytes(params, layout)));
  EDGESGD_TRY(CheckScratchAlignment(scratch));
  // The indices come from the shared seed, so the only thing to verify is the values.
  if (!internal::AllFinite(payload.values)) return Status::DataLoss();
  std::size_t first_value = 0;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    EDGESGD_TRY_ASSIGN(const std::size_t k, SparseCount(layout.size(t), params.k_ratio));
    const std::span<float> acc = layout.Slice(accumulator, t);
    const std::span<const float> values = payload.values.subspan(first_value, k);
    const Selection selection = SelectTensor(context, layout, t, k, scratch);
    ForEachSelected(
        selection, [&](std::uint32_t index) { PrefetchForWrite(&acc[index]); },
        [&](std::size_t n, std::uint32_t index) { acc[index] += weight * values[n]; });
    first_value += k;
  }
  return Status::Ok();
}

}  // namespace edgesgd
