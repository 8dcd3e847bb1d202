#include "derivation.h"

#include <algorithm>
#include <string_view>

namespace edgesgd::secagg::internal {
namespace {

// HKDF(X25519(own_private, other_public), label, context); the shared secret is wiped.
Status AgreeAndDerive(const Key& own_private, const Key& other_public, std::string_view label,
                      const PairContext& context, Key& out) {
  Key shared;
  Status status = AgreeSecret(own_private, other_public, shared);
  if (status.ok()) {
    status = DeriveKey(shared, std::as_bytes(std::span(label.data(), label.size())), context, out);
  }
  Wipe(shared);
  return status;
}

}  // namespace

PairContext MakePairContext(std::uint64_t round, std::uint32_t first, std::uint32_t second) {
  PairContext context;
  for (std::size_t i = 0; i < 8; ++i) context[i] = static_cast<std::byte>(round >> (8 * i));
  for (std::size_t i = 0; i < 4; ++i) context[8 + i] = static_cast<std::byte>(first >> (8 * i));
  for (std::size_t i = 0; i < 4; ++i) context[12 + i] = static_cast<std::byte>(second >> (8 * i));
  return context;
}

Status SharesKey(const Key& own_cipher_private, const Key& other_cipher_public, std::uint64_t round,
                 std::uint32_t from, std::uint32_t to, Key& out) {
  return AgreeAndDerive(own_cipher_private, other_cipher_public, "shares",
                        MakePairContext(round, from, to), out);
}

Status PairMaskSeed(const Key& own_mask_private, const Key& other_mask_public, std::uint64_t round,
                    std::uint32_t a, std::uint32_t b, Key& out) {
  return AgreeAndDerive(own_mask_private, other_mask_public, "pair mask",
                        MakePairContext(round, std::min(a, b), std::max(a, b)), out);
}

}  // namespace edgesgd::secagg::internal
