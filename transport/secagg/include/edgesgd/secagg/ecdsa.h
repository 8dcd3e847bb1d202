#pragma once

// ECDSA over P-256 (FIPS 186-4, deterministic nonces as RFC 6979) from mbed TLS: the long-term
// keys that sign secure-aggregation rounds (signing.h). A signing key is a 32-byte big-endian
// scalar; a verifying key is the public point, uncompressed (0x04 || X || Y, 65 bytes).
//
// Heap: mbed TLS's bignums take short-lived blocks from the C heap, freed before each call
// returns (as for X25519, crypto.h).

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/status.h"
#include "edgesgd/secagg/crypto.h"
#include "edgesgd/secagg/signing.h"

namespace edgesgd::secagg {

inline constexpr std::size_t kVerifyingKeyBytes = 65;
using SigningKey = Key;
using VerifyingKey = std::array<std::byte, kVerifyingKeyBytes>;

// A device's verifying key, as a ring of them lists it.
struct DeviceVerifyingKey {
  std::uint32_t device = 0;
  VerifyingKey key{};
};

// A fresh signing key from `random`, and its verifying key.
// Errors: kInternal from mbed TLS; kResourceExhausted if its bignums cannot be allocated.
Status GenerateSigningKey(SecretRandom& random, SigningKey& signing, VerifyingKey& verifying);

// The verifying key of a signing key. Errors: kInvalidArgument for a scalar outside [1, n - 1].
Status VerifyingKeyOf(const SigningKey& signing, VerifyingKey& verifying);

// Whether `key` is a point of P-256 (kInvalidArgument otherwise): run on every key loaded.
Status CheckVerifyingKey(const VerifyingKey& key);

class EcdsaSigner final : public Signer {
 public:
  explicit EcdsaSigner(const SigningKey& key) : key_(key) {}
  ~EcdsaSigner() { Wipe(key_); }
  EcdsaSigner(const EcdsaSigner&) = delete;
  EcdsaSigner& operator=(const EcdsaSigner&) = delete;

  Status Sign(const Digest& statement, Signature& signature) const override;

 private:
  SigningKey key_;
};

// Verifies against a ring of keys sorted by device id (the caller keeps it alive).
class EcdsaVerifier final : public Verifier {
 public:
  // Errors: kInvalidArgument when the ring is not strictly increasing in device id.
  static Status CheckRing(std::span<const DeviceVerifyingKey> ring);

  explicit EcdsaVerifier(std::span<const DeviceVerifyingKey> ring) : ring_(ring) {}

  Status Verify(std::uint32_t signer, const Digest& statement,
                const Signature& signature) const override;

 private:
  std::span<const DeviceVerifyingKey> ring_;
};

}  // namespace edgesgd::secagg
