#pragma once

// HMAC-SHA256 (RFC 2104, FIPS 180-4) through mbed TLS's message-digest layer, with the key
// loaded once and reused for any number of messages, and a constant-time tag comparison.

#include <cstddef>
#include <initializer_list>
#include <span>

#include "edgesgd/auth/auth_format.h"
#include "edgesgd/core/status.h"

// mbed TLS's context, forward-declared so users of this header need not see mbed TLS's headers.
extern "C" {
struct mbedtls_md_context_t;
}

namespace edgesgd::auth {

// One HMAC-SHA256 key and the state to authenticate messages with it. Init() allocates mbed
// TLS's digest state (three small blocks, from the heap, or on bare metal from a static pool)
// and is the only call that allocates; every other call works in that state. Not copyable (the
// state holds a key); movable.
class HmacSha256 {
 public:
  HmacSha256();
  ~HmacSha256();  // zeroizes and frees the state
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;
  HmacSha256(HmacSha256&& other) noexcept;
  HmacSha256& operator=(HmacSha256&& other) noexcept;

  // Sets up the digest state; once per object (a second call is kFailedPrecondition).
  // Errors: kResourceExhausted if the allocation fails (on bare metal: the pool is used up);
  // kInternal if mbed TLS lacks SHA-256.
  Status Init();
  bool initialized() const;

  // Loads `key` (any length; keys longer than the 64-byte block are hashed first, as RFC 2104
  // says) for the following Mac calls. Does not allocate.
  // Errors: kFailedPrecondition before Init; kInternal if mbed TLS fails.
  Status SetKey(std::span<const std::byte> key);

  // Writes HMAC(key, concatenation of `parts`) to `tag`. Reads the parts; does not allocate.
  // Errors: kFailedPrecondition before Init or SetKey; kInternal if mbed TLS fails.
  Status Mac(std::initializer_list<std::span<const std::byte>> parts,
             std::span<std::byte, kTagBytes> tag);

 private:
  mbedtls_md_context_t* context_ = nullptr;  // null until Init; owned
  bool keyed_ = false;
};

// Whether `a` and `b` hold the same bytes, in time that depends on their length only (no early
// exit that would tell a forger how many leading bytes of a guessed tag were right). Spans of
// different lengths are unequal.
bool TagsEqual(std::span<const std::byte> a, std::span<const std::byte> b);

// Overwrites `bytes` with zeros in a way the compiler cannot drop as a dead store (keys and
// derived secrets on their way out of scope).
void Zeroize(std::span<std::byte> bytes);

}  // namespace edgesgd::auth
