#pragma once

// The primitives secure aggregation is built from, all of them mbed TLS's: X25519 key agreement
// (RFC 7748), HKDF-SHA256 (RFC 5869), the ChaCha20 keystream as the mask generator and as the
// devices' secret random source, ChaCha20-Poly1305 (RFC 8439) for the shares one device sends
// another through the server, and SHA-256 commitments. This file holds no cryptography of its
// own: it fixes the encodings (little-endian keys, mask words) and the labels that separate one
// derived key from another.
//
// Heap: ChaCha20, Poly1305 and SHA-256 never allocate. X25519 runs on mbed TLS's bignums and
// HKDF on its HMAC context, which take short-lived blocks from the C heap (Debian's build has no
// static-buffer allocator); they are freed before each call returns.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/status.h"

namespace edgesgd::secagg {

inline constexpr std::size_t kKeyBytes = 32;
inline constexpr std::size_t kAeadTagBytes = 16;

// An X25519 key (private scalar or public u-coordinate, little-endian), a shared secret, a
// derived symmetric key or a random seed: 32 bytes each.
using Key = std::array<std::byte, kKeyBytes>;
using Digest = std::array<std::byte, kKeyBytes>;
// A signature of a statement (signing.h): ECDSA P-256's r then s, big-endian.
inline constexpr std::size_t kSignatureBytes = 64;
using Signature = std::array<std::byte, kSignatureBytes>;

// A secret random source: the ChaCha20 keystream under `key` (nonce zero). Each round a device
// draws its keys, its self-mask seed and its Shamir coefficients from one such stream, keyed by
// entropy its driver supplies (getrandom on Linux; a seed-derived key in the simulator).
class SecretRandom {
 public:
  explicit SecretRandom(const Key& key);
  ~SecretRandom();  // zeroizes the key and the unread keystream
  SecretRandom(const SecretRandom&) = delete;
  SecretRandom& operator=(const SecretRandom&) = delete;

  void Fill(std::span<std::byte> out);
  std::uint32_t NextWord();

 private:
  void Refill();

  Key key_;
  std::uint32_t next_block_ = 0;
  std::array<std::byte, 64> block_{};
  std::size_t used_ = 64;
};

struct KeyPair {
  Key private_key{};
  Key public_key{};
};

// A fresh X25519 key pair from `random`.
// Errors: kInternal if mbed TLS fails; kResourceExhausted if its bignums cannot be allocated.
Status GenerateKeyPair(SecretRandom& random, KeyPair& out);

// The public key of an X25519 private key (used to check a reconstructed private key against the
// public key its owner advertised).
Status PublicKeyOf(const Key& private_key, Key& public_key);

// An X25519 private key as a secret Shamir sharing holds (at most 252 bits): the 251 bits that
// RFC 7748's clamping leaves free (bits 3..253), and the clamped key rebuilt from them, which has
// the same public key and agrees the same secrets.
Key PrivateKeyToSecret(const Key& private_key);
Key PrivateKeyFromSecret(const Key& secret);

// X25519(private_key, peer_public): the shared secret. The peer's key is decoded as RFC 7748
// says (top bit ignored); a result of all zeros (a low-order peer key) is refused.
// Errors: kInvalidArgument for a peer key mbed TLS rejects or an all-zero result; kInternal.
Status AgreeSecret(const Key& private_key, const Key& peer_public, Key& shared);

// HKDF-SHA256(salt = "edgesgd secure aggregation", ikm = shared, info = label || context).
Status DeriveKey(const Key& shared, std::span<const std::byte> label,
                 std::span<const std::byte> context, Key& out);

// Adds (sign +1) or subtracts (sign -1) the mask PRG(seed) to `words` modulo 2^32: word i of the
// mask is bytes 4i..4i+3 of the ChaCha20 keystream under `seed`, little-endian.
enum class MaskSign : std::int8_t { kAdd = 1, kSubtract = -1 };
void ApplyMask(const Key& seed, MaskSign sign, std::span<std::uint32_t> words);

// ChaCha20-Poly1305 with a key used for exactly one message (every sealing key is derived for one
// sender, receiver and round), hence the constant nonce. `sealed` is plaintext.size() +
// kAeadTagBytes long: ciphertext then tag.
Status Seal(const Key& key, std::span<const std::byte> associated_data,
            std::span<const std::byte> plaintext, std::span<std::byte> sealed);
// Errors: kUnauthenticated when the tag does not match (tampered, misaddressed or replayed from
// another round); kInvalidArgument for mismatched lengths.
Status Open(const Key& key, std::span<const std::byte> associated_data,
            std::span<const std::byte> sealed, std::span<std::byte> plaintext);

// SHA-256 of `bytes`.
Digest Sha256(std::span<const std::byte> bytes);

// Whether two keys or digests are equal, in time independent of where they differ.
bool SecretsEqual(std::span<const std::byte> a, std::span<const std::byte> b);

// Overwrites a secret with zeros in a way the compiler cannot drop.
void Wipe(std::span<std::byte> secret);

}  // namespace edgesgd::secagg
