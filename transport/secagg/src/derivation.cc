#include "derivation.h"

#include <algorithm>
#include <string_view>

namespace edgesgd::secagg::internal {
namespace {

std::span<const std::byte> Label(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
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
  Key shared;
  const Status agreed = AgreeSecret(own_cipher_private, other_cipher_public, shared);
  if (agreed.ok()) {
    const PairContext context = MakePairContext(round, from, to);
    const Status derived = DeriveKey(shared, Label("shares"), context, out);
    Wipe(shared);
    return derived;
  }
  return agreed;
}

Status PairMaskSeed(const Key& own_mask_private, const Key& other_mask_public, std::uint64_t round,
                    std::uint32_t a, std::uint32_t b, Key& out) {
  Key shared;
  const Status agreed = AgreeSecret(own_mask_private, other_mask_public, shared);
  if (agreed.ok()) {
    const PairContext context = MakePairContext(round, std::min(a, b), std::max(a, b));
    const Status derived = DeriveKey(shared, Label("pair mask"), context, out);
    Wipe(shared);
    return derived;
  }
  return agreed;
}

}  // namespace edgesgd::secagg::internal
