#include "edgesgd/secagg/server.h"

#include <algorithm>

#include "arena_objects.h"
#include "derivation.h"
#include "edgesgd/core/random.h"

namespace edgesgd::secagg {

std::uint32_t NeighbourhoodSize(std::uint32_t cohort, std::uint32_t neighbours) {
  if (cohort == 0) return 0;
  return neighbours == 0 || neighbours >= cohort - 1 ? cohort - 1 : neighbours;
}

Status ValidatePlan(const RoundPlan& plan, std::uint32_t cohort) {
  if (cohort < 2) return Status::InvalidArgument("secure aggregation needs at least two devices");
  if (plan.neighbours % 2 != 0) {
    return Status::InvalidArgument(
        "the neighbourhood size must be even (a ring with k/2 each side)");
  }
  if (plan.words == 0) return Status::InvalidArgument("the masked vector is empty");
  const std::uint32_t holders = NeighbourhoodSize(cohort, plan.neighbours) + 1;
  if (plan.threshold > holders || 2 * std::uint64_t{plan.threshold} <= holders) {
    return Status::InvalidArgument(
        "the threshold must exceed half of the neighbourhood plus one, and not exceed it");
  }
  return Status::Ok();
}

namespace {

bool SameKeys(const KeyAdvertisement& a, const KeyAdvertisement& b) {
  return SecretsEqual(a.cipher_public, b.cipher_public) &&
         SecretsEqual(a.mask_public, b.mask_public);
}

// The neighbourhood the largest round can have.
std::size_t MaxDegree(const ServerLimits& limits) {
  return std::min(limits.max_neighbours, limits.max_devices - 1);
}

}  // namespace

std::size_t Server::ArenaBytes(const ServerLimits& limits) {
  if (limits.max_devices < 2) return 0;
  const std::size_t devices = limits.max_devices;
  const std::size_t degree = MaxDegree(limits);
  return ArenaBytesFor<Member>(devices) +
         ArenaBytesFor<std::pair<std::uint32_t, std::uint32_t>>(devices) +
         ArenaBytesFor<std::uint32_t>(devices) + ArenaBytesFor<std::uint32_t>(devices * degree) +
         ArenaBytesFor<SealedShares>(devices * degree) +
         ArenaBytesFor<std::uint8_t>(devices * degree) +
         ArenaBytesFor<Share>(devices * (degree + 1)) +
         ArenaBytesFor<std::uint8_t>(devices * (degree + 1)) +
         2 * ArenaBytesFor<Share>(degree + 1) +
         ArenaBytesFor<FieldElement>(DecodeScratchElements(degree + 1)) +
         ArenaBytesFor<std::uint8_t>(degree + 1) + ArenaBytesFor<std::uint32_t>(limits.max_words) +
         ArenaBytesFor<std::uint32_t>(devices);
}

Status Server::Init(Arena& arena, const ServerLimits& limits) {
  if (initialized_) return Status::FailedPrecondition("Init was already called");
  if (limits.max_devices < 2 || limits.max_neighbours == 0 || limits.max_words == 0) {
    return Status::InvalidArgument(
        "secure aggregation limits must allow two devices, one "
        "neighbour and one word");
  }
  const std::size_t devices = limits.max_devices;
  const std::size_t degree = MaxDegree(limits);
  using internal::ConstructInArena;
  EDGESGD_TRY_ASSIGN(members_, ConstructInArena<Member>(arena, devices));
  EDGESGD_TRY_ASSIGN(by_device_,
                     (ConstructInArena<std::pair<std::uint32_t, std::uint32_t>>(arena, devices)));
  EDGESGD_TRY_ASSIGN(ring_, arena.Allocate<std::uint32_t>(devices));
  EDGESGD_TRY_ASSIGN(neighbours_, arena.Allocate<std::uint32_t>(devices * degree));
  EDGESGD_TRY_ASSIGN(outgoing_, ConstructInArena<SealedShares>(arena, devices * degree));
  EDGESGD_TRY_ASSIGN(outgoing_present_, arena.Allocate<std::uint8_t>(devices * degree));
  EDGESGD_TRY_ASSIGN(revealed_, ConstructInArena<Share>(arena, devices * (degree + 1)));
  EDGESGD_TRY_ASSIGN(revealed_present_, arena.Allocate<std::uint8_t>(devices * (degree + 1)));
  EDGESGD_TRY_ASSIGN(combine_, ConstructInArena<Share>(arena, degree + 1));
  EDGESGD_TRY_ASSIGN(chosen_, ConstructInArena<Share>(arena, degree + 1));
  EDGESGD_TRY_ASSIGN(decode_scratch_,
                     arena.Allocate<FieldElement>(DecodeScratchElements(degree + 1)));
  EDGESGD_TRY_ASSIGN(decode_wrong_, arena.Allocate<std::uint8_t>(degree + 1));
  EDGESGD_TRY_ASSIGN(sum_, arena.Allocate<std::uint32_t>(limits.max_words));
  EDGESGD_TRY_ASSIGN(survivor_set_, arena.Allocate<std::uint32_t>(devices));
  limits_ = limits;
  initialized_ = true;
  return Status::Ok();
}

Status Server::Start(const RoundPlan& plan, std::span<const std::uint32_t> cohort) {
  if (!initialized_) return Status::FailedPrecondition("Init has not been called");
  if (cohort.size() > limits_.max_devices) {
    return Status::OutOfRange("the cohort is larger than the server was sized for");
  }
  const auto n = static_cast<std::uint32_t>(cohort.size());
  EDGESGD_TRY(ValidatePlan(plan, n));
  const std::uint32_t degree = NeighbourhoodSize(n, plan.neighbours);
  if (degree > limits_.max_neighbours) {
    return Status::OutOfRange("the neighbourhood is larger than the server was sized for");
  }
  if (plan.words > limits_.max_words) {
    return Status::OutOfRange("the masked vector is longer than the server was sized for");
  }
  for (std::uint32_t i = 0; i < n; ++i) by_device_[i] = {cohort[i], i};
  std::sort(by_device_.begin(), by_device_.begin() + static_cast<std::ptrdiff_t>(n));
  for (std::uint32_t i = 1; i < n; ++i) {
    if (by_device_[i].first == by_device_[i - 1].first) {
      return Status::InvalidArgument("the cohort names a device twice");
    }
  }
  plan_ = plan;
  cohort_size_ = n;
  degree_ = degree;
  for (std::uint32_t i = 0; i < n; ++i) {
    members_[i] = Member{};
    members_[i].device = cohort[i];
  }

  // Ring positions: a uniform permutation of the cohort (Fisher-Yates), then each member's
  // neighbours are the k/2 members on either side of it; everyone when k = n - 1.
  for (std::uint32_t i = 0; i < n; ++i) ring_[i] = i;
  CounterRng rng(plan.graph_seed, static_cast<std::uint32_t>(plan.round), 0,
                 StreamId(RandomPurpose::kSecureAggregationGraph));
  for (std::uint32_t i = n - 1; i > 0; --i) std::swap(ring_[i], ring_[rng.NextBelow(i + 1)]);
  for (std::uint32_t p = 0; p < n; ++p) {
    const std::uint32_t member = ring_[p];
    std::uint32_t* list = neighbours_.data() + std::size_t{member} * degree_;
    if (degree_ == n - 1) {
      std::uint32_t written = 0;
      for (std::uint32_t other = 0; other < n; ++other) {
        if (other != member) list[written++] = other;
      }
    } else {
      for (std::uint32_t d = 1; d <= degree_ / 2; ++d) {
        list[2 * (d - 1)] = ring_[(p + d) % n];
        list[2 * (d - 1) + 1] = ring_[(p + n - d) % n];
      }
    }
  }
  std::fill_n(outgoing_present_.begin(), std::size_t{n} * degree_, std::uint8_t{0});
  std::fill_n(revealed_present_.begin(), std::size_t{n} * (degree_ + 1), std::uint8_t{0});
  std::fill_n(sum_.begin(), plan.words, 0u);
  for (std::uint32_t i = 0; i < n; ++i) members_[i].active = true;
  phase_ = Phase::kCollectingKeys;
  return Status::Ok();
}

std::uint32_t Server::IndexOf(std::uint32_t device) const {
  const auto end = by_device_.begin() + static_cast<std::ptrdiff_t>(cohort_size_);
  const auto found =
      std::lower_bound(by_device_.begin(), end, std::pair<std::uint32_t, std::uint32_t>{device, 0});
  return found != end && found->first == device ? found->second : cohort_size_;
}

std::span<const std::uint32_t> Server::Neighbours(std::uint32_t index) const {
  return {neighbours_.data() + std::size_t{index} * degree_, degree_};
}

std::uint32_t Server::SlotOf(std::uint32_t index, std::uint32_t neighbour_index) const {
  const auto list = Neighbours(index);
  return static_cast<std::uint32_t>(std::find(list.begin(), list.end(), neighbour_index) -
                                    list.begin());
}

std::size_t Server::ActiveNeighbours(std::uint32_t index) const {
  const auto list = Neighbours(index);
  return static_cast<std::size_t>(
      std::count_if(list.begin(), list.end(), [&](std::uint32_t j) { return members_[j].active; }));
}

Status Server::Fail(Status status) {
  phase_ = Phase::kAborted;
  std::fill_n(sum_.begin(), plan_.words, 0u);
  return status;
}

void Server::Abort() { (void)Fail(Status::Cancelled()); }

Status Server::PruneAndCheck(const char* too_few) {
  // A member whose active neighbourhood (with itself) is below t cannot have its secrets
  // reconstructed: it leaves, which may push a neighbour below t in turn.
  for (bool changed = true; changed;) {
    changed = false;
    for (std::uint32_t i = 0; i < cohort_size_; ++i) {
      if (members_[i].active && ActiveNeighbours(i) + 1 < plan_.threshold) {
        members_[i].active = false;
        changed = true;
      }
    }
  }
  std::size_t active = 0;
  for (std::uint32_t i = 0; i < cohort_size_; ++i) active += members_[i].active ? 1u : 0u;
  if (active < plan_.threshold) return Fail(Status::Unavailable(too_few));
  return Status::Ok();
}

bool Server::Expects(std::uint32_t device) const {
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !members_[i].active) return false;
  const Member& m = members_[i];
  switch (phase_) {
    case Phase::kCollectingKeys:
      return !m.advertised;
    case Phase::kCollectingShares:
      return !m.shared;
    case Phase::kCollectingInputs:
      return !m.masked;
    case Phase::kCollectingSignatures:
      return !m.signed_set;
    case Phase::kCollectingUnmasking:
      return !m.unmasked;
    default:
      return false;
  }
}

Status Server::AddKeys(std::uint32_t device, const KeyAdvertisement& keys) {
  if (phase_ != Phase::kCollectingKeys) {
    return Status::FailedPrecondition("keys arrived outside the key-advertisement phase");
  }
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_) return Status::NotFound("the device is not in this round's cohort");
  if (members_[i].advertised && SameKeys(members_[i].keys, keys)) {
    return Status::AlreadyExists("the device advertised these keys already");
  }
  if (SecretsEqual(keys.cipher_public, keys.mask_public)) {
    return Status::InvalidArgument("a device's two public keys must differ");
  }
  if (signs()) {
    EDGESGD_TRY(
        verifier_->Verify(device, KeysStatement(plan_.round, device, keys), keys.signature));
  }
  members_[i].keys = keys;
  members_[i].advertised = true;
  return Status::Ok();
}

Result<bool> Server::LeaveIfRestarted(std::uint32_t device, const KeyAdvertisement& keys) {
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !members_[i].active) {
    return Status::NotFound("the device is not in this round");
  }
  if (SameKeys(members_[i].keys, keys)) {
    return Status::AlreadyExists("the device advertised these keys already");
  }
  members_[i].left = true;
  members_[i].active = false;
  return true;
}

Status Server::CloseKeys() {
  if (phase_ != Phase::kCollectingKeys) return Status::FailedPrecondition("not collecting keys");
  for (std::uint32_t i = 0; i < cohort_size_; ++i) members_[i].active = members_[i].advertised;
  EDGESGD_TRY(PruneAndCheck("fewer devices advertised keys than the threshold; round aborted"));
  phase_ = Phase::kCollectingShares;
  return Status::Ok();
}

Result<std::size_t> Server::RosterFor(std::uint32_t device, std::uint32_t& share_point,
                                      std::span<RosterEntry> out) const {
  if (phase_ != Phase::kCollectingShares) return Status::FailedPrecondition("no roster now");
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !members_[i].active) {
    return Status::NotFound("the device is not in this round's key exchange");
  }
  share_point = i + 1;
  std::size_t written = 0;
  for (std::uint32_t j : Neighbours(i)) {
    if (!members_[j].active) continue;
    if (written == out.size()) return Status::ResourceExhausted("the roster buffer is too short");
    out[written++] = RosterEntry{members_[j].device, j + 1, members_[j].keys.cipher_public,
                                 members_[j].keys.mask_public, members_[j].keys.signature};
  }
  return written;
}

Status Server::AddShares(std::uint32_t device, const Digest& commitment,
                         std::span<const SealedShares> shares) {
  if (phase_ != Phase::kCollectingShares) {
    return Status::FailedPrecondition("shares arrived outside the key-sharing phase");
  }
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !members_[i].active) {
    return Status::NotFound("the device is not in this round's key exchange");
  }
  if (members_[i].shared) return Status::AlreadyExists("the device sent its shares twice");
  // The shares must follow the roster the device was sent: one per active neighbour, in order.
  std::size_t next = 0;
  for (std::uint32_t j : Neighbours(i)) {
    if (!members_[j].active) continue;
    if (next == shares.size() || shares[next].device != members_[j].device) {
      return Status::DataLoss("the shares do not match the device's roster");
    }
    ++next;
  }
  if (next != shares.size()) return Status::DataLoss("the shares do not match the device's roster");
  next = 0;
  for (std::uint32_t j : Neighbours(i)) {
    if (!members_[j].active) continue;
    const std::size_t slot = std::size_t{i} * degree_ + SlotOf(i, j);
    outgoing_[slot] = shares[next++];
    outgoing_present_[slot] = 1;
  }
  members_[i].commitment = commitment;
  members_[i].shared = true;
  return Status::Ok();
}

Status Server::CloseShares() {
  if (phase_ != Phase::kCollectingShares)
    return Status::FailedPrecondition("not collecting shares");
  for (std::uint32_t i = 0; i < cohort_size_; ++i) {
    members_[i].active = members_[i].active && members_[i].shared;
  }
  EDGESGD_TRY(PruneAndCheck("fewer devices shared keys than the threshold; round aborted"));
  // U2 is exactly the members still active: those pruned now never had their shares delivered.
  for (std::uint32_t i = 0; i < cohort_size_; ++i) members_[i].shared = members_[i].active;
  phase_ = Phase::kCollectingInputs;
  return Status::Ok();
}

Result<std::size_t> Server::SharesFor(std::uint32_t device, std::span<SealedShares> out) const {
  if (phase_ != Phase::kCollectingInputs) return Status::FailedPrecondition("no shares now");
  const std::uint32_t v = IndexOf(device);
  if (v == cohort_size_ || !InU2(v)) return Status::NotFound("the device is not in this round");
  std::size_t written = 0;
  for (std::uint32_t u : Neighbours(v)) {
    if (!InU2(u)) continue;
    const std::size_t slot = std::size_t{u} * degree_ + SlotOf(u, v);
    if (!outgoing_present_[slot]) continue;
    if (written == out.size()) return Status::ResourceExhausted("the shares buffer is too short");
    out[written] = outgoing_[slot];
    out[written].device = members_[u].device;
    ++written;
  }
  return written;
}

Status Server::AddMaskedInput(std::uint32_t device, std::span<const std::uint32_t> words) {
  if (phase_ != Phase::kCollectingInputs) {
    return Status::FailedPrecondition("masked inputs are closed for this round");
  }
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !InU2(i) || members_[i].left) {
    return Status::NotFound("the device is not in this round");
  }
  if (members_[i].masked) return Status::AlreadyExists("the device sent its input twice");
  if (words.size() != plan_.words) {
    return Status::DataLoss("the masked input has the wrong length");
  }
  for (std::size_t w = 0; w < words.size(); ++w) sum_[w] += words[w];
  members_[i].masked = true;
  return Status::Ok();
}

Status Server::CloseInputs() {
  if (phase_ != Phase::kCollectingInputs)
    return Status::FailedPrecondition("not collecting inputs");
  if (survivor_count() < plan_.threshold) {
    return Fail(
        Status::Unavailable("fewer masked inputs arrived than the threshold; round aborted"));
  }
  for (std::uint32_t i = 0; i < cohort_size_; ++i) {
    members_[i].active = InU3(i) && !members_[i].left;
  }
  if (!signs()) {
    phase_ = Phase::kCollectingUnmasking;
    return Status::Ok();
  }
  survivor_set_size_ = 0;
  for (std::uint32_t k = 0; k < cohort_size_; ++k) {  // by_device_ is in id order
    if (InU3(by_device_[k].second)) survivor_set_[survivor_set_size_++] = by_device_[k].first;
  }
  survivors_statement_ = SurvivorsStatement(plan_.round, survivor_set_.first(survivor_set_size_));
  phase_ = Phase::kCollectingSignatures;
  return Status::Ok();
}

std::size_t Server::wrong_revealers() const {
  const std::span<const Member> cohort = members_.first(cohort_size_);
  return static_cast<std::size_t>(std::count_if(
      cohort.begin(), cohort.end(), [](const Member& member) { return member.revealed_wrong; }));
}

std::size_t Server::survivor_count() const {
  std::size_t count = 0;
  for (std::uint32_t i = 0; i < cohort_size_; ++i) count += InU3(i) ? 1u : 0u;
  return count;
}

bool Server::Survived(std::uint32_t device) const {
  const std::uint32_t i = IndexOf(device);
  return i != cohort_size_ && InU3(i);
}

Result<std::size_t> Server::SurvivorsFor(std::uint32_t device, std::span<std::uint32_t> out) const {
  const Phase due = signs() ? Phase::kCollectingSignatures : Phase::kCollectingUnmasking;
  if (phase_ != due) return Status::FailedPrecondition("no survivors now");
  const std::uint32_t i = IndexOf(device);
  if (i == cohort_size_ || !InU3(i)) return Status::NotFound("the device's input was not summed");
  if (signs()) {
    if (out.size() < survivor_set_size_) {
      return Status::ResourceExhausted("the survivor buffer is too short");
    }
    std::copy_n(survivor_set_.begin(), survivor_set_size_, out.begin());
    return std::size_t{survivor_set_size_};
  }
  std::size_t written = 0;
  for (std::uint32_t j : Neighbours(i)) {
    if (!InU3(j)) continue;
    if (written == out.size()) return Status::ResourceExhausted("the survivor buffer is too short");
    out[written++] = members_[j].device;
  }
  return written;
}

Status Server::AddUnmasking(std::uint32_t device, std::span<const RevealedShare> revealed) {
  if (phase_ != Phase::kCollectingUnmasking) {
    return Status::FailedPrecondition("shares were revealed outside the unmasking phase");
  }
  const std::uint32_t holder = IndexOf(device);
  if (holder == cohort_size_ || !InU3(holder) || !members_[holder].active) {
    return Status::NotFound("only devices whose input was summed take part in unmasking");
  }
  if (members_[holder].unmasked) return Status::AlreadyExists("the device revealed shares twice");
  // Validate everything first: a message with one bad entry contributes nothing.
  for (std::size_t r = 0; r < revealed.size(); ++r) {
    const std::uint32_t owner = IndexOf(revealed[r].owner);
    const bool is_self = owner == holder;
    if (owner == cohort_size_ || (!is_self && (SlotOf(holder, owner) == degree_ || !InU2(owner)))) {
      return Status::DataLoss(
          "a revealed share belongs to a device that is not the holder's neighbour");
    }
    const SecretKind expected = InU3(owner) ? SecretKind::kSelfMaskSeed : SecretKind::kMaskKey;
    if (revealed[r].kind != expected) {
      return Status::DataLoss("a revealed share is of the secret the server may not learn");
    }
    for (std::size_t q = 0; q < r; ++q) {
      if (revealed[q].owner == revealed[r].owner) {
        return Status::DataLoss("a device revealed two shares for one owner");
      }
    }
  }
  for (const RevealedShare& entry : revealed) {
    const std::uint32_t owner = IndexOf(entry.owner);
    const std::uint32_t slot = owner == holder ? degree_ : SlotOf(owner, holder);
    const std::size_t at = std::size_t{owner} * (degree_ + 1) + slot;
    revealed_[at] = entry.share;
    revealed_[at].x = holder + 1;  // the holder's point, as the server assigned it
    revealed_present_[at] = 1;
  }
  members_[holder].unmasked = true;
  return Status::Ok();
}

bool Server::SecretMatches(std::uint32_t owner, SecretKind kind, Key& secret) const {
  if (kind == SecretKind::kSelfMaskSeed) {
    return SecretsEqual(Sha256(secret), members_[owner].commitment);
  }
  secret = PrivateKeyFromSecret(secret);
  Key public_key;
  return PublicKeyOf(secret, public_key).ok() &&
         SecretsEqual(public_key, members_[owner].keys.mask_public);
}

Status Server::Reconstruct(std::uint32_t owner, SecretKind kind, Key& secret) {
  // The shares held, those of devices not caught lying first.
  const std::size_t base = std::size_t{owner} * (degree_ + 1);
  std::uint32_t held = 0;
  for (const bool trusted : {true, false}) {
    for (std::uint32_t slot = 0; slot <= degree_; ++slot) {
      if (!revealed_present_[base + slot]) continue;
      const Share& share = revealed_[base + slot];
      if (members_[share.x - 1].revealed_wrong != trusted) combine_[held++] = share;
    }
  }
  if (held < plan_.threshold) {
    return Status::Unavailable(kind == SecretKind::kSelfMaskSeed
                                   ? "too many devices left during unmasking: a self-mask seed "
                                     "has fewer shares than the threshold; round aborted"
                                   : "too many devices left during unmasking: a dropped device's "
                                     "mask key has fewer shares than the threshold; round aborted");
  }
  // Leaves out the shares at positions `a` and `b` (held: none) and combines the first t left.
  const auto try_without = [&](std::uint32_t a, std::uint32_t b) {
    std::uint32_t count = 0;
    for (std::uint32_t k = 0; k < held && count < plan_.threshold; ++k) {
      if (k != a && k != b) chosen_[count++] = combine_[k];
    }
    Result<Key> combined = CombineShares(chosen_.first(count), plan_.threshold);
    Wipe(std::as_writable_bytes(chosen_.first(count)));
    if (!combined.ok()) return false;
    secret = combined.value();
    if (SecretMatches(owner, kind, secret)) return true;
    Wipe(secret);
    return false;
  };
  // Only leaving out one of the first t (or t + 1, for the second) changes the shares combined.
  const std::uint32_t spare = held - plan_.threshold;
  const std::uint32_t t = plan_.threshold;
  if (try_without(held, held)) return Status::Ok();
  if (spare >= 2) {  // decoding corrects up to spare / 2 wrong shares, and names them
    const std::span<std::uint8_t> wrong = decode_wrong_.first(held);
    Result<Key> decoded = DecodeShares(combine_.first(held), t, decode_scratch_, wrong);
    if (decoded.ok()) {
      secret = decoded.value();
      if (SecretMatches(owner, kind, secret)) {
        for (std::uint32_t k = 0; k < held; ++k) {
          if (wrong[k] != 0) members_[combine_[k].x - 1].revealed_wrong = true;
        }
        return Status::Ok();
      }
      Wipe(secret);
    }
  }
  // Fewer spare shares than decoding needs: leave out one, then two, in turn.
  for (std::uint32_t a = 0; spare >= 1 && a < t; ++a) {
    if (try_without(a, held)) {
      members_[combine_[a].x - 1].revealed_wrong = true;
      return Status::Ok();
    }
  }
  for (std::uint32_t a = 0; spare >= 2 && a < t; ++a) {
    for (std::uint32_t b = a + 1; b <= t; ++b) {
      if (try_without(a, b)) {
        // One of the two lied; without knowing which, both go last from now on.
        members_[combine_[a].x - 1].revealed_wrong = true;
        members_[combine_[b].x - 1].revealed_wrong = true;
        return Status::Ok();
      }
    }
  }
  return Status::DataLoss(
      kind == SecretKind::kSelfMaskSeed
          ? "the revealed shares of a self-mask seed do not rebuild its commitment: more of them "
            "are wrong than decoding corrects or two left out explain; round aborted"
          : "the revealed shares of a dropped device's mask key do not rebuild its public key: "
            "more of them are wrong than decoding corrects or two left out explain; round "
            "aborted");
}

Status Server::Finish() {
  if (phase_ != Phase::kCollectingUnmasking) return Status::FailedPrecondition("not unmasking");
  const std::span<std::uint32_t> sum(sum_.data(), plan_.words);
  for (std::uint32_t u = 0; u < cohort_size_; ++u) {
    Key secret{};
    if (InU3(u)) {
      const Status s = Reconstruct(u, SecretKind::kSelfMaskSeed, secret);
      if (!s.ok()) {
        Wipe(secret);
        return Fail(s);
      }
      ApplyMask(secret, MaskSign::kSubtract, sum);
    } else if (InU2(u)) {
      const auto list = Neighbours(u);
      if (std::none_of(list.begin(), list.end(), [&](std::uint32_t j) { return InU3(j); })) {
        continue;  // nobody masked with it
      }
      Status s = Reconstruct(u, SecretKind::kMaskKey, secret);
      for (std::uint32_t j : list) {
        if (!s.ok()) break;
        if (!InU3(j)) continue;
        Key seed;
        s = internal::PairMaskSeed(secret, members_[j].keys.mask_public, plan_.round,
                                   members_[u].device, members_[j].device, seed);
        if (s.ok()) {
          // Survivor j applied PairMaskSign(j, u) to its input; take it back out.
          const bool added =
              internal::PairMaskSign(members_[j].device, members_[u].device) == MaskSign::kAdd;
          ApplyMask(seed, added ? MaskSign::kSubtract : MaskSign::kAdd, sum);
        }
        Wipe(seed);
      }
      if (!s.ok()) {
        Wipe(secret);
        return Fail(s);
      }
    }
    Wipe(secret);
  }
  phase_ = Phase::kFinished;
  return Status::Ok();
}

}  // namespace edgesgd::secagg
