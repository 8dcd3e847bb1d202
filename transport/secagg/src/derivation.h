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

// The key sealing the shares `from` sends `to` in `round`, from either side's view: the
// agreement of one's own cipher private key with the other's cipher public key.
Status SharesKey(const Key& own_cipher_private, const Key& other_cipher_public, std::uint64_t round,
                 std::uint32_t from, std::uint32_t to, Key& out);

// The seed of the mask two devices add with opposite signs: the agreement of their mask keys,
// bound to the round and to the unordered pair.
Status PairMaskSeed(const Key& own_mask_private, const Key& other_mask_public, std::uint64_t round,
                    std::uint32_t a, std::uint32_t b, Key& out);

// The lower id adds the pair's mask, the higher one subtracts it.
constexpr MaskSign PairMaskSign(std::uint32_t self, std::uint32_t other) {
  return self < other ? MaskSign::kAdd : MaskSign::kSubtract;
}

}  // namespace edgesgd::secagg::internal
