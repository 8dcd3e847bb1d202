// Signed secure-aggregation rounds: ECDSA P-256 keys, signed advertisements, and the consistency
// check before unmasking — played against an honest server, a server that swaps keys, a server
// that tells devices different survivor sets (alone, and with colluding devices), and devices
// that sign wrongly or not at all.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/ecdsa.h"
#include "edgesgd/secagg/server.h"
#include "edgesgd/secagg/signing.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::secagg {
namespace {

using testing::Arenas;
using testing::KeyFromHex;
using testing::Plan;
using testing::ShareKeys;
using testing::TestKey;
using testing::TestSignature;
using testing::TestSigner;
using testing::TestVerifier;

std::span<const std::byte> AsBytes(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

// ---- ECDSA ----

// RFC 6979 A.2.5: P-256, SHA-256, message "sample" — the deterministic signature.
TEST(EcdsaTest, SignsTheRfc6979VectorAndVerifiesIt) {
  const SigningKey key =
      KeyFromHex("c9afa9d845ba75166b5c215767b1d6934e50c3db36e89b127b8a622b120f6721");
  const EcdsaSigner signer(key);
  Signature signature;
  ASSERT_TRUE(signer.Sign(Sha256(AsBytes("sample")), signature).ok());
  const Key r = KeyFromHex("efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716");
  const Key s = KeyFromHex("f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8");
  EXPECT_TRUE(std::equal(r.begin(), r.end(), signature.begin()));
  EXPECT_TRUE(std::equal(s.begin(), s.end(), signature.begin() + 32));

  VerifyingKey verifying;
  ASSERT_TRUE(VerifyingKeyOf(key, verifying).ok());
  const std::array<DeviceVerifyingKey, 1> ring{{{7, verifying}}};
  const EcdsaVerifier verifier(ring);
  EXPECT_TRUE(verifier.Verify(7, Sha256(AsBytes("sample")), signature).ok());
}

TEST(EcdsaTest, RefusesWrongStatementsKeysSignersAndPoints) {
  SecretRandom random(TestKey(1, 2));
  std::array<DeviceVerifyingKey, 2> ring;
  SigningKey first;
  SigningKey second;
  ASSERT_TRUE(GenerateSigningKey(random, first, ring[0].key).ok());
  ASSERT_TRUE(GenerateSigningKey(random, second, ring[1].key).ok());
  ring[0].device = 3;
  ring[1].device = 9;
  ASSERT_TRUE(EcdsaVerifier::CheckRing(ring).ok());
  const EcdsaVerifier verifier(ring);
  const Digest statement = Sha256(AsBytes("round 4"));
  Signature signature;
  ASSERT_TRUE(EcdsaSigner(first).Sign(statement, signature).ok());
  EXPECT_TRUE(verifier.Verify(3, statement, signature).ok());
  EXPECT_EQ(verifier.Verify(9, statement, signature).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(verifier.Verify(3, Sha256(AsBytes("round 5")), signature).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(verifier.Verify(4, statement, signature).code(), StatusCode::kNotFound);
  Signature tampered = signature;
  tampered[40] ^= std::byte{1};
  EXPECT_EQ(verifier.Verify(3, statement, tampered).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(verifier.Verify(3, statement, Signature{}).code(), StatusCode::kUnauthenticated);

  VerifyingKey off_curve = ring[0].key;
  off_curve[64] ^= std::byte{1};
  EXPECT_EQ(CheckVerifyingKey(off_curve).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckVerifyingKey(ring[1].key).ok());
  std::swap(ring[0], ring[1]);
  EXPECT_EQ(EcdsaVerifier::CheckRing(ring).code(), StatusCode::kInvalidArgument);
  VerifyingKey unused;
  EXPECT_EQ(VerifyingKeyOf(SigningKey{}, unused).code(), StatusCode::kInvalidArgument);
}

TEST(SigningStatementsTest, BindTheRoundTheDeviceTheKeysAndTheWholeSet) {
  KeyAdvertisement keys{TestKey(1, 1), TestKey(1, 2), {}};
  const Digest base = KeysStatement(4, 7, keys);
  EXPECT_NE(KeysStatement(5, 7, keys), base);
  EXPECT_NE(KeysStatement(4, 8, keys), base);
  keys.mask_public[0] ^= std::byte{1};
  EXPECT_NE(KeysStatement(4, 7, keys), base);
  keys.signature[0] = std::byte{1};  // the signature is not part of what it signs
  keys.mask_public[0] ^= std::byte{1};
  EXPECT_EQ(KeysStatement(4, 7, keys), base);

  const std::vector<std::uint32_t> set{1, 2, 5};
  const Digest survivors = SurvivorsStatement(4, set);
  EXPECT_NE(SurvivorsStatement(5, set), survivors);
  EXPECT_NE(SurvivorsStatement(4, std::vector<std::uint32_t>{1, 2}), survivors);
  EXPECT_NE(SurvivorsStatement(4, std::vector<std::uint32_t>{1, 2, 6}), survivors);
  EXPECT_TRUE(StrictlyIncreasing(set));
  EXPECT_FALSE(StrictlyIncreasing(std::vector<std::uint32_t>{1, 1, 2}));
}

// ---- Rounds ----

// A cohort of signing devices and an honest server, through the masked inputs; the tests then
// play the consistency check and the unmasking, honestly or not.
struct SignedFleet {
  SignedFleet(std::uint32_t n, std::uint32_t words, bool ecdsa) : clients(n) {
    for (std::uint32_t i = 0; i < n; ++i) {
      ids.push_back(10 + 3 * i);
      inputs.emplace_back(words, 1000u * (i + 1));
    }
    if (ecdsa) {
      SecretRandom random(TestKey(77, n));
      for (std::uint32_t i = 0; i < n; ++i) {
        SigningKey key;
        DeviceVerifyingKey& entry = ring.emplace_back();
        entry.device = ids[i];
        EXPECT_TRUE(GenerateSigningKey(random, key, entry.key).ok());
        ecdsa_signers.push_back(std::make_unique<EcdsaSigner>(key));
        signers.push_back(ecdsa_signers.back().get());
      }
      ecdsa_verifier = std::make_unique<EcdsaVerifier>(ring);
      verifier = ecdsa_verifier.get();
    } else {
      for (std::uint32_t i = 0; i < n; ++i)
        test_signers.push_back(std::make_unique<TestSigner>(ids[i]));
      for (const auto& signer : test_signers) signers.push_back(signer.get());
      verifier = &test_verifier;
    }
    EXPECT_TRUE(arenas.Init(server, ServerLimits{n, n - 1, words}).ok());
    EXPECT_TRUE(server.SetVerifier(verifier).ok());
    for (std::uint32_t i = 0; i < n; ++i) {
      EXPECT_TRUE(arenas.Init(clients[i], ClientLimits{n - 1, 2}).ok());
      EXPECT_TRUE(clients[i].SetSigning({signers[i], verifier}).ok());
    }
  }

  // Keys, shares and masked inputs, all honest; leaves the server collecting signatures.
  Status RunToInputs(const RoundPlan& plan) {
    const std::size_t n = ids.size();
    EDGESGD_TRY(server.Start(plan, ids));
    for (std::size_t i = 0; i < n; ++i) {
      KeyAdvertisement keys;
      EDGESGD_TRY(clients[i].Start(plan.round, ids[i], TestKey(5, plan.round, i), keys));
      EDGESGD_TRY(server.AddKeys(ids[i], keys));
    }
    EDGESGD_TRY(server.CloseKeys());
    std::vector<RosterEntry> roster(n);
    std::vector<SealedShares> sealed(n);
    for (std::size_t i = 0; i < n; ++i) {
      EDGESGD_TRY(ShareKeys(server, clients[i], ids[i], plan.threshold, roster, sealed,
                            [&](std::span<RosterEntry> listed) {
                              if (swap_keys_of_first && i == 1)
                                listed[0].mask_public = TestKey(9, 9);
                            }));
    }
    EDGESGD_TRY(server.CloseShares());
    for (std::size_t i = 0; i < n; ++i) {
      EDGESGD_TRY_ASSIGN(const std::size_t count, server.SharesFor(ids[i], sealed));
      EDGESGD_TRY(clients[i].ReceiveShares({sealed.data(), count}));
      std::vector<std::uint32_t> masked = inputs[i];
      EDGESGD_TRY(clients[i].MaskInput(masked));
      EDGESGD_TRY(server.AddMaskedInput(ids[i], masked));
    }
    return server.CloseInputs();
  }

  // The honest rest: the set, the signatures, the unmasking, the sum.
  Status FinishHonestly(const std::vector<std::size_t>& silent_signers = {}) {
    const std::size_t n = ids.size();
    std::vector<std::uint32_t> set(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (std::find(silent_signers.begin(), silent_signers.end(), i) != silent_signers.end()) {
        continue;
      }
      EDGESGD_TRY_ASSIGN(const std::size_t count, server.SurvivorsFor(ids[i], set));
      Signature signature;
      EDGESGD_TRY(clients[i].SignSurvivors({set.data(), count}, signature));
      EDGESGD_TRY(server.AddSignature(ids[i], signature));
    }
    EDGESGD_TRY(server.CloseSignatures());
    std::vector<SurvivorSignature> signatures(n);
    std::vector<RevealedShare> revealed(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!server.Expects(ids[i])) continue;
      EDGESGD_TRY_ASSIGN(const std::size_t count, server.SignaturesFor(ids[i], signatures));
      EDGESGD_TRY_ASSIGN(const std::size_t written,
                         clients[i].Unmask(std::span(signatures).first(count), revealed));
      EDGESGD_TRY(server.AddUnmasking(ids[i], std::span(revealed).first(written)));
    }
    return server.Finish();
  }

  std::vector<std::uint32_t> PlainSum() const {
    std::vector<std::uint32_t> sum(inputs[0].size(), 0);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!server.Survived(ids[i])) continue;
      for (std::size_t w = 0; w < sum.size(); ++w) sum[w] += inputs[i][w];
    }
    return sum;
  }

  std::vector<std::uint32_t> ids;
  std::vector<std::vector<std::uint32_t>> inputs;
  std::vector<DeviceVerifyingKey> ring;
  std::vector<std::unique_ptr<EcdsaSigner>> ecdsa_signers;
  std::unique_ptr<EcdsaVerifier> ecdsa_verifier;
  std::vector<std::unique_ptr<TestSigner>> test_signers;
  TestVerifier test_verifier;
  std::vector<const Signer*> signers;
  const Verifier* verifier = nullptr;
  Arenas arenas;  // before the parties it serves
  std::vector<Client> clients;
  Server server;
  bool swap_keys_of_first = false;  // the server hands device 1 a forged key of device 0
};

TEST(SignedRoundTest, AnHonestSignedRoundSumsExactly) {
  SignedFleet fleet(5, 17, /*ecdsa=*/true);
  ASSERT_TRUE(fleet.RunToInputs(Plan(3, 4, 17)).ok());
  EXPECT_EQ(fleet.server.phase(), Server::Phase::kCollectingSignatures);
  const Status finished = fleet.FinishHonestly();
  ASSERT_TRUE(finished.ok()) << finished.reason();
  EXPECT_EQ(std::vector<std::uint32_t>(fleet.server.sum().begin(), fleet.server.sum().end()),
            fleet.PlainSum());
}

TEST(SignedRoundTest, ADeviceThatDoesNotSignLeavesTheUnmaskingOnly) {
  SignedFleet fleet(6, 4, /*ecdsa=*/false);
  ASSERT_TRUE(fleet.RunToInputs(Plan(8, 4, 4)).ok());
  const Status finished = fleet.FinishHonestly({2});
  ASSERT_TRUE(finished.ok()) << finished.reason();
  // Its input is summed all the same: its seed is rebuilt from the others' shares.
  EXPECT_EQ(std::vector<std::uint32_t>(fleet.server.sum().begin(), fleet.server.sum().end()),
            fleet.PlainSum());
  EXPECT_TRUE(fleet.server.Survived(fleet.ids[2]));
}

TEST(SignedRoundTest, TooFewSignersAbortTheRound) {
  SignedFleet fleet(6, 4, /*ecdsa=*/false);
  ASSERT_TRUE(fleet.RunToInputs(Plan(8, 4, 4)).ok());
  EXPECT_EQ(fleet.FinishHonestly({0, 1, 2}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(fleet.server.phase(), Server::Phase::kAborted);
}

TEST(SignedRoundTest, AKeySwappedByTheServerIsRefusedBeforeAnythingIsShared) {
  SignedFleet fleet(4, 4, /*ecdsa=*/true);
  fleet.swap_keys_of_first = true;
  const Status status = fleet.RunToInputs(Plan(2, 3, 4));
  EXPECT_EQ(status.code(), StatusCode::kUnauthenticated) << status.reason();
  EXPECT_EQ(fleet.clients[1].phase(), Client::Phase::kAborted);
}

TEST(SignedRoundTest, TheServerRefusesUnsignedAndWronglySignedMessages) {
  SignedFleet fleet(4, 4, /*ecdsa=*/false);
  ASSERT_TRUE(fleet.server.Start(Plan(2, 3, 4), fleet.ids).ok());
  KeyAdvertisement keys{TestKey(1, 1), TestKey(1, 2), {}};
  EXPECT_EQ(fleet.server.AddKeys(fleet.ids[0], keys).code(), StatusCode::kUnauthenticated);
  keys.signature = TestSignature(fleet.ids[1], KeysStatement(2, fleet.ids[0], keys));
  EXPECT_EQ(fleet.server.AddKeys(fleet.ids[0], keys).code(), StatusCode::kUnauthenticated);
  keys.signature = TestSignature(fleet.ids[0], KeysStatement(2, fleet.ids[0], keys));
  EXPECT_TRUE(fleet.server.AddKeys(fleet.ids[0], keys).ok());

  SignedFleet second(4, 4, /*ecdsa=*/false);
  ASSERT_TRUE(second.RunToInputs(Plan(2, 3, 4)).ok());
  // A signature of another set (here, another round's) is refused; the device may still sign.
  const std::vector<std::uint32_t> all(second.ids.begin(), second.ids.end());
  EXPECT_EQ(
      second.server
          .AddSignature(second.ids[0], TestSignature(second.ids[0], SurvivorsStatement(3, all)))
          .code(),
      StatusCode::kUnauthenticated);
  EXPECT_TRUE(second.FinishHonestly().ok());
}

TEST(SignedRoundTest, AClientRefusesUnsignedUnmaskingAndBadSurvivorSets) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    SignedFleet fleet(4, 4, /*ecdsa=*/false);
    ASSERT_TRUE(fleet.RunToInputs(Plan(2, 3, 4)).ok());
    Client& client = fleet.clients[0];
    std::vector<RevealedShare> revealed(4);
    Signature signature;
    std::vector<std::uint32_t> set(fleet.ids.begin(), fleet.ids.end());
    switch (variant) {
      case 0:  // the unsigned unmasking, as a server skipping the check would ask
        EXPECT_EQ(client.Unmask(std::span<const std::uint32_t>(set), revealed).status().code(),
                  StatusCode::kFailedPrecondition);
        break;
      case 1:  // out of order
        std::swap(set[1], set[2]);
        EXPECT_EQ(client.SignSurvivors(set, signature).code(), StatusCode::kDataLoss);
        break;
      case 2:  // without the device itself
        set.erase(set.begin());
        EXPECT_EQ(client.SignSurvivors(set, signature).code(), StatusCode::kDataLoss);
        break;
      case 3:  // too few survivors for t
        set.resize(2);
        EXPECT_EQ(client.SignSurvivors(set, signature).code(), StatusCode::kFailedPrecondition);
        break;
    }
    EXPECT_EQ(client.phase(), Client::Phase::kAborted);
  }
}

// The survivor sets a lying server tells the devices, the devices' signatures, and what each
// device then reveals, given the signatures the server chooses to forward to it.
struct LyingServer {
  explicit LyingServer(SignedFleet& run) : fleet(run) {}

  // Tells device i the set views[i] and collects its signature (the device refuses a set it
  // cannot sign: then it simply has none).
  void Tell(const std::vector<std::vector<std::uint32_t>>& told) {
    views = told;
    signatures.assign(fleet.ids.size(), std::nullopt);
    for (std::size_t i = 0; i < fleet.ids.size(); ++i) {
      if (colluding(i)) continue;
      Signature signature;
      if (fleet.clients[i].SignSurvivors(views[i], signature).ok()) signatures[i] = signature;
    }
  }

  // Device i is forwarded every signature that verifies on its own set: the honest devices told
  // the same set, and the colluders, which sign whatever the server asks. Returns its reveal.
  std::vector<RevealedShare> Ask(std::size_t i, bool forward_everything = false) {
    std::vector<SurvivorSignature> forwarded;
    const Digest statement = SurvivorsStatement(round, views[i]);
    for (std::size_t j = 0; j < fleet.ids.size(); ++j) {
      if (j == i) continue;
      if (colluding(j)) {
        forwarded.push_back({fleet.ids[j], TestSignature(fleet.ids[j], statement)});
      } else if (signatures[j] && (forward_everything || views[j] == views[i])) {
        forwarded.push_back({fleet.ids[j], *signatures[j]});
      }
    }
    std::vector<RevealedShare> revealed(fleet.ids.size());
    const Result<std::size_t> written = fleet.clients[i].Unmask(forwarded, revealed);
    revealed.resize(written.ok() ? written.value() : 0);
    return revealed;
  }

  bool colluding(std::size_t i) const { return i >= fleet.ids.size() - colluders; }

  SignedFleet& fleet;
  std::uint64_t round = 0;
  std::size_t colluders = 0;  // the last devices: their signing keys are the server's
  std::vector<std::vector<std::uint32_t>> views;
  std::vector<std::optional<Signature>> signatures;
};

// Two survivor sets, four devices told each: with t = 6 neither half has t signers, and no
// device reveals a share — whichever signatures the server forwards.
TEST(SignedRoundTest, ALyingServerWithTwoSurvivorSetsGetsNoShareAtAll) {
  for (const bool forward_everything : {false, true}) {
    SCOPED_TRACE(forward_everything);
    SignedFleet fleet(8, 4, /*ecdsa=*/true);
    ASSERT_TRUE(fleet.RunToInputs(Plan(6, 6, 4)).ok());
    LyingServer server(fleet);
    server.round = 6;
    const std::vector<std::uint32_t> everyone(fleet.ids.begin(), fleet.ids.end());
    std::vector<std::uint32_t> without_target = everyone;  // the target: device 0
    without_target.erase(without_target.begin());
    std::vector<std::vector<std::uint32_t>> views(8, everyone);
    for (std::size_t i = 4; i < 8; ++i) views[i] = without_target;
    server.Tell(views);
    for (std::size_t i = 0; i < 8; ++i) {
      EXPECT_TRUE(server.Ask(i, forward_everything).empty()) << "device " << i;
      EXPECT_EQ(fleet.clients[i].phase(), Client::Phase::kAborted);
    }
  }
}

// Whether, after the devices answered a split into two views, the server holds t shares of
// both of the target's secrets: the colluders' own shares of each, plus what the honest
// devices revealed.
bool TargetExposed(std::size_t colluders, std::uint32_t split) {
  const std::uint32_t n = 8;
  const std::uint32_t t = 6;
  SignedFleet fleet(n, 2, /*ecdsa=*/false);
  EXPECT_TRUE(fleet.RunToInputs(Plan(9, t, 2)).ok());
  LyingServer server(fleet);
  server.round = 9;
  server.colluders = colluders;
  const std::uint32_t target = fleet.ids[0];
  const std::vector<std::uint32_t> everyone(fleet.ids.begin(), fleet.ids.end());
  std::vector<std::uint32_t> without_target(everyone.begin() + 1, everyone.end());
  // The target is told it survived; each other honest device by the split's bit.
  std::vector<std::vector<std::uint32_t>> views(n, everyone);
  for (std::size_t i = 1; i < n - colluders; ++i) {
    if ((split >> (i - 1)) & 1u) views[i] = without_target;
  }
  server.Tell(views);
  std::size_t seed_shares = colluders;
  std::size_t key_shares = colluders;
  for (std::size_t i = 0; i < n - colluders; ++i) {
    for (const RevealedShare& share : server.Ask(i)) {
      if (share.owner != target) continue;
      (share.kind == SecretKind::kSelfMaskSeed ? seed_shares : key_shares) += 1;
    }
  }
  return seed_shares >= t && key_shares >= t;
}

// n = 8, t = 6: a lying server colluding with c devices cannot split the honest ones into two
// groups of t - c each while c < 2t - n = 4, whatever the split; with c = 4 it can (the bound
// docs/security.md gives is exact).
TEST(SignedRoundTest, ALyingServerLearnsNothingBelowTheColluderBoundAndTheBoundIsExact) {
  for (std::uint32_t split = 0; split < (1u << 4); ++split) {
    EXPECT_FALSE(TargetExposed(3, split)) << "split " << split;
  }
  bool exposed = false;
  for (std::uint32_t split = 0; split < (1u << 3) && !exposed; ++split) {
    exposed = TargetExposed(4, split);
  }
  EXPECT_TRUE(exposed);
}

}  // namespace
}  // namespace edgesgd::secagg
