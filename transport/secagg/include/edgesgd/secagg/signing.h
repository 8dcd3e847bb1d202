#pragma once

// Signed secure-aggregation rounds (Bonawitz et al. 2017's active-adversary variant): each device
// signs its key advertisement and, before it reveals any share, the survivor set the server
// announced; it reveals only once at least t of its neighbourhood signed that same set. A server
// that tells devices different survivor sets, or that swaps a device's keys for its own, is then
// caught by the honest devices instead of learning both of a device's secrets.
//
// The state machines see signatures through two small interfaces, so where the keys live is the
// driver's choice: the ECDSA P-256 keys of `edgesgd keygen` (ecdsa.h), a secure element, or the
// simulator's generated keys. What is signed is a SHA-256 statement built here, the same on both
// ends.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/status.h"
#include "edgesgd/secagg/crypto.h"
#include "edgesgd/secagg/messages.h"

namespace edgesgd::secagg {

// Signs statements with this device's long-term key.
class Signer {
 public:
  // Errors: kInternal / kResourceExhausted from the signing primitive.
  virtual Status Sign(const Digest& statement, Signature& signature) const = 0;

 protected:
  ~Signer() = default;
};

// Checks other devices' signatures against their long-term public keys, which the verifier got
// from its own trusted source (never from the server's messages).
class Verifier {
 public:
  // Errors: kNotFound for a device it has no key for; kUnauthenticated for a signature that does
  // not verify.
  virtual Status Verify(std::uint32_t signer, const Digest& statement,
                        const Signature& signature) const = 0;

 protected:
  ~Verifier() = default;
};

// A device's signing side: its signer and the verifier of its neighbours' keys.
struct DeviceSigning {
  const Signer* signer = nullptr;
  const Verifier* verifier = nullptr;
};

// What a device signs with its advertisement: SHA-256 of a label, the round, its id and both of
// its public keys.
Digest KeysStatement(std::uint64_t round, std::uint32_t device, const KeyAdvertisement& keys);

// What a device signs before unmasking: SHA-256 of a label, the round and the survivor set (the
// ids of every device whose masked input the server summed, strictly increasing).
Digest SurvivorsStatement(std::uint64_t round, std::span<const std::uint32_t> survivors);

// Whether `ids` is strictly increasing (a survivor set's one encoding).
bool StrictlyIncreasing(std::span<const std::uint32_t> ids);

}  // namespace edgesgd::secagg
