#include "edgesgd/secagg/client.h"

#include <algorithm>

#include "arena_objects.h"
#include "derivation.h"

namespace edgesgd::secagg {
namespace {

void WipeShare(Share& share) { Wipe(std::as_writable_bytes(std::span(&share, 1))); }

}  // namespace

std::size_t Client::ArenaBytes(const ClientLimits& limits) {
  const std::size_t holders = std::size_t{limits.max_neighbours} + 1;
  return ArenaBytesFor<Neighbour>(limits.max_neighbours) + ArenaBytesFor<std::uint32_t>(holders) +
         ArenaBytesFor<Share>(2 * holders);
}

Status Client::Init(Arena& arena, const ClientLimits& limits) {
  if (initialized_) return Status::FailedPrecondition("Init was already called");
  if (limits.max_neighbours == 0 || limits.minimum_neighbours == 0 ||
      limits.minimum_neighbours > limits.max_neighbours) {
    return Status::InvalidArgument(
        "secure aggregation needs 1 <= minimum_neighbours <= max_neighbours");
  }
  const std::size_t holders = std::size_t{limits.max_neighbours} + 1;
  EDGESGD_TRY_ASSIGN(neighbours_, internal::ConstructInArena<Neighbour>(arena, holders - 1));
  EDGESGD_TRY_ASSIGN(points_, arena.Allocate<std::uint32_t>(holders));
  EDGESGD_TRY_ASSIGN(scratch_shares_, internal::ConstructInArena<Share>(arena, 2 * holders));
  limits_ = limits;
  initialized_ = true;
  return Status::Ok();
}

Status Client::Fail(Status status) {
  WipeRound();
  phase_ = Phase::kAborted;
  return status;
}

void Client::WipeRound() {
  Wipe(cipher_.private_key);
  Wipe(mask_.private_key);
  Wipe(self_mask_seed_);
  Wipe(split_key_);
  WipeShare(own_seed_share_);
  for (std::size_t i = 0; i < neighbour_count_; ++i) {
    Wipe(neighbours_[i].opening_key);
    WipeShare(neighbours_[i].seed_share);
    WipeShare(neighbours_[i].mask_key_share);
    neighbours_[i].delivered = false;
    neighbours_[i].shares_held = false;
    neighbours_[i].survived = false;
  }
  for (Share& share : scratch_shares_) WipeShare(share);
  neighbour_count_ = 0;
}

void Client::Abort() {
  WipeRound();
  phase_ = Phase::kAborted;
}

std::size_t Client::delivered_count() const {
  return static_cast<std::size_t>(std::count_if(
      neighbours_.begin(), neighbours_.begin() + static_cast<std::ptrdiff_t>(neighbour_count_),
      [](const Neighbour& n) { return n.delivered; }));
}

Status Client::SetSigning(const DeviceSigning& signing) {
  if (signing.signer == nullptr || signing.verifier == nullptr) {
    return Status::InvalidArgument("signed rounds need both a signer and a verifier");
  }
  signing_ = signing;
  return Status::Ok();
}

Client::Neighbour* Client::FindNeighbour(std::uint32_t device) {
  Neighbour* end = neighbours_.data() + neighbour_count_;
  Neighbour* found = std::find_if(neighbours_.data(), end,
                                  [&](const Neighbour& n) { return n.entry.device == device; });
  return found == end ? nullptr : found;
}

Status Client::Start(std::uint64_t round, std::uint32_t device, const Key& entropy,
                     KeyAdvertisement& advertisement) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  WipeRound();
  round_ = round;
  device_ = device;
  threshold_ = 0;
  SecretRandom random(entropy);
  if (Status s = GenerateKeyPair(random, cipher_); !s.ok()) return Fail(s);
  if (Status s = GenerateKeyPair(random, mask_); !s.ok()) return Fail(s);
  random.Fill(self_mask_seed_);
  self_mask_seed_[kKeyBytes - 1] &= std::byte{0x0F};  // 252 bits: what a share holds
  random.Fill(split_key_);
  advertisement.cipher_public = cipher_.public_key;
  advertisement.mask_public = mask_.public_key;
  advertisement.signature = {};
  if (signs()) {
    const Status s = signing_.signer->Sign(KeysStatement(round, device, advertisement),
                                           advertisement.signature);
    if (!s.ok()) return Fail(s);
  }
  phase_ = Phase::kKeysAdvertised;
  return Status::Ok();
}

Result<std::size_t> Client::ShareKeys(std::uint32_t threshold, std::uint32_t own_share_point,
                                      std::span<const RosterEntry> roster, Digest& commitment,
                                      std::span<SealedShares> out) {
  if (phase_ != Phase::kKeysAdvertised) {
    return Status::FailedPrecondition("the roster arrived outside the key-sharing phase");
  }
  if (roster.size() < limits_.minimum_neighbours) {
    return Fail(Status::OutOfRange("the roster has fewer neighbours than this device requires"));
  }
  if (roster.size() > limits_.max_neighbours) {
    return Fail(Status::OutOfRange("the roster has more neighbours than this device can hold"));
  }
  const std::size_t holders = roster.size() + 1;
  if (threshold > holders || 2 * std::size_t{threshold} <= holders) {
    return Fail(Status::InvalidArgument(
        "the threshold must exceed half the share holders (and not exceed them): a lower one "
        "would let a server collect both secrets of one device"));
  }
  if (out.size() < roster.size()) {
    return Fail(Status::ResourceExhausted("the output holds fewer sealed shares than neighbours"));
  }
  points_[0] = own_share_point;
  for (std::size_t i = 0; i < roster.size(); ++i) {
    if (roster[i].device == device_)
      return Fail(Status::InvalidArgument("the roster names this device"));
    for (std::size_t j = 0; j < i; ++j) {
      if (roster[j].device == roster[i].device) {
        return Fail(Status::InvalidArgument("the roster names a device twice"));
      }
    }
    if (signs()) {
      const KeyAdvertisement keys{roster[i].cipher_public, roster[i].mask_public, {}};
      const Status verified = signing_.verifier->Verify(
          roster[i].device, KeysStatement(round_, roster[i].device, keys), roster[i].keys_signature);
      if (!verified.ok()) {
        return Fail(Status::Unauthenticated(
            "a neighbour's keys in the roster are not signed by that neighbour (the server may "
            "have replaced them); nothing is shared"));
      }
    }
    neighbours_[i] = Neighbour{roster[i], false, false, false, {}, {}, {}};
    points_[i + 1] = roster[i].share_point;
  }
  neighbour_count_ = roster.size();
  threshold_ = threshold;

  // The shares this device hands out: of the self-mask seed, then of the mask private key.
  const std::span<const std::uint32_t> points(points_.data(), holders);
  const std::span<Share> seed_shares(scratch_shares_.data(), holders);
  const std::span<Share> key_shares(scratch_shares_.data() + holders, holders);
  SecretRandom split_random(split_key_);
  Status split = SplitSecret(self_mask_seed_, threshold, points, split_random, seed_shares);
  if (split.ok()) {
    Key mask_secret = PrivateKeyToSecret(mask_.private_key);
    split = SplitSecret(mask_secret, threshold, points, split_random, key_shares);
    Wipe(mask_secret);
  }
  if (!split.ok()) return Fail(split);
  own_seed_share_ = seed_shares[0];
  for (std::size_t i = 0; i < roster.size(); ++i) {
    std::array<std::byte, kSharePairBytes> plaintext;
    WriteShare(seed_shares[i + 1], std::span(plaintext).first<kShareBytes>());
    WriteShare(key_shares[i + 1], std::span(plaintext).last<kShareBytes>());
    // One agreement per neighbour serves both directions: the opening key is kept for
    // ReceiveShares.
    Key key;
    Status s = internal::SharesKeys(cipher_.private_key, roster[i].cipher_public, round_, device_,
                                    roster[i].device, key, neighbours_[i].opening_key);
    if (s.ok()) {
      out[i].device = roster[i].device;
      s = Seal(key, internal::MakePairContext(round_, device_, roster[i].device), plaintext,
               out[i].sealed);
    }
    Wipe(key);
    Wipe(plaintext);
    if (!s.ok()) return Fail(s);
  }
  for (Share& share : scratch_shares_) WipeShare(share);
  commitment = Sha256(self_mask_seed_);
  phase_ = Phase::kSharesSent;
  return roster.size();
}

Status Client::ReceiveShares(std::span<const SealedShares> delivered) {
  if (phase_ != Phase::kSharesSent) {
    return Status::FailedPrecondition("shares arrived outside the key-sharing phase");
  }
  for (const SealedShares& message : delivered) {
    Neighbour* sender = FindNeighbour(message.device);
    if (sender == nullptr) {
      return Fail(Status::DataLoss("shares arrived from a device that is not a neighbour"));
    }
    if (sender->delivered) return Fail(Status::DataLoss("a neighbour's shares arrived twice"));
    std::array<std::byte, kSharePairBytes> plaintext;
    const Status s = Open(sender->opening_key,
                          internal::MakePairContext(round_, message.device, device_),
                          message.sealed, plaintext);
    Wipe(sender->opening_key);
    sender->delivered = true;
    if (!s.ok()) {
      ++unopened_shares_;
      Wipe(plaintext);
      continue;
    }
    // The shares are at this device's point: the sealing key and associated data name it.
    sender->seed_share =
        ReadShare(std::span<const std::byte>(plaintext).first<kShareBytes>(), points_[0]);
    sender->mask_key_share =
        ReadShare(std::span<const std::byte>(plaintext).last<kShareBytes>(), points_[0]);
    Wipe(plaintext);
    sender->shares_held = true;
  }
  phase_ = Phase::kSharesReceived;
  return Status::Ok();
}

Status Client::MaskInput(std::span<std::uint32_t> words) {
  if (phase_ != Phase::kSharesReceived) {
    return Status::FailedPrecondition("the input can only be masked once the shares arrived");
  }
  if (delivered_count() + 1 < threshold_) {
    return Fail(Status::FailedPrecondition(
        "fewer neighbours shared keys than the threshold needs; the round cannot complete"));
  }
  ApplyMask(self_mask_seed_, MaskSign::kAdd, words);
  for (std::size_t i = 0; i < neighbour_count_; ++i) {
    const Neighbour& neighbour = neighbours_[i];
    if (!neighbour.delivered) continue;
    Key seed;
    const Status s = internal::PairMaskSeed(mask_.private_key, neighbour.entry.mask_public, round_,
                                            device_, neighbour.entry.device, seed);
    if (!s.ok()) {
      Wipe(seed);
      return Fail(s);
    }
    ApplyMask(seed, internal::PairMaskSign(device_, neighbour.entry.device), words);
    Wipe(seed);
  }
  phase_ = Phase::kInputMasked;
  return Status::Ok();
}

Result<std::size_t> Client::Unmask(std::span<const std::uint32_t> survivors,
                                   std::span<RevealedShare> out) {
  if (phase_ != Phase::kInputMasked) {
    return Status::FailedPrecondition("unmasking was asked before this device sent its input");
  }
  if (signs()) {
    return Fail(Status::FailedPrecondition(
        "this device signs its rounds: it reveals shares only after the consistency check"));
  }
  for (std::size_t i = 0; i < survivors.size(); ++i) {
    Neighbour* neighbour = FindNeighbour(survivors[i]);
    if (neighbour == nullptr || !neighbour->delivered) {
      return Fail(Status::DataLoss("a listed survivor never shared keys with this device"));
    }
    if (neighbour->survived) return Fail(Status::DataLoss("the survivor list names a device twice"));
    neighbour->survived = true;
  }
  if (survivors.size() + 1 < threshold_) {
    return Fail(Status::FailedPrecondition(
        "fewer neighbours survived than the threshold needs; revealing would not help the round"));
  }
  return Reveal(out);
}

Status Client::SignSurvivors(std::span<const std::uint32_t> survivors, Signature& signature) {
  if (phase_ != Phase::kInputMasked) {
    return Status::FailedPrecondition("the survivor set arrived before this device sent its input");
  }
  if (!signs()) {
    return Fail(Status::FailedPrecondition("an unsigned round has no consistency check"));
  }
  if (!StrictlyIncreasing(survivors)) {
    return Fail(Status::DataLoss("the survivor set is not strictly increasing"));
  }
  if (!std::binary_search(survivors.begin(), survivors.end(), device_)) {
    return Fail(Status::DataLoss("the survivor set leaves out this device, whose input was sent"));
  }
  std::size_t surviving = 0;
  for (std::size_t i = 0; i < neighbour_count_; ++i) {
    Neighbour& neighbour = neighbours_[i];
    neighbour.survived =
        std::binary_search(survivors.begin(), survivors.end(), neighbour.entry.device);
    if (neighbour.survived && !neighbour.delivered) {
      return Fail(Status::DataLoss("a listed survivor never shared keys with this device"));
    }
    surviving += neighbour.survived ? 1u : 0u;
  }
  if (surviving + 1 < threshold_) {
    return Fail(Status::FailedPrecondition(
        "fewer neighbours survived than the threshold needs; revealing would not help the round"));
  }
  survivors_statement_ = SurvivorsStatement(round_, survivors);
  if (const Status s = signing_.signer->Sign(survivors_statement_, signature); !s.ok()) {
    return Fail(s);
  }
  phase_ = Phase::kSurvivorsSigned;
  return Status::Ok();
}

Result<std::size_t> Client::Unmask(std::span<const SurvivorSignature> signatures,
                                   std::span<RevealedShare> out) {
  if (phase_ != Phase::kSurvivorsSigned) {
    return Status::FailedPrecondition("signatures arrived before this device signed the set");
  }
  // Its own signature counts: it signed the set it holds. Each other must be a distinct
  // surviving neighbour's, over the same statement.
  std::size_t signers = 1;
  for (std::size_t i = 0; i < signatures.size(); ++i) {
    const Neighbour* neighbour = FindNeighbour(signatures[i].device);
    if (neighbour == nullptr || !neighbour->survived) {
      return Fail(Status::DataLoss("a signature of the survivor set is not a surviving neighbour's"));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (signatures[j].device == signatures[i].device) {
        return Fail(Status::DataLoss("the survivor set's signatures name a device twice"));
      }
    }
    const Status verified = signing_.verifier->Verify(signatures[i].device, survivors_statement_,
                                                      signatures[i].signature);
    if (!verified.ok()) {
      return Fail(Status::Unauthenticated(
          "a neighbour's signature is not of the survivor set this device was sent (the server "
          "told devices different sets); nothing is revealed"));
    }
    ++signers;
  }
  if (signers < threshold_) {
    return Fail(Status::FailedPrecondition(
        "fewer of the neighbourhood than the threshold signed the survivor set; nothing is "
        "revealed"));
  }
  return Reveal(out);
}

Result<std::size_t> Client::Reveal(std::span<RevealedShare> out) {
  const std::size_t count = delivered_count() + 1;
  if (out.size() < count) return Fail(Status::ResourceExhausted("the output is too short"));
  std::size_t written = 0;
  out[written++] = RevealedShare{device_, SecretKind::kSelfMaskSeed, own_seed_share_};
  for (std::size_t i = 0; i < neighbour_count_; ++i) {
    const Neighbour& neighbour = neighbours_[i];
    if (!neighbour.shares_held) continue;
    out[written++] =
        neighbour.survived
            ? RevealedShare{neighbour.entry.device, SecretKind::kSelfMaskSeed, neighbour.seed_share}
            : RevealedShare{neighbour.entry.device, SecretKind::kMaskKey, neighbour.mask_key_share};
  }
  WipeRound();
  phase_ = Phase::kIdle;
  return written;
}

}  // namespace edgesgd::secagg
