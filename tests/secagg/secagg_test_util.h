#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/status.h"
#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/crypto.h"
#include "edgesgd/secagg/server.h"
#include "edgesgd/secagg/signing.h"

namespace edgesgd::secagg::testing {

inline Key KeyFromHex(std::string_view hex) {
  Key key{};
  for (std::size_t i = 0; i < key.size(); ++i) {
    auto nibble = [](char c) { return static_cast<unsigned>(c <= '9' ? c - '0' : c - 'a' + 10); };
    key[i] = static_cast<std::byte>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  }
  return key;
}

// A distinct, fixed key per (label, a, b): test entropy.
inline Key TestKey(std::uint32_t label, std::uint64_t a, std::uint64_t b = 0) {
  Key key{};
  for (std::size_t i = 0; i < 4; ++i) key[i] = static_cast<std::byte>(label >> (8 * i));
  for (std::size_t i = 0; i < 8; ++i) key[4 + i] = static_cast<std::byte>(a >> (8 * i));
  for (std::size_t i = 0; i < 8; ++i) key[12 + i] = static_cast<std::byte>(b >> (8 * i));
  return Sha256(key);
}

// A 252-bit secret, as Shamir shares them.
inline Key SharableKey(std::uint32_t label, std::uint64_t a) {
  Key key = TestKey(label, a);
  key[kKeyBytes - 1] &= std::byte{0x0F};
  return key;
}

// The phase from which a test's device falls silent.
enum Phase { kKeys = 0, kShares = 1, kInputs = 2, kUnmasking = 3 };

// A round's plan with a fixed graph seed.
inline RoundPlan Plan(std::uint64_t round, std::uint32_t threshold, std::uint32_t words,
                      std::uint32_t neighbours = 0) {
  return RoundPlan{round, threshold, neighbours, /*graph_seed=*/99, words};
}

// Device `id`'s turn in the sharing phase: its roster from the server, `edit` (a test's
// meddling, if any) applied to it, then its shares and commitment handed back to the server.
template <typename Edit>
Status ShareKeys(Server& server, Client& client, std::uint32_t id, std::uint32_t threshold,
                 std::vector<RosterEntry>& roster, std::vector<SealedShares>& sealed, Edit edit) {
  std::uint32_t point = 0;
  EDGESGD_TRY_ASSIGN(const std::size_t count, server.RosterFor(id, point, roster));
  edit(std::span(roster).first(count));
  Digest commitment;
  EDGESGD_TRY_ASSIGN(
      const std::size_t written,
      client.ShareKeys(threshold, point, {roster.data(), count}, commitment, sealed));
  return server.AddShares(id, commitment, {sealed.data(), written});
}

// A fast stand-in for ECDSA where many rounds run: a device's signature is a keyed hash only
// it (and the tests playing colluders) computes. The verifier recomputes it.
inline Signature TestSignature(std::uint32_t device, const Digest& statement) {
  std::array<std::byte, 4 + kKeyBytes> material{};
  for (std::size_t i = 0; i < 4; ++i) material[i] = static_cast<std::byte>(device >> (8 * i));
  std::copy(statement.begin(), statement.end(), material.begin() + 4);
  const Digest digest = Sha256(material);
  Signature signature{};
  std::copy(digest.begin(), digest.end(), signature.begin());
  return signature;
}

class TestSigner final : public Signer {
 public:
  explicit TestSigner(std::uint32_t device) : device_(device) {}
  Status Sign(const Digest& statement, Signature& signature) const override {
    signature = TestSignature(device_, statement);
    return Status::Ok();
  }

 private:
  std::uint32_t device_;
};

class TestVerifier final : public Verifier {
 public:
  Status Verify(std::uint32_t signer, const Digest& statement,
                const Signature& signature) const override {
    return signature == TestSignature(signer, statement)
               ? Status::Ok()
               : Status::Unauthenticated("test signature mismatch");
  }
};

// Arena storage for the clients and servers of a test, alive as long as this object.
class Arenas {
 public:
  template <typename Party, typename Limits>
  Status Init(Party& party, const Limits& limits) {
    std::vector<std::byte>& bytes =
        storage_.emplace_back(Party::ArenaBytes(limits) + kArenaAlignment);
    Arena arena(bytes);
    return party.Init(arena, limits);
  }

 private:
  std::vector<std::vector<std::byte>> storage_;  // moving a vector keeps its bytes in place
};

}  // namespace edgesgd::secagg::testing
