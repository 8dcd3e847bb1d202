// Fuzz target: secure aggregation's server (transport/secagg, secagg::Server) and honest devices
// (secagg::Client) through whole rounds, with some devices hostile. The input chooses the cohort
// (2 to 6 devices), the neighbourhood, the threshold (valid or not), the vector length and, for
// every device and phase, what it does: follow the protocol, fall silent, or send whatever the
// input says (keys, shares for any receivers, masked vectors of any length, revealed shares of
// any owner, kind and point), once or twice. Sealed shares on their way to a device may be
// altered. Rounds may be signed (test signatures, secagg_test_util.h): hostile devices then sign
// their own messages or send any bytes as signatures, and the server may tell one device a
// survivor set of the input's making (a lying server). Invariants:
//   - a plan the server accepts is one ValidatePlan accepts;
//   - an honest device drops an altered share (counts it, holds nothing of it) and stays in the
//     round, and reveals at most one share per owner (never both secrets of a neighbour);
//   - a finished round whose survivors are all honest holds exactly the sum of their inputs
//     (hostile messages can abort a round, never corrupt its sum);
//   - a round in which every device is honest and speaks, and no share was altered, finishes;
//   - an aborted or finished server accepts no further message of the round;
//   - in a signed round, a device told another survivor set than the others reveals nothing.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/server.h"
#include "fuzz/fuzz_input.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::fuzz {
namespace {

using secagg::Client;
using secagg::Server;

constexpr std::uint32_t kMaxDevices = 6;
constexpr std::uint32_t kMaxWords = 16;

enum class Conduct : std::uint8_t { kHonest, kSilent, kHostile, kHonestTwice };
constexpr std::uint8_t kConductCount = 4;

struct Device {
  explicit Device(std::uint32_t device_id = 0) : id(device_id), signer(device_id) {}
  std::uint32_t id = 0;
  secagg::testing::TestSigner signer;
  Client client;
  std::vector<std::uint32_t> input;
  bool hostile = false;  // sent something of its own making this round
  bool silent = false;   // stopped talking this round
};

secagg::Key RandomKey(FuzzInput& in) {
  secagg::Key key{};
  const std::span<const std::byte> bytes = in.Bytes(key.size());
  std::copy(bytes.begin(), bytes.end(), key.begin());
  return key;
}

class Harness {
 public:
  explicit Harness(FuzzInput& in) : in_(in) {}

  void Run() {
    n_ = 2 + in_.U8() % (kMaxDevices - 1);
    const std::uint32_t choice = in_.U8();
    signed_ = (choice & 0x80) != 0;
    neighbours_ = choice % 3 == 0 ? 0 : 2 * (choice % 3);  // everyone, 2 or 4
    words_ = 1 + in_.U8() % kMaxWords;
    const std::uint32_t degree = secagg::NeighbourhoodSize(n_, neighbours_);
    EDGESGD_FUZZ_CHECK(arenas_.Init(server_, secagg::ServerLimits{n_, degree, words_}).ok(),
                       "the server's storage is taken");
    EDGESGD_FUZZ_CHECK(server_.SetVerifier(signed_ ? &verifier_ : nullptr).ok(),
                       "a server between rounds takes a verifier");
    devices_.clear();
    devices_.reserve(n_);  // the clients keep pointers to their signers
    for (std::uint32_t i = 0; i < n_; ++i) {
      Device& device = devices_.emplace_back(10 + 3 * i);
      ids_.push_back(device.id);
      device.input.resize(words_);
      for (std::uint32_t w = 0; w < words_; ++w) device.input[w] = in_.U32();
      const secagg::ClientLimits limits{degree, 1};
      EDGESGD_FUZZ_CHECK(arenas_.Init(device.client, limits).ok(), "a device's storage is taken");
      if (signed_) {
        EDGESGD_FUZZ_CHECK(device.client.SetSigning({&device.signer, &verifier_}).ok(),
                           "a device takes its signer");
      }
    }
    const std::uint32_t rounds = 1 + in_.U8() % 2;
    for (std::uint64_t round = 1; round <= rounds && !in_.empty(); ++round) RunRound(round);
  }

 private:
  // The threshold: a valid one (above half the holders) most of the time, else any.
  std::uint32_t Threshold() {
    const std::uint32_t holders = secagg::NeighbourhoodSize(n_, neighbours_) + 1;
    const std::uint8_t pick = in_.U8();
    if ((pick & 0x80) != 0) return pick % (holders + 2);
    return holders / 2 + 1 + pick % (holders - holders / 2);
  }

  Conduct NextConduct(Device& device) {
    if (device.silent) return Conduct::kSilent;
    const auto conduct = static_cast<Conduct>(in_.U8() % kConductCount);
    if (conduct == Conduct::kSilent) device.silent = true;
    if (conduct == Conduct::kHostile) device.hostile = true;
    return conduct;
  }

  void RunRound(std::uint64_t round) {
    const secagg::RoundPlan plan{round, Threshold(), neighbours_, in_.U64(), words_};
    const Status started = server_.Start(plan, ids_);
    EDGESGD_FUZZ_CHECK(started.ok() == secagg::ValidatePlan(plan, n_).ok(),
                       "the server accepts exactly the plans ValidatePlan accepts");
    if (!started.ok()) return;
    for (Device& device : devices_) device.hostile = device.silent = false;
    shares_altered_ = false;
    bool all_spoke = true;
    for (Device& device : devices_) {
      const Conduct conduct = NextConduct(device);
      all_spoke = all_spoke && conduct != Conduct::kSilent;
      AdvertiseKeys(device, conduct, round);
    }
    if (!Close(server_.CloseKeys())) return;
    for (Device& device : devices_) ShareKeys(device, NextConduct(device), plan.threshold);
    if (!Close(server_.CloseShares())) return;
    for (Device& device : devices_) SendInput(device, NextConduct(device));
    if (!Close(server_.CloseInputs())) return;
    lied_to_ = n_;
    if (signed_) {
      for (Device& device : devices_) SignSurvivors(device, NextConduct(device), round);
      if (!Close(server_.CloseSignatures())) return;
    }
    for (Device& device : devices_) Unmask(device, NextConduct(device));
    const Status finished = server_.Finish();
    bool honest_survivors = true;
    bool everyone_honest = all_spoke && !shares_altered_ && (!signed_ || lied_to_ == n_);
    std::vector<std::uint32_t> expected(words_, 0);
    for (const Device& device : devices_) {
      everyone_honest = everyone_honest && !device.hostile && !device.silent;
      if (!server_.Survived(device.id)) continue;
      honest_survivors = honest_survivors && !device.hostile;
      for (std::uint32_t w = 0; w < words_; ++w) expected[w] += device.input[w];
    }
    if (finished.ok() && honest_survivors) {
      const std::span<const std::uint32_t> sum = server_.sum();
      EDGESGD_FUZZ_CHECK(std::equal(sum.begin(), sum.end(), expected.begin()),
                         "a finished round of honest survivors holds their exact sum");
    }
    EDGESGD_FUZZ_CHECK(!everyone_honest || finished.ok(),
                       "a round of honest devices that all speak finishes");
    CheckClosed();
  }

  // After a Close* or Finish: false (and the round is over) when it aborted the round.
  bool Close(const Status& closed) {
    if (closed.ok()) return true;
    EDGESGD_FUZZ_CHECK(server_.phase() == Server::Phase::kAborted,
                       "a failed close aborts the round");
    CheckClosed();
    return false;
  }

  void CheckClosed() {
    const secagg::KeyAdvertisement keys;
    EDGESGD_FUZZ_CHECK(!server_.AddKeys(ids_[0], keys).ok(), "an ended round takes no more keys");
    const std::vector<std::uint32_t> words(words_, 0);
    EDGESGD_FUZZ_CHECK(!server_.AddMaskedInput(ids_[0], words).ok(),
                       "an ended round takes no more inputs");
  }

  void AdvertiseKeys(Device& device, Conduct conduct, std::uint64_t round) {
    if (conduct == Conduct::kSilent) return;
    secagg::KeyAdvertisement keys;
    if (conduct == Conduct::kHostile) {
      keys.cipher_public = RandomKey(in_);
      keys.mask_public = RandomKey(in_);
      // A hostile device holds its own signing key: it signs keys of its making, or not.
      if (signed_ && (in_.U8() & 1) != 0) {
        keys.signature = secagg::testing::TestSignature(
            device.id, secagg::KeysStatement(round, device.id, keys));
      }
    } else {
      const secagg::Key entropy =
          secagg::testing::TestKey(device.id, round, static_cast<std::uint64_t>(in_.U8()));
      if (!device.client.Start(round, device.id, entropy, keys).ok()) return;
    }
    for (int copy = Copies(conduct); copy > 0; --copy) {
      static_cast<void>(server_.AddKeys(Sender(device), keys));
    }
  }

  static int Copies(Conduct conduct) { return conduct == Conduct::kHonestTwice ? 2 : 1; }

  // Who a message comes from. The transport authenticates devices, so a hostile one cannot speak
  // as another member of the cohort; it can claim an id outside it, which the server refuses.
  std::uint32_t Sender(const Device& device) {
    if (!device.hostile || (in_.U8() & 0x7) != 0) return device.id;
    const std::uint32_t stranger = 1000 + in_.U8();
    EDGESGD_FUZZ_CHECK(!server_.Expects(stranger), "the server expects no stranger");
    return stranger;
  }

  void ShareKeys(Device& device, Conduct conduct, std::uint32_t threshold) {
    if (conduct == Conduct::kSilent) return;
    const std::size_t degree = server_.neighbourhood_size();
    std::vector<secagg::SealedShares> sealed(degree + 1);
    secagg::Digest commitment{};
    std::size_t count = 0;
    if (conduct == Conduct::kHostile) {
      commitment = RandomKey(in_);
      count = in_.U8() % (degree + 2);
      for (std::size_t i = 0; i < count; ++i) {
        sealed[i].device = in_.U8() % 2 == 0 ? ids_[in_.U8() % n_] : in_.U32();
        const std::span<const std::byte> bytes = in_.Bytes(sealed[i].sealed.size());
        std::copy(bytes.begin(), bytes.end(), sealed[i].sealed.begin());
      }
    } else {
      if (!server_.Expects(device.id)) return;
      std::vector<secagg::RosterEntry> roster(degree);
      std::uint32_t point = 0;
      const Result<std::size_t> listed = server_.RosterFor(device.id, point, roster);
      if (!listed.ok()) return;
      const Result<std::size_t> written = device.client.ShareKeys(
          threshold, point, {roster.data(), listed.value()}, commitment, sealed);
      if (!written.ok()) {
        device.silent = true;  // the device refused the roster and left the round
        return;
      }
      count = written.value();
    }
    for (int copy = Copies(conduct); copy > 0; --copy) {
      static_cast<void>(server_.AddShares(Sender(device), commitment, {sealed.data(), count}));
    }
  }

  void SendInput(Device& device, Conduct conduct) {
    if (conduct == Conduct::kSilent) return;
    std::vector<std::uint32_t> words;
    if (conduct == Conduct::kHostile) {
      words.resize(in_.U8() % (words_ + 2));
      for (std::uint32_t& word : words) word = in_.U32();
    } else {
      if (!server_.Expects(device.id)) return;
      std::vector<secagg::SealedShares> delivered(server_.neighbourhood_size());
      const Result<std::size_t> count = server_.SharesFor(device.id, delivered);
      if (!count.ok()) return;
      // Shares altered on their way: the device must drop them.
      const bool altered = count.value() > 0 && (in_.U8() & 0xF) == 0;
      if (altered) {
        shares_altered_ = true;
        secagg::SealedShares& victim = delivered[in_.U8() % count.value()];
        victim.sealed[in_.U8() % victim.sealed.size()] ^= std::byte{1} << (in_.U8() % 8);
      }
      const bool expecting = device.client.phase() == Client::Phase::kSharesSent;
      const std::uint64_t unopened = device.client.unopened_shares();
      const Status received = device.client.ReceiveShares({delivered.data(), count.value()});
      EDGESGD_FUZZ_CHECK(!altered || !expecting || !received.ok() ||
                             device.client.unopened_shares() == unopened + 1,
                         "a device drops an altered share");
      words = device.input;
      if (!received.ok() || !device.client.MaskInput(words).ok()) {
        device.silent = true;
        return;
      }
    }
    for (int copy = Copies(conduct); copy > 0; --copy) {
      static_cast<void>(server_.AddMaskedInput(Sender(device), words));
    }
  }

  // Signed rounds: the survivor set and the signatures. A lying server tells one device (at
  // most) a set of the input's making.
  void SignSurvivors(Device& device, Conduct conduct, std::uint64_t round) {
    if (conduct == Conduct::kSilent) return;
    secagg::Signature signature{};
    if (conduct == Conduct::kHostile) {
      const std::span<const std::byte> bytes = in_.Bytes(signature.size());
      std::copy(bytes.begin(), bytes.end(), signature.begin());
      if ((in_.U8() & 1) != 0) {
        std::vector<std::uint32_t> any(in_.U8() % (n_ + 1));
        for (std::uint32_t& id : any) id = ids_[in_.U8() % n_];
        signature =
            secagg::testing::TestSignature(device.id, secagg::SurvivorsStatement(round, any));
      }
    } else {
      if (!server_.Expects(device.id)) return;
      std::vector<std::uint32_t> set(n_);
      const Result<std::size_t> listed = server_.SurvivorsFor(device.id, set);
      if (!listed.ok()) return;
      set.resize(listed.value());
      if (lied_to_ == n_ && (in_.U8() & 0x7) == 0) {
        lied_to_ = static_cast<std::uint32_t>(&device - devices_.data());
        true_set_ = set;
        if (!set.empty() && (in_.U8() & 1) != 0) {
          set.erase(set.begin() + in_.U8() % set.size());
        } else {
          set.clear();
          for (const std::uint32_t id : ids_) {
            if (id == device.id || (in_.U8() & 1) != 0) set.push_back(id);
          }
          std::sort(set.begin(), set.end());
        }
        told_set_ = set;
      }
      if (!device.client.SignSurvivors(set, signature).ok()) {
        device.silent = true;
        return;
      }
    }
    for (int copy = Copies(conduct); copy > 0; --copy) {
      static_cast<void>(server_.AddSignature(Sender(device), signature));
    }
  }

  void Unmask(Device& device, Conduct conduct) {
    if (conduct == Conduct::kSilent) return;
    const std::size_t degree = server_.neighbourhood_size();
    std::vector<secagg::RevealedShare> revealed(degree + 1);
    std::size_t count = 0;
    if (conduct == Conduct::kHostile) {
      count = in_.U8() % (degree + 3);
      revealed.resize(std::max(revealed.size(), count));
      for (std::size_t i = 0; i < count; ++i) {
        revealed[i].owner = in_.U8() % 2 == 0 ? ids_[in_.U8() % n_] : in_.U32();
        revealed[i].kind = static_cast<secagg::SecretKind>(in_.U8() % 2);
        revealed[i].share.x = in_.U32();
        for (std::uint32_t& limb : revealed[i].share.y) limb = in_.U32();
      }
    } else {
      if (!server_.Expects(device.id)) return;
      Result<std::size_t> written = Status::Internal();
      if (signed_) {
        std::vector<secagg::SurvivorSignature> signatures(degree);
        const Result<std::size_t> listed = server_.SignaturesFor(device.id, signatures);
        if (!listed.ok()) return;
        signatures.resize(listed.value());
        written = device.client.Unmask(signatures, revealed);
        // The server's true set differs from the one it told this device (unless the lie
        // happened to be the truth): the neighbours' signatures cannot all verify on it, and
        // fewer than t... whichever, the device reveals nothing.
        EDGESGD_FUZZ_CHECK(!written.ok() ||
                               static_cast<std::size_t>(&device - devices_.data()) != lied_to_ ||
                               TrueSetWasTold(),
                           "a device told another survivor set reveals nothing");
      } else {
        std::vector<std::uint32_t> survivors(degree);
        const Result<std::size_t> listed = server_.SurvivorsFor(device.id, survivors);
        if (!listed.ok()) return;
        written = device.client.Unmask({survivors.data(), listed.value()}, revealed);
      }
      if (!written.ok()) {
        device.silent = true;
        return;
      }
      count = written.value();
      for (std::size_t i = 0; i < count; ++i) {
        for (std::size_t j = 0; j < i; ++j) {
          EDGESGD_FUZZ_CHECK(revealed[i].owner != revealed[j].owner,
                             "a device reveals one share per owner");
        }
      }
    }
    for (int copy = Copies(conduct); copy > 0; --copy) {
      static_cast<void>(server_.AddUnmasking(Sender(device), {revealed.data(), count}));
    }
  }

  // Whether the set a lying server told one device equals the true one (the lie changed nothing).
  bool TrueSetWasTold() const { return told_set_ == true_set_; }

  FuzzInput& in_;
  secagg::testing::TestVerifier verifier_;
  secagg::testing::Arenas arenas_;
  Server server_;
  std::vector<Device> devices_;
  std::vector<std::uint32_t> ids_;
  std::uint32_t n_ = 0;
  std::uint32_t neighbours_ = 0;
  std::uint32_t words_ = 0;
  bool shares_altered_ = false;  // this round, on their way to a device
  bool signed_ = false;
  std::uint32_t lied_to_ = 0;  // signed rounds: the device told a made-up set, or n_ for none
  std::vector<std::uint32_t> told_set_;
  std::vector<std::uint32_t> true_set_;
};

}  // namespace
}  // namespace edgesgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::FuzzInput in(data, size);
  edgesgd::fuzz::Harness harness(in);
  harness.Run();
  return 0;
}
