#pragma once

// The key derivations both ends of secure aggregation must agree on, in one place.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/secagg/crypto.h"

namespace edgesgd::secagg::internal {

// round || first || second, little-endian: the context of a derived key, and the associated data
// of sealed shares (binding them to their round, sender and receiver).
using PairContext = std::array<std::byte, 16>;
PairContext MakePairContext(std::uint64_t round, std::uint32_t first, std::uint32_t second);

// The two keys of the shares `self` and `other` exchange in `round`, from one agreement of
// `self`'s cipher private key with `other`'s cipher public key: `sealing` for the shares `self`
// sends `other`, `opening` for those `other` sends `self` (which `other` derives as its sealing
// key).
Status SharesKeys(const Key& own_cipher_private, const Key& other_cipher_public,
                  std::uint64_t round, std::uint32_t self, std::uint32_t other, Key& sealing,
                  Key& opening);

// The seed of the mask two devices add with opposite signs: the agreement of their mask keys,
// bound to the round and to the unordered pair.
Status PairMaskSeed(const Key& own_mask_private, const Key& other_mask_public, std::uint64_t round,
                    std::uint32_t a, std::uint32_t b, Key& out);

// The lower id adds the pair's mask, the higher one subtracts it.
constexpr MaskSign PairMaskSign(std::uint32_t self, std::uint32_t other) {
  return self < other ? MaskSign::kAdd : MaskSign::kSubtract;
}

}  // namespace edgesgd::secagg::internal
