#include "edgesgd/secagg/frame_stage.h"

#include <algorithm>
#include <type_traits>

#include "arena_objects.h"

namespace edgesgd::secagg {
namespace {

// The wire's records carry the state machines' values unchanged.
static_assert(std::is_same_v<Key, wire::SecureKey>);
static_assert(kSealedSharesBytes == wire::kSecureSealedBytes);
static_assert(kShareWords == wire::kSecureShareWords);
static_assert(static_cast<std::uint8_t>(SecretKind::kSelfMaskSeed) == wire::kSecureSeedShare);
static_assert(static_cast<std::uint8_t>(SecretKind::kMaskKey) == wire::kSecureMaskKeyShare);
static_assert(std::is_same_v<Signature, wire::SecureSignature>);

wire::SecureMessage MessageOf(wire::SecurePhase phase) {
  wire::SecureMessage message;
  message.fields.phase = phase;
  return message;
}

SealedShares FromWire(const wire::SecureSealedRecord& record) {
  SealedShares out;
  out.device = record.device;
  out.sealed = record.sealed;
  return out;
}

wire::SecureSealedRecord ToWire(const SealedShares& shares) {
  wire::SecureSealedRecord out;
  out.device = shares.device;
  out.sealed = shares.sealed;
  return out;
}

RevealedShare FromWire(const wire::SecureShareRecord& record) {
  RevealedShare out;
  out.owner = record.owner;
  out.kind = static_cast<SecretKind>(record.kind);  // the decoder admits 0 and 1 only
  out.share.y = record.y;  // its point is the holder's, which the server knows
  return out;
}

wire::SecureShareRecord ToWire(const RevealedShare& revealed) {
  wire::SecureShareRecord out;
  out.owner = revealed.owner;
  out.kind = static_cast<std::uint8_t>(revealed.kind);
  out.y = revealed.share.y;
  return out;
}

// Copies the records of a received list into `out` (at most out.size() of them) and returns the
// filled part. Errors: kOutOfRange for a longer list.
template <typename Record, typename Value, typename Convert>
Result<std::span<Value>> Collect(const wire::SecureRecords<Record>& records, std::span<Value> out,
                                 Convert convert) {
  if (records.size() > out.size()) {
    return Status::OutOfRange("the message lists more records than the neighbourhood allows");
  }
  for (std::size_t i = 0; i < records.size(); ++i) out[i] = convert(records[i]);
  return out.first(records.size());
}

}  // namespace

// ---- DeviceStage ----

std::size_t DeviceStage::ArenaBytes(const DeviceStageLimits& limits) {
  const std::size_t k = limits.client.max_neighbours;
  return Client::ArenaBytes(limits.client) + ArenaBytesFor<std::uint32_t>(limits.words) +
         ArenaBytesFor<RosterEntry>(k) + ArenaBytesFor<SealedShares>(k) +
         ArenaBytesFor<RevealedShare>(k + 1) + ArenaBytesFor<wire::SecureSealedRecord>(k) +
         ArenaBytesFor<wire::SecureShareRecord>(k + 1) + ArenaBytesFor<SurvivorSignature>(k);
}

Status DeviceStage::Init(Arena& arena, const DeviceStageLimits& limits) {
  if (limits.words == 0) return Status::InvalidArgument("secure aggregation needs an input");
  EDGESGD_TRY(client_.Init(arena, limits.client));
  const std::size_t k = limits.client.max_neighbours;
  EDGESGD_TRY_ASSIGN(input_, arena.Allocate<std::uint32_t>(limits.words));
  EDGESGD_TRY_ASSIGN(roster_, internal::ConstructInArena<RosterEntry>(arena, k));
  EDGESGD_TRY_ASSIGN(sealed_, internal::ConstructInArena<SealedShares>(arena, k));
  EDGESGD_TRY_ASSIGN(revealed_, internal::ConstructInArena<RevealedShare>(arena, k + 1));
  EDGESGD_TRY_ASSIGN(sealed_records_,
                     internal::ConstructInArena<wire::SecureSealedRecord>(arena, k));
  EDGESGD_TRY_ASSIGN(revealed_records_,
                     internal::ConstructInArena<wire::SecureShareRecord>(arena, k + 1));
  EDGESGD_TRY_ASSIGN(signatures_, internal::ConstructInArena<SurvivorSignature>(arena, k));
  max_neighbours_ = limits.client.max_neighbours;
  return Status::Ok();
}

Result<wire::SecureMessage> DeviceStage::Start(std::uint64_t round, std::uint32_t device,
                                               const Key& entropy,
                                               std::span<const std::uint32_t> input) {
  if (input.size() != input_.size()) {
    return Status::InvalidArgument("the input's length is not the stage's");
  }
  std::copy(input.begin(), input.end(), input_.begin());
  return StartWithInput(round, device, entropy);
}

Result<wire::SecureMessage> DeviceStage::StartWithInput(std::uint64_t round, std::uint32_t device,
                                                        const Key& entropy) {
  KeyAdvertisement keys;
  EDGESGD_TRY(client_.Start(round, device, entropy, keys));
  wire::SecureMessage message = MessageOf(wire::SecurePhase::kKeys);
  message.fields.cipher_public = keys.cipher_public;
  message.fields.mask_public = keys.mask_public;
  message.fields.signature = keys.signature;
  return message;
}

Result<wire::SecureMessage> DeviceStage::Handle(const wire::SecureView& message) {
  switch (message.fields.phase) {
    case wire::SecurePhase::kRoster:
      return ShareKeys(message);
    case wire::SecurePhase::kDeliveredShares:
      return MaskInput(message);
    case wire::SecurePhase::kSurvivors:
      return client_.signs() ? SignSurvivors(message) : Unmask(message);
    case wire::SecurePhase::kSignatures:
      return UnmaskSigned(message);
    default:
      return Status::InvalidArgument("a device does not receive this phase's message");
  }
}

Result<wire::SecureMessage> DeviceStage::ShareKeys(const wire::SecureView& message) {
  EDGESGD_TRY_ASSIGN(
      const std::span<RosterEntry> roster,
      Collect(message.roster, roster_, [](const wire::SecureRosterRecord& entry) {
        return RosterEntry{entry.device, entry.share_point, entry.cipher_public, entry.mask_public,
                           entry.keys_signature};
      }));
  wire::SecureMessage answer = MessageOf(wire::SecurePhase::kShares);
  EDGESGD_TRY_ASSIGN(const std::size_t count,
                     client_.ShareKeys(message.fields.threshold, message.fields.share_point, roster,
                                       answer.fields.commitment, sealed_));
  for (std::size_t i = 0; i < count; ++i) sealed_records_[i] = ToWire(sealed_[i]);
  answer.shares = sealed_records_.first(count);
  return answer;
}

Result<wire::SecureMessage> DeviceStage::MaskInput(const wire::SecureView& message) {
  EDGESGD_TRY_ASSIGN(const std::span<SealedShares> delivered,
                     Collect(message.shares, sealed_, [](const wire::SecureSealedRecord& record) {
                       return FromWire(record);
                     }));
  EDGESGD_TRY(client_.ReceiveShares(delivered));
  EDGESGD_TRY(client_.MaskInput(input_));
  wire::SecureMessage answer = MessageOf(wire::SecurePhase::kMaskedInput);
  answer.masked = input_;
  return answer;
}

Result<wire::SecureMessage> DeviceStage::Unmask(const wire::SecureView& message) {
  if (message.survivors.size() > max_neighbours_) {
    return Status::OutOfRange("the message lists more records than the neighbourhood allows");
  }
  EDGESGD_TRY_ASSIGN(const std::size_t count, client_.Unmask(message.survivors, revealed_));
  for (std::size_t i = 0; i < count; ++i) revealed_records_[i] = ToWire(revealed_[i]);
  wire::SecureMessage answer = MessageOf(wire::SecurePhase::kUnmasking);
  answer.revealed = revealed_records_.first(count);
  return answer;
}

Result<wire::SecureMessage> DeviceStage::SignSurvivors(const wire::SecureView& message) {
  // The whole survivor set, read in place: its length is bounded by the frame's.
  wire::SecureMessage answer = MessageOf(wire::SecurePhase::kConsistency);
  EDGESGD_TRY(client_.SignSurvivors(message.survivors, answer.fields.signature));
  return answer;
}

Result<wire::SecureMessage> DeviceStage::UnmaskSigned(const wire::SecureView& message) {
  EDGESGD_TRY_ASSIGN(const std::span<SurvivorSignature> signatures,
                     Collect(message.signatures, signatures_,
                             [](const wire::SecureSignatureRecord& record) {
                               return SurvivorSignature{record.device, record.signature};
                             }));
  EDGESGD_TRY_ASSIGN(const std::size_t count, client_.Unmask(signatures, revealed_));
  for (std::size_t i = 0; i < count; ++i) revealed_records_[i] = ToWire(revealed_[i]);
  wire::SecureMessage answer = MessageOf(wire::SecurePhase::kUnmasking);
  answer.revealed = revealed_records_.first(count);
  return answer;
}

// ---- ServerStage ----

std::size_t ServerStage::ArenaBytes(const ServerLimits& limits) {
  const std::size_t k = limits.max_neighbours;
  return Server::ArenaBytes(limits) + ArenaBytesFor<RosterEntry>(k) +
         ArenaBytesFor<SealedShares>(k) + ArenaBytesFor<std::uint32_t>(limits.max_devices) +
         ArenaBytesFor<RevealedShare>(k + 1) + ArenaBytesFor<wire::SecureRosterRecord>(k) +
         ArenaBytesFor<wire::SecureSealedRecord>(k) + ArenaBytesFor<SurvivorSignature>(k) +
         ArenaBytesFor<wire::SecureSignatureRecord>(k);
}

Status ServerStage::Init(Arena& arena, const ServerLimits& limits) {
  EDGESGD_TRY(server_.Init(arena, limits));
  const std::size_t k = limits.max_neighbours;
  EDGESGD_TRY_ASSIGN(roster_, internal::ConstructInArena<RosterEntry>(arena, k));
  EDGESGD_TRY_ASSIGN(sealed_, internal::ConstructInArena<SealedShares>(arena, k));
  // Signed rounds send every device the whole survivor set.
  EDGESGD_TRY_ASSIGN(survivors_, arena.Allocate<std::uint32_t>(limits.max_devices));
  EDGESGD_TRY_ASSIGN(revealed_, internal::ConstructInArena<RevealedShare>(arena, k + 1));
  EDGESGD_TRY_ASSIGN(roster_records_,
                     internal::ConstructInArena<wire::SecureRosterRecord>(arena, k));
  EDGESGD_TRY_ASSIGN(sealed_records_,
                     internal::ConstructInArena<wire::SecureSealedRecord>(arena, k));
  EDGESGD_TRY_ASSIGN(signatures_, internal::ConstructInArena<SurvivorSignature>(arena, k));
  EDGESGD_TRY_ASSIGN(signature_records_,
                     internal::ConstructInArena<wire::SecureSignatureRecord>(arena, k));
  return Status::Ok();
}

Status ServerStage::Add(std::uint32_t device, const wire::SecureView& message) {
  const wire::SecurePhase phase = message.fields.phase;
  switch (server_.phase()) {
    case Server::Phase::kCollectingKeys:
      if (phase != wire::SecurePhase::kKeys) break;
      return server_.AddKeys(device, {message.fields.cipher_public, message.fields.mask_public,
                                      message.fields.signature});
    case Server::Phase::kCollectingShares: {
      if (phase != wire::SecurePhase::kShares) break;
      EDGESGD_TRY_ASSIGN(
          const std::span<SealedShares> shares,
          Collect(message.shares, sealed_,
                  [](const wire::SecureSealedRecord& record) { return FromWire(record); }));
      return server_.AddShares(device, message.fields.commitment, shares);
    }
    case Server::Phase::kCollectingInputs:
      if (phase != wire::SecurePhase::kMaskedInput) break;
      return server_.AddMaskedInput(device, message.masked);
    case Server::Phase::kCollectingSignatures:
      if (phase != wire::SecurePhase::kConsistency) break;
      return server_.AddSignature(device, message.fields.signature);
    case Server::Phase::kCollectingUnmasking: {
      if (phase != wire::SecurePhase::kUnmasking) break;
      EDGESGD_TRY_ASSIGN(
          const std::span<RevealedShare> revealed,
          Collect(message.revealed, revealed_,
                  [](const wire::SecureShareRecord& record) { return FromWire(record); }));
      return server_.AddUnmasking(device, revealed);
    }
    default:
      break;
  }
  return Status::FailedPrecondition("the message belongs to another phase than the server's");
}

Status ServerStage::Close() {
  switch (server_.phase()) {
    case Server::Phase::kCollectingKeys:
      return server_.CloseKeys();
    case Server::Phase::kCollectingShares:
      return server_.CloseShares();
    case Server::Phase::kCollectingInputs:
      return server_.CloseInputs();
    case Server::Phase::kCollectingSignatures:
      return server_.CloseSignatures();
    case Server::Phase::kCollectingUnmasking:
      return server_.Finish();
    default:
      return Status::FailedPrecondition("no phase of a round is being collected");
  }
}

Result<wire::SecureMessage> ServerStage::MessageFor(std::uint32_t device) {
  switch (server_.phase()) {
    case Server::Phase::kCollectingShares: {
      wire::SecureMessage message = MessageOf(wire::SecurePhase::kRoster);
      EDGESGD_TRY_ASSIGN(const std::size_t count,
                         server_.RosterFor(device, message.fields.share_point, roster_));
      for (std::size_t i = 0; i < count; ++i) {
        const RosterEntry& entry = roster_[i];
        roster_records_[i] = {entry.device, entry.share_point, entry.cipher_public,
                              entry.mask_public, entry.keys_signature};
      }
      message.fields.threshold = server_.plan().threshold;
      message.roster = roster_records_.first(count);
      return message;
    }
    case Server::Phase::kCollectingInputs: {
      wire::SecureMessage message = MessageOf(wire::SecurePhase::kDeliveredShares);
      EDGESGD_TRY_ASSIGN(const std::size_t count, server_.SharesFor(device, sealed_));
      for (std::size_t i = 0; i < count; ++i) sealed_records_[i] = ToWire(sealed_[i]);
      message.shares = sealed_records_.first(count);
      return message;
    }
    case Server::Phase::kCollectingUnmasking:
      if (server_.signs()) {
        wire::SecureMessage message = MessageOf(wire::SecurePhase::kSignatures);
        EDGESGD_TRY_ASSIGN(const std::size_t count, server_.SignaturesFor(device, signatures_));
        for (std::size_t i = 0; i < count; ++i) {
          signature_records_[i] = {signatures_[i].device, signatures_[i].signature};
        }
        message.signatures = signature_records_.first(count);
        return message;
      }
      [[fallthrough]];
    case Server::Phase::kCollectingSignatures: {
      wire::SecureMessage message = MessageOf(wire::SecurePhase::kSurvivors);
      EDGESGD_TRY_ASSIGN(const std::size_t count, server_.SurvivorsFor(device, survivors_));
      message.survivors = survivors_.first(count);
      return message;
    }
    default:
      return Status::FailedPrecondition("no message is due: no phase has closed");
  }
}

}  // namespace edgesgd::secagg
