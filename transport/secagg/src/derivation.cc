#include "derivation.h"

#include <algorithm>
#include <string_view>

namespace edgesgd::secagg::internal {
namespace {

constexpr std::string_view kSharesLabel = "shares";
constexpr std::string_view kPairMaskLabel = "pair mask";

std::span<const std::byte> LabelBytes(std::string_view label) {
  return std::as_bytes(std::span(label.data(), label.size()));
}

}  // namespace

PairContext MakePairContext(std::uint64_t round, std::uint32_t first, std::uint32_t second) {
  PairContext context;
  for (std::size_t i = 0; i < 8; ++i) context[i] = static_cast<std::byte>(round >> (8 * i));
  for (std::size_t i = 0; i < 4; ++i) context[8 + i] = static_cast<std::byte>(first >> (8 * i));
  for (std::size_t i = 0; i < 4; ++i) context[12 + i] = static_cast<std::byte>(second >> (8 * i));
  return context;
}

Status SharesKeys(const Key& own_cipher_private, const Key& other_cipher_public,
                  std::uint64_t round, std::uint32_t self, std::uint32_t other, Key& sealing,
                  Key& opening) {
  Key shared;
  Status status = AgreeSecret(own_cipher_private, other_cipher_public, shared);
  if (status.ok()) {
    status = DeriveKey(shared, LabelBytes(kSharesLabel), MakePairContext(round, self, other),
                       sealing);
  }
  if (status.ok()) {
    status = DeriveKey(shared, LabelBytes(kSharesLabel), MakePairContext(round, other, self),
                       opening);
  }
  Wipe(shared);
  return status;
}

Status PairMaskSeed(const Key& own_mask_private, const Key& other_mask_public, std::uint64_t round,
                    std::uint32_t a, std::uint32_t b, Key& out) {
  Key shared;
  Status status = AgreeSecret(own_mask_private, other_mask_public, shared);
  if (status.ok()) {
    status = DeriveKey(shared, LabelBytes(kPairMaskLabel),
                       MakePairContext(round, std::min(a, b), std::max(a, b)), out);
  }
  Wipe(shared);
  return status;
}

}  // namespace edgesgd::secagg::internal
