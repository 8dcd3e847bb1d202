#pragma once

// Conversions between edgesgd's C++ enums and the generated schema enums, which share their
// numbering (checked below, value by value, so a reordered enum on either side fails to
// compile rather than mislabelling frames).

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "edgesgd/core/payload.h"
#include "edgesgd/core/status.h"
#include "edgesgd/wire/edgesgd_generated.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::wire::internal {

template <typename E>
constexpr auto Raw(E value) {
  return static_cast<std::underlying_type_t<E>>(value);
}

template <typename To, typename From>
constexpr To EnumCast(From value) {
  return static_cast<To>(Raw(value));
}

// True when `value` is one of the schema enum FbEnum's values (they are contiguous from 0).
template <typename FbEnum, typename E>
constexpr bool FitsSchema(E value) {
  return Raw(value) <= Raw(FbEnum::MAX);
}

// ---- Same numbering on both sides ----

static_assert(EnumCast<fb::Architecture>(Architecture::kUnknown) == fb::Architecture::Unknown);
static_assert(EnumCast<fb::Architecture>(Architecture::kX86_64) == fb::Architecture::X86_64);
static_assert(EnumCast<fb::Architecture>(Architecture::kAarch64) == fb::Architecture::Aarch64);
static_assert(EnumCast<fb::Architecture>(Architecture::kArmv7) == fb::Architecture::Armv7);
static_assert(EnumCast<fb::Architecture>(Architecture::kCortexM) == fb::Architecture::CortexM);
static_assert(fb::Architecture::MAX == fb::Architecture::CortexM);

static_assert(EnumCast<fb::BroadcastContent>(BroadcastContent::kModel) ==
              fb::BroadcastContent::Model);
static_assert(EnumCast<fb::BroadcastContent>(BroadcastContent::kAggregate) ==
              fb::BroadcastContent::Aggregate);
static_assert(fb::BroadcastContent::MAX == fb::BroadcastContent::Aggregate);

static_assert(EnumCast<fb::GossipVector>(GossipVector::kModel) == fb::GossipVector::Model);
static_assert(EnumCast<fb::GossipVector>(GossipVector::kTracker) == fb::GossipVector::Tracker);
static_assert(EnumCast<fb::GossipVector>(GossipVector::kModelDelta) ==
              fb::GossipVector::ModelDelta);
static_assert(EnumCast<fb::GossipVector>(GossipVector::kTrackerDelta) ==
              fb::GossipVector::TrackerDelta);
static_assert(EnumCast<fb::GossipVector>(GossipVector::kModelCopy) == fb::GossipVector::ModelCopy);
static_assert(EnumCast<fb::GossipVector>(GossipVector::kCopyRequest) ==
              fb::GossipVector::CopyRequest);
static_assert(fb::GossipVector::MAX == fb::GossipVector::CopyRequest);
static_assert(static_cast<std::size_t>(fb::GossipVector::MAX) + 1 == kGossipVectorCount);

static_assert(EnumCast<fb::LeaveReason>(LeaveReason::kDone) == fb::LeaveReason::Done);
static_assert(EnumCast<fb::LeaveReason>(LeaveReason::kShutdown) == fb::LeaveReason::Shutdown);
static_assert(EnumCast<fb::LeaveReason>(LeaveReason::kFailure) == fb::LeaveReason::Failure);
static_assert(EnumCast<fb::LeaveReason>(LeaveReason::kLowPower) == fb::LeaveReason::LowPower);
static_assert(EnumCast<fb::LeaveReason>(LeaveReason::kRefusedRun) == fb::LeaveReason::RefusedRun);
static_assert(fb::LeaveReason::MAX == fb::LeaveReason::RefusedRun);

static_assert(fb::Payload::NONE == fb::Payload(0));
static_assert(EnumCast<fb::Payload>(PayloadLayout::kDense) == fb::Payload::DensePayload);
static_assert(EnumCast<fb::Payload>(PayloadLayout::kSparse) == fb::Payload::SparsePayload);
static_assert(EnumCast<fb::Payload>(PayloadLayout::kBlock) == fb::Payload::BlockPayload);
static_assert(EnumCast<fb::Payload>(PayloadLayout::kSignWords) == fb::Payload::SignPayload);
static_assert(EnumCast<fb::Payload>(PayloadLayout::kQuantized) == fb::Payload::QuantizedPayload);
static_assert(EnumCast<fb::Payload>(PayloadLayout::kPackedWords) == fb::Payload::PackedPayload);
static_assert(Raw(fb::Payload::MAX) == kPayloadLayoutCount);

static_assert(EnumCast<fb::Message>(MessageKind::kNone) == fb::Message::NONE);
static_assert(EnumCast<fb::Message>(MessageKind::kJoin) == fb::Message::Join);
static_assert(EnumCast<fb::Message>(MessageKind::kWelcome) == fb::Message::Welcome);
static_assert(EnumCast<fb::Message>(MessageKind::kModelBroadcast) == fb::Message::ModelBroadcast);
static_assert(EnumCast<fb::Message>(MessageKind::kUpdate) == fb::Message::Update);
static_assert(EnumCast<fb::Message>(MessageKind::kGossipExchange) == fb::Message::GossipExchange);
static_assert(EnumCast<fb::Message>(MessageKind::kHeartbeat) == fb::Message::Heartbeat);
static_assert(EnumCast<fb::Message>(MessageKind::kLeave) == fb::Message::Leave);
static_assert(EnumCast<fb::Message>(MessageKind::kError) == fb::Message::Error);
static_assert(EnumCast<fb::Message>(MessageKind::kSecureAggregation) ==
              fb::Message::SecureAggregation);
static_assert(fb::Message::MAX == fb::Message::SecureAggregation);

static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kKeys) == fb::SecurePhase::Keys);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kRoster) == fb::SecurePhase::Roster);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kShares) == fb::SecurePhase::Shares);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kDeliveredShares) ==
              fb::SecurePhase::DeliveredShares);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kMaskedInput) == fb::SecurePhase::MaskedInput);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kSurvivors) == fb::SecurePhase::Survivors);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kUnmasking) == fb::SecurePhase::Unmasking);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kConsistency) ==
              fb::SecurePhase::Consistency);
static_assert(EnumCast<fb::SecurePhase>(SecurePhase::kSignatures) == fb::SecurePhase::Signatures);
static_assert(fb::SecurePhase::MAX == fb::SecurePhase::Signatures);

static_assert(sizeof(fb::SecureKey) == kSecureKeyBytes);
static_assert(sizeof(fb::SecureSignature) == kSecureSignatureBytes);

// ---- C++ -> schema ----

constexpr fb::Architecture ToFb(Architecture value) { return EnumCast<fb::Architecture>(value); }
constexpr fb::BroadcastContent ToFb(BroadcastContent value) {
  return EnumCast<fb::BroadcastContent>(value);
}
constexpr fb::GossipVector ToFb(GossipVector value) { return EnumCast<fb::GossipVector>(value); }
constexpr fb::LeaveReason ToFb(LeaveReason value) { return EnumCast<fb::LeaveReason>(value); }
constexpr fb::Payload ToFb(PayloadLayout value) { return EnumCast<fb::Payload>(value); }
constexpr fb::Message ToFb(MessageKind value) { return EnumCast<fb::Message>(value); }

// ---- Values the schema can carry (encoders refuse others with kInvalidArgument, decoders
// treat them as malformed) ----

constexpr bool InSchema(Architecture value) { return FitsSchema<fb::Architecture>(value); }
constexpr bool InSchema(LeaveReason value) { return FitsSchema<fb::LeaveReason>(value); }
constexpr bool InSchema(SecurePhase value) { return FitsSchema<fb::SecurePhase>(value); }
constexpr bool InSchema(StatusCode value) { return Raw(value) <= Raw(StatusCode::kInternal); }

// Errors: kInvalidArgument unless `message` is an Update, ModelBroadcast or GossipExchange whose
// enums the schema can carry.
constexpr Status CheckPayloadMessage(const PayloadMessage& message) {
  switch (message.kind) {
    case MessageKind::kUpdate:
      return Status::Ok();
    case MessageKind::kModelBroadcast:
      return FitsSchema<fb::BroadcastContent>(message.broadcast.content)
                 ? Status::Ok()
                 : Status::InvalidArgument("the broadcast content is outside the schema");
    case MessageKind::kGossipExchange:
      return FitsSchema<fb::GossipVector>(message.gossip.vector)
                 ? Status::Ok()
                 : Status::InvalidArgument("the gossip vector is outside the schema");
    default:
      return Status::InvalidArgument("the message kind carries no payload");
  }
}

}  // namespace edgesgd::wire::internal
