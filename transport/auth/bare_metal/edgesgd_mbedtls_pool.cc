// mbed TLS's allocator on bare metal (edgesgd_mbedtls_config.h names these two functions): blocks
// from one static pool of kPoolBytes, first fit. Freed neighbours merge as the
// blocks are walked, and free blocks at the top of the pool go back to it, so the bignum
// temporaries of a key agreement (thousands of short-lived blocks around a few that grow) reuse
// the same words. Out of room, calloc returns null, which mbed TLS reports as an allocation
// failure (HmacSha256::Init and secure aggregation's key agreement: kResourceExhausted).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "edgesgd_mbedtls_pool.h"

namespace {

// The pool in 8-byte words (mbed TLS's structures need no more alignment); a block is a header
// word followed by its words.
using Word = std::uint64_t;

// A block's header word: its length in words, header included, and kFreed while free.
constexpr Word kFreed = Word{1} << 32;

Word pool[edgesgd::mbedtls_pool::kPoolBytes / sizeof(Word)];
std::size_t pool_top = 0;   // words in blocks, from the start of the pool
std::size_t pool_peak = 0;  // the highest pool_top so far

std::size_t BlockWords(std::size_t header) {
  return static_cast<std::size_t>(pool[header] & 0xFFFFFFFFu);
}
bool IsFree(std::size_t header) { return (pool[header] & kFreed) != 0; }

// Merges the free blocks that follow the free block at `header` into it.
void MergeFollowing(std::size_t header) {
  std::size_t words = BlockWords(header);
  while (header + words < pool_top && IsFree(header + words)) {
    words += BlockWords(header + words);
  }
  pool[header] = kFreed | words;
}

}  // namespace

extern "C" void* edgesgd_mbedtls_calloc(std::size_t count, std::size_t size) {
  if (count == 0 || size == 0 || size > sizeof(pool) / count) return nullptr;
  const std::size_t words = 1 + (count * size + sizeof(Word) - 1) / sizeof(Word);
  std::size_t at = 0;
  for (; at < pool_top; at += BlockWords(at)) {
    if (!IsFree(at)) continue;
    MergeFollowing(at);
    const std::size_t free_words = BlockWords(at);
    if (free_words < words) continue;
    if (free_words > words) pool[at + words] = kFreed | (free_words - words);  // the rest
    break;
  }
  if (at == pool_top) {
    if (words > std::size(pool) - pool_top) return nullptr;
    pool_top += words;
    if (pool_top > pool_peak) pool_peak = pool_top;
  }
  pool[at] = words;
  Word* block = &pool[at + 1];
  std::memset(block, 0, (words - 1) * sizeof(Word));
  return block;
}

namespace edgesgd::mbedtls_pool {
std::size_t PeakBytes() { return pool_peak * sizeof(Word); }
}  // namespace edgesgd::mbedtls_pool

extern "C" void edgesgd_mbedtls_free(void* block) {
  if (block == nullptr) return;
  const auto header = static_cast<std::size_t>(static_cast<Word*>(block) - pool) - 1;
  pool[header] |= kFreed;
  // A free run that reaches the top goes back to the pool.
  for (std::size_t at = 0; at < pool_top; at += BlockWords(at)) {
    if (!IsFree(at)) continue;
    MergeFollowing(at);
    if (at + BlockWords(at) == pool_top) pool_top = at;
  }
}
