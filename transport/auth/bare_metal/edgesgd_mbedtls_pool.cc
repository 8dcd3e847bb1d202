// mbed TLS's allocator on bare metal (edgesgd_mbedtls_config.h names these two functions): blocks
// from one static pool, kBareMetalCryptoPoolBytes, taken in order and given back in reverse. A
// block freed while later ones are still in use is marked and returned with them; the digest
// states this serves are made once at start-up and live as long as their connections, so the
// pool never fragments in practice. Out of room, calloc returns null, which mbed TLS reports
// as an allocation failure (HmacSha256::Init: kResourceExhausted).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "edgesgd/auth/hmac_sha256.h"

namespace {

// The pool in 8-byte words (mbed TLS's structures need no more alignment); a block is a header
// word followed by its words.
using Word = std::uint64_t;

// A block's header word: its length in words, header included, and kFreed once freed.
constexpr Word kFreed = Word{1} << 32;

Word pool[edgesgd::auth::kBareMetalCryptoPoolBytes / sizeof(Word)];
std::size_t pool_top = 0;  // words in use, from the start of the pool

std::size_t BlockWords(std::size_t header) {
  return static_cast<std::size_t>(pool[header] & 0xFFFFFFFFu);
}

}  // namespace

extern "C" void* edgesgd_mbedtls_calloc(std::size_t count, std::size_t size) {
  if (count == 0 || size == 0 || size > sizeof(pool) / count) return nullptr;
  const std::size_t words = 1 + (count * size + sizeof(Word) - 1) / sizeof(Word);
  if (words > std::size(pool) - pool_top) return nullptr;
  pool[pool_top] = words;
  Word* block = &pool[pool_top + 1];
  pool_top += words;
  std::memset(block, 0, (words - 1) * sizeof(Word));
  return block;
}

extern "C" void edgesgd_mbedtls_free(void* block) {
  if (block == nullptr) return;
  const auto word = static_cast<std::size_t>(static_cast<Word*>(block) - pool);
  pool[word - 1] |= kFreed;
  // Give back the freed blocks at the top of the pool, last first (blocks are found by walking
  // the headers from the pool's start: there are a handful).
  while (pool_top > 0) {
    std::size_t last = 0;
    for (std::size_t at = 0; at < pool_top; at += BlockWords(at)) last = at;
    if ((pool[last] & kFreed) == 0) break;
    pool_top = last;
  }
}
