#pragma once

// What the secure-aggregation phases exchange, as plain values. A device only ever talks to the
// server; what one device has for another (its encrypted shares) travels through the server
// sealed. The sessions carry these in their frames.
//
//   phase              device -> server                  server -> device
//   0 advertise keys   KeyAdvertisement                  its neighbours' RosterEntry list
//   1 share keys       commitment + one SealedShares     the SealedShares its neighbours sent it
//                      per neighbour
//   2 masked input     the masked vector (Z_2^32 words)  the neighbours whose inputs arrived
//   3 unmasking        one RevealedShare per neighbour   (the server removes the masks)
//                      that shared, and one for itself
//
// Signed rounds (signing.h) sign the advertisement (and the roster carries each neighbour's
// signature), and add a consistency check between phases 2 and 3: the survivor list is then the
// whole survivor set, each device answers it with its signature of the set, and the server sends
// each device its neighbours' signatures (SurvivorSignature) before it reveals anything.

#include <array>
#include <cstddef>
#include <cstdint>

#include "edgesgd/secagg/crypto.h"
#include "edgesgd/secagg/shamir.h"

namespace edgesgd::secagg {

// Two fresh X25519 public keys: one to agree share-encryption keys, one to agree mask seeds.
struct KeyAdvertisement {
  Key cipher_public{};
  Key mask_public{};
  Signature signature{};  // of KeysStatement, in signed rounds; zeros otherwise
};

// A neighbour as the server introduces it: its id, the point at which shares for it are
// evaluated (its position in the cohort plus one), and its advertised keys.
struct RosterEntry {
  std::uint32_t device = 0;
  std::uint32_t share_point = 0;
  Key cipher_public{};
  Key mask_public{};
  Signature keys_signature{};  // the neighbour's signature of its advertisement (signed rounds)
};

// One device's shares for another: the self-mask seed's share and the mask key's share,
// sealed under a key only the two of them can derive. `device` is the receiver on the way to the
// server and the sender on the way from it.
inline constexpr std::size_t kSharePairBytes = 2 * kShareBytes;
inline constexpr std::size_t kSealedSharesBytes = kSharePairBytes + kAeadTagBytes;
struct SealedShares {
  std::uint32_t device = 0;
  std::array<std::byte, kSealedSharesBytes> sealed{};
};

// What a device reveals about one holder of its shares' owner: the share of the self-mask seed
// when the owner's input arrived, the share of its mask key when it did not — never both.
enum class SecretKind : std::uint8_t { kSelfMaskSeed = 0, kMaskKey = 1 };
struct RevealedShare {
  std::uint32_t owner = 0;
  SecretKind kind = SecretKind::kSelfMaskSeed;
  Share share;
};

// A device's signature of the round's survivor set, forwarded to its neighbours.
struct SurvivorSignature {
  std::uint32_t device = 0;
  Signature signature{};
};

}  // namespace edgesgd::secagg
