#include "edgesgd/wire/frame_decoder.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgesgd/core/scaffold.h"
#include "edgesgd/wire/receive_buffer.h"
#include "schema_mapping.h"

namespace edgesgd::wire {
namespace {

// Verifier limits. The schema nests at most three tables (Envelope > Welcome > CodecConfig) and
// a frame holds at most five (Envelope, Welcome, CodecConfig, TrainingConfig, PrivacyConfig);
// the margin allows nothing a hostile frame could use to make verification expensive.
constexpr flatbuffers::uoffset_t kVerifierMaxDepth = 4;
constexpr flatbuffers::uoffset_t kVerifierMaxTables = 8;

// Byte offset of the file identifier: after the length prefix and the root offset.
constexpr std::size_t kIdentifierOffset = kFramePrefixBytes + sizeof(flatbuffers::uoffset_t);

static_assert(kFileIdentifier.size() == flatbuffers::kFileIdentifierLength);
static_assert(kMaxFrameBytes < FLATBUFFERS_MAX_BUFFER_SIZE);
static_assert(kMinFrameBytes >= kIdentifierOffset + flatbuffers::kFileIdentifierLength);

// The Message union's verifier for the kinds this build decodes. The generated one verifies every
// kind, and a build without secure aggregation (a microcontroller's) would carry that table's
// verifier for nothing; a kind left out passes here unverified, as unknown kinds do, and
// DecodeMessage refuses it.
bool VerifyDecodedMessage(flatbuffers::Verifier& verifier, const void* message, fb::Message type) {
  switch (type) {
    case fb::Message::Join:
      return verifier.VerifyTable(static_cast<const fb::Join*>(message));
    case fb::Message::Welcome:
      return verifier.VerifyTable(static_cast<const fb::Welcome*>(message));
    case fb::Message::ModelBroadcast:
      return verifier.VerifyTable(static_cast<const fb::ModelBroadcast*>(message));
    case fb::Message::Update:
      return verifier.VerifyTable(static_cast<const fb::Update*>(message));
    case fb::Message::GossipExchange:
      return verifier.VerifyTable(static_cast<const fb::GossipExchange*>(message));
    case fb::Message::Heartbeat:
      return verifier.VerifyTable(static_cast<const fb::Heartbeat*>(message));
    case fb::Message::Leave:
      return verifier.VerifyTable(static_cast<const fb::Leave*>(message));
    case fb::Message::Error:
      return verifier.VerifyTable(static_cast<const fb::Error*>(message));
    case fb::Message::SecureAggregation:
      if constexpr (kSecureAggregationFrames) {
        return verifier.VerifyTable(static_cast<const fb::SecureAggregation*>(message));
      }
      return true;
    case fb::Message::NONE:
      break;
  }
  return true;
}

// The root table as Verifier::VerifySizePrefixedBuffer verifies it: the generated
// Envelope::Verify, field by field, with VerifyDecodedMessage for the union. The wire tests check
// that it agrees with the generated verifier on every frame they try.
class VerifiedEnvelope : private flatbuffers::Table {
 public:
  bool Verify(flatbuffers::Verifier& verifier) const {
    using E = fb::Envelope;
    return VerifyTableStart(verifier) && VerifyField<std::uint16_t>(verifier, E::VT_VERSION, 2) &&
           VerifyField<std::uint32_t>(verifier, E::VT_SENDER, 4) &&
           VerifyField<std::uint32_t>(verifier, E::VT_ROUND, 4) &&
           VerifyField<std::uint64_t>(verifier, E::VT_SEQUENCE, 8) &&
           VerifyField<std::uint8_t>(verifier, E::VT_MESSAGE_TYPE, 1) &&
           VerifyOffset(verifier, E::VT_MESSAGE) &&
           VerifyDecodedMessage(
               verifier, GetPointer<const void*>(E::VT_MESSAGE),
               static_cast<fb::Message>(GetField<std::uint8_t>(E::VT_MESSAGE_TYPE, 0))) &&
           verifier.EndTable();
  }
};

// A verified vector as a span (empty when the field is absent).
template <typename T>
std::span<const T> AsSpan(const flatbuffers::Vector<T>* vector) {
  if (vector == nullptr) return {};
  return std::span<const T>(vector->data(), vector->size());
}

// Fills `out` from a payload union member of type `type` from codec `codec`. Which codec may
// send which table is the receiver's check (ParamsForPayload); here only the table must exist.
// Errors: kDataLoss (no payload, or a table this version does not know).
Status DecodePayload(CodecId codec, fb::Payload type, const void* table, EncodedPayload& out) {
  if (table == nullptr) return Status::DataLoss("the payload is missing");
  out.codec = codec;
  switch (type) {
    case fb::Payload::DensePayload: {
      const auto* payload = static_cast<const fb::DensePayload*>(table);
      out.layout = PayloadLayout::kDense;
      out.view.values = AsSpan(payload->values());
      return Status::Ok();
    }
    case fb::Payload::SparsePayload: {
      const auto* payload = static_cast<const fb::SparsePayload*>(table);
      out.layout = PayloadLayout::kSparse;
      out.view.indices = AsSpan(payload->indices());
      out.view.values = AsSpan(payload->values());
      return Status::Ok();
    }
    case fb::Payload::BlockPayload: {
      const auto* payload = static_cast<const fb::BlockPayload*>(table);
      out.layout = PayloadLayout::kBlock;
      out.view.indices = AsSpan(payload->starts());
      out.view.values = AsSpan(payload->values());
      return Status::Ok();
    }
    case fb::Payload::SignPayload: {
      const auto* payload = static_cast<const fb::SignPayload*>(table);
      out.layout = PayloadLayout::kSignWords;
      out.view.words = AsSpan(payload->words());
      out.view.scales = AsSpan(payload->scales());
      return Status::Ok();
    }
    case fb::Payload::QuantizedPayload: {
      const auto* payload = static_cast<const fb::QuantizedPayload*>(table);
      out.layout = PayloadLayout::kQuantized;
      out.view.words = AsSpan(payload->words());
      out.view.scales = AsSpan(payload->norms());
      out.header = QuantizedHeader{payload->levels(), payload->bucket()};
      return Status::Ok();
    }
    case fb::Payload::PackedPayload: {
      const auto* payload = static_cast<const fb::PackedPayload*>(table);
      out.layout = PayloadLayout::kPackedWords;
      out.view.words = AsSpan(payload->words());
      return Status::Ok();
    }
    case fb::Payload::NONE:
      break;
  }
  return Status::DataLoss("the payload table is unknown");
}

Status DecodeJoin(const fb::Join* join, JoinInfo& out) {
  if (join == nullptr || !internal::FitsSchema<fb::Architecture>(join->architecture())) {
    return Status::DataLoss("the Join is missing or names an unknown architecture");
  }
  out.architecture = internal::EnumCast<Architecture>(join->architecture());
  out.codecs = join->codecs();
  out.max_frame_bytes = join->max_frame_bytes();
  out.memory_bytes = join->memory_bytes();
  out.features = join->features();
  return Status::Ok();
}

Status DecodeWelcome(const fb::Welcome* welcome, WelcomeInfo& out) {
  if (welcome == nullptr) return Status::DataLoss("the Welcome is missing");
  out.assigned_id = welcome->assigned_id();
  out.workers = welcome->workers();
  out.rounds = welcome->rounds();
  out.seed = welcome->seed();

  const flatbuffers::Vector<std::uint32_t>* sizes = welcome->tensor_sizes();
  if (sizes == nullptr || sizes->size() == 0 || sizes->size() > kMaxTensors) {
    return Status::DataLoss("the Welcome has no tensor sizes or more than 64");
  }
  std::array<std::uint64_t, kMaxTensors> sizes64{};
  for (flatbuffers::uoffset_t t = 0; t < sizes->size(); ++t) sizes64[t] = sizes->Get(t);
  const Result<TensorLayout> layout =
      TensorLayout::FromSizes(std::span<const std::uint64_t>(sizes64.data(), sizes->size()));
  // The dimension travels separately so a reader (or flatc) sees it at a glance; it must agree.
  if (!layout.ok() || layout.value().dimension() != welcome->dimension()) {
    return Status::DataLoss(
        "the Welcome's tensor sizes are invalid or disagree with its dimension");
  }
  out.layout = layout.value();

  const fb::CodecConfig* codec = welcome->codec();
  if (codec == nullptr) return Status::DataLoss("the Welcome names no codec");
  const Result<CodecParams> params = ParamsFromWords(codec->codec(), AsSpan(codec->parameters()));
  if (!params.ok()) {
    // The reason (unknown codec, a value outside its domain) is worth more than "malformed".
    return Status::DataLoss(params.status().reason());
  }
  out.codec = params.value();

  // Absent training configuration: all fields at their defaults.
  out.training = TrainingConfig{};
  out.secure = SecureConfig{};
  if (const fb::TrainingConfig* training = welcome->training(); training != nullptr) {
    TrainingConfig& t = out.training;
    t.feedback = training->feedback();
    t.detach = training->detach();
    t.optimizer = training->optimizer();
    t.learning_rate = training->learning_rate();
    t.momentum = training->momentum();
    t.weight_decay = training->weight_decay();
    t.local_steps = training->local_steps();
    t.batch = training->batch();
    t.aggregate = training->aggregate();
    t.participation = training->participation();
    t.mode = training->mode();
    t.gossip = training->gossip();
    t.topology = training->topology();
    t.gossip_rounds = training->gossip_rounds();
    t.prox_mu = training->prox_mu();
    t.scaffold = training->scaffold();
    // A build without secure aggregation reads none (its workers then see a run without it).
    if constexpr (kSecureAggregationFrames) {
      out.secure = {training->secure_threshold(), training->secure_neighbours(),
                    training->secure_bound(), training->secure_signed()};
    }
  }
  out.privacy = PrivacyConfig{};
  if (const fb::PrivacyConfig* privacy = welcome->privacy(); privacy != nullptr) {
    PrivacyConfig& p = out.privacy;
    p.mode = privacy->mode();
    p.clip = privacy->clip();
    p.noise_multiplier = privacy->noise_multiplier();
    p.delta = privacy->delta();
    p.target_quantile = privacy->target_quantile();
    p.clip_learning_rate = privacy->clip_learning_rate();
    p.count_noise = privacy->count_noise();
  }
  return Status::Ok();
}

Status DecodeError(const fb::Error* error, ErrorInfo& out) {
  if (error == nullptr) return Status::DataLoss("the Error is missing");
  const auto code = static_cast<StatusCode>(error->code());
  if (!internal::InSchema(code)) return Status::DataLoss("the Error's status code is unknown");
  out.code = code;
  out.reason = {};
  if (const flatbuffers::String* reason = error->reason(); reason != nullptr) {
    if (reason->size() > kMaxErrorReasonBytes) {
      return Status::DataLoss("the Error's reason is longer than kMaxErrorReasonBytes");
    }
    out.reason = std::string_view(reason->c_str(), reason->size());
  }
  return Status::Ok();
}

SecureKey FromFb(const fb::SecureKey& key) {
  SecureKey out;
  std::memcpy(out.data(), key.bytes()->Data(), out.size());
  return out;
}

SecureSignature FromFb(const fb::SecureSignature& signature) {
  SecureSignature out;
  std::memcpy(out.data(), signature.bytes()->Data(), out.size());
  return out;
}

// Whether an absent or present vector holds `count` * `per_record` elements (in 64 bits: on a
// 32-bit host the product of a long list could wrap around to a short vector's length).
template <typename T>
bool Holds(const flatbuffers::Vector<T>* vector, std::size_t count, std::size_t per_record) {
  const std::uint64_t size = vector == nullptr ? 0 : vector->size();
  return size == std::uint64_t{count} * per_record;
}

template <typename T>
const T* DataOf(const flatbuffers::Vector<T>* vector) {
  return vector == nullptr ? nullptr : vector->data();
}

// Reads the fields and list of the message's phase; those of other phases are ignored. A list's
// parallel vectors must agree on its length. (Unused in a build without secure aggregation.)
[[maybe_unused]] Status DecodeSecure(const fb::SecureAggregation* secure, SecureView& out) {
  if (secure == nullptr || !internal::FitsSchema<fb::SecurePhase>(secure->phase())) {
    return Status::DataLoss("the SecureAggregation is missing or its phase is unknown");
  }
  SecureFields& fields = out.fields;
  fields.phase = internal::EnumCast<SecurePhase>(secure->phase());
  const std::size_t count = secure->devices() == nullptr ? 0 : secure->devices()->size();
  SecureColumns columns;
  columns.devices = DataOf(secure->devices());
  switch (fields.phase) {
    case SecurePhase::kKeys:
      if (secure->cipher_public() == nullptr || secure->mask_public() == nullptr) {
        return Status::DataLoss("a key advertisement lacks a key");
      }
      fields.cipher_public = FromFb(*secure->cipher_public());
      fields.mask_public = FromFb(*secure->mask_public());
      if (secure->signature() != nullptr) fields.signature = FromFb(*secure->signature());
      break;
    case SecurePhase::kRoster:
      if (!Holds(secure->points(), count, 1) ||
          !Holds(secure->keys(), count, 2 * kSecureKeyBytes) ||
          (secure->signatures() != nullptr &&
           !Holds(secure->signatures(), count, kSecureSignatureBytes))) {
        return Status::DataLoss("the roster's lists disagree in length");
      }
      columns.signatures = reinterpret_cast<const std::byte*>(DataOf(secure->signatures()));
      fields.threshold = secure->threshold();
      fields.share_point = secure->share_point();
      columns.points = DataOf(secure->points());
      columns.bytes = reinterpret_cast<const std::byte*>(DataOf(secure->keys()));
      out.roster = SecureRecords<SecureRosterRecord>(columns, count);
      break;
    case SecurePhase::kShares:
      if (secure->commitment() == nullptr) {
        return Status::DataLoss("the shares lack their seed commitment");
      }
      fields.commitment = FromFb(*secure->commitment());
      [[fallthrough]];
    case SecurePhase::kDeliveredShares:
      if (!Holds(secure->sealed(), count, kSecureSealedBytes)) {
        return Status::DataLoss("the sealed shares' lists disagree in length");
      }
      columns.bytes = reinterpret_cast<const std::byte*>(DataOf(secure->sealed()));
      out.shares = SecureRecords<SecureSealedRecord>(columns, count);
      break;
    case SecurePhase::kMaskedInput:
      out.masked = AsSpan(secure->masked());
      break;
    case SecurePhase::kSurvivors:
      out.survivors = AsSpan(secure->devices());
      break;
    case SecurePhase::kUnmasking:
      if (!Holds(secure->kinds(), count, 1) ||
          !Holds(secure->share_words(), count, kSecureShareWords)) {
        return Status::DataLoss("the revealed shares' lists disagree in length");
      }
      if (const flatbuffers::Vector<std::uint8_t>* kinds = secure->kinds(); kinds != nullptr) {
        for (const std::uint8_t kind : *kinds) {
          if (kind > kSecureMaskKeyShare) {
            return Status::DataLoss("a revealed share's kind is unknown");
          }
        }
      }
      columns.bytes = reinterpret_cast<const std::byte*>(DataOf(secure->kinds()));
      columns.share_words = DataOf(secure->share_words());
      out.revealed = SecureRecords<SecureShareRecord>(columns, count);
      break;
    case SecurePhase::kConsistency:
      if (secure->signature() == nullptr) {
        return Status::DataLoss("the survivor set's signature is missing");
      }
      fields.signature = FromFb(*secure->signature());
      break;
    case SecurePhase::kSignatures:
      if (!Holds(secure->signatures(), count, kSecureSignatureBytes)) {
        return Status::DataLoss("the signatures' lists disagree in length");
      }
      columns.signatures = reinterpret_cast<const std::byte*>(DataOf(secure->signatures()));
      out.signatures = SecureRecords<SecureSignatureRecord>(columns, count);
      break;
  }
  return Status::Ok();
}

// DecodeSecure into a FrameView's member; a build without secure aggregation leaves the member
// empty and refuses the message.
template <typename View>
Status DecodeSecureMember(const fb::Envelope& envelope, View& out) {
  if constexpr (std::is_same_v<View, SecureView>) {
    return DecodeSecure(envelope.message_as_SecureAggregation(), out);
  } else {
    return Status::DataLoss("this build leaves out secure aggregation");
  }
}

// Decodes the union member of `envelope` into `view`. Errors: kDataLoss.
Status DecodeMessage(const fb::Envelope& envelope, FrameView& view) {
  switch (envelope.message_type()) {
    case fb::Message::Join:
      view.kind = MessageKind::kJoin;
      return DecodeJoin(envelope.message_as_Join(), view.join);
    case fb::Message::Welcome:
      view.kind = MessageKind::kWelcome;
      return DecodeWelcome(envelope.message_as_Welcome(), view.welcome);
    case fb::Message::ModelBroadcast: {
      const fb::ModelBroadcast* broadcast = envelope.message_as_ModelBroadcast();
      if (broadcast == nullptr ||
          !internal::FitsSchema<fb::BroadcastContent>(broadcast->content())) {
        return Status::DataLoss("the ModelBroadcast is missing or its content is unknown");
      }
      view.kind = MessageKind::kModelBroadcast;
      view.message = PayloadMessage::ModelBroadcast(
          {internal::EnumCast<BroadcastContent>(broadcast->content()), broadcast->participants(),
           broadcast->clip_bound()});
      // A build without SCAFFOLD reads no control variates (its workers never run with them).
      if (const auto* control = broadcast->control(); kScaffold && control != nullptr) {
        view.has_control = true;
        view.control.codec = kCodecId<IdentityCodec>;
        view.control.layout = PayloadLayout::kDense;
        view.control.view.values = AsSpan(control);
      }
      return DecodePayload(broadcast->codec(), broadcast->payload_type(), broadcast->payload(),
                           view.payload);
    }
    case fb::Message::Update: {
      const fb::Update* update = envelope.message_as_Update();
      if (update == nullptr) return Status::DataLoss("the Update is missing");
      view.kind = MessageKind::kUpdate;
      view.message =
          PayloadMessage::Update({update->worker(), update->samples(), update->clip_indicator(),
                                 update->local_steps()});
      if (kScaffold && update->control_type() != fb::Payload::NONE) {
        view.has_control = true;
        EDGESGD_TRY(DecodePayload(update->codec(), update->control_type(), update->control(),
                                  view.control));
      }
      return DecodePayload(update->codec(), update->payload_type(), update->payload(),
                           view.payload);
    }
    case fb::Message::GossipExchange: {
      const fb::GossipExchange* gossip = envelope.message_as_GossipExchange();
      if (gossip == nullptr || !internal::FitsSchema<fb::GossipVector>(gossip->vector())) {
        return Status::DataLoss("the GossipExchange is missing or its vector is unknown");
      }
      view.kind = MessageKind::kGossipExchange;
      view.message = PayloadMessage::GossipExchange(
          {gossip->phase(), gossip->step(), internal::EnumCast<GossipVector>(gossip->vector())});
      return DecodePayload(gossip->codec(), gossip->payload_type(), gossip->payload(),
                           view.payload);
    }
    case fb::Message::Heartbeat: {
      const fb::Heartbeat* heartbeat = envelope.message_as_Heartbeat();
      if (heartbeat == nullptr) return Status::DataLoss("the Heartbeat is missing");
      view.kind = MessageKind::kHeartbeat;
      view.heartbeat = {heartbeat->time_us(), heartbeat->echo_time_us()};
      return Status::Ok();
    }
    case fb::Message::Leave: {
      const fb::Leave* leave = envelope.message_as_Leave();
      if (leave == nullptr || !internal::FitsSchema<fb::LeaveReason>(leave->reason())) {
        return Status::DataLoss("the Leave is missing or its reason is unknown");
      }
      view.kind = MessageKind::kLeave;
      view.leave.reason = internal::EnumCast<LeaveReason>(leave->reason());
      return Status::Ok();
    }
    case fb::Message::Error:
      view.kind = MessageKind::kError;
      return DecodeError(envelope.message_as_Error(), view.error);
    case fb::Message::SecureAggregation:
      view.kind = MessageKind::kSecureAggregation;
      return DecodeSecureMember(envelope, view.secure);
    case fb::Message::NONE:
      break;
  }
  // NONE, or a union type this version does not know (the generated verifier lets those pass,
  // for forward compatibility; a receiver of this version cannot act on them).
  return Status::DataLoss("the message type is none or unknown to this version");
}

}  // namespace

Result<std::size_t> ReadFrameLength(std::span<const std::byte> prefix,
                                    std::size_t max_frame_bytes) {
  if (prefix.size() < kFramePrefixBytes) {
    return Status::DataLoss("fewer bytes than a frame's length prefix");
  }
  std::uint32_t body = 0;
  std::memcpy(&body, prefix.data(), sizeof(body));  // little-endian host (wire_format.h)
  const std::uint64_t length = std::uint64_t{body} + kFramePrefixBytes;
  const std::size_t limit = max_frame_bytes < kMaxFrameBytes ? max_frame_bytes : kMaxFrameBytes;
  if (length > limit) return Status::OutOfRange("the frame is longer than the receiver's limit");
  if (length < kMinFrameBytes) {
    return Status::DataLoss("the frame is shorter than the smallest frame");
  }
  return static_cast<std::size_t>(length);
}

Result<FrameView> DecodeFrame(std::span<const std::byte> frame, std::size_t max_frame_bytes) {
  if (!IsFrameAligned(frame)) return Status::InvalidArgument("the frame is not 8-byte aligned");
  EDGESGD_TRY_ASSIGN(const std::size_t length, ReadFrameLength(frame, max_frame_bytes));
  if (length != frame.size()) {
    return Status::DataLoss("the frame's length prefix disagrees with its size");
  }

  const auto* bytes = reinterpret_cast<const std::uint8_t*>(frame.data());
  if (std::memcmp(bytes + kIdentifierOffset, kFileIdentifier.data(), kFileIdentifier.size()) != 0) {
    return Status::DataLoss("the frame's file identifier is not EDGS");
  }
  flatbuffers::Verifier::Options options;
  options.max_depth = kVerifierMaxDepth;
  options.max_tables = kVerifierMaxTables;
  options.check_alignment = true;
  options.check_nested_flatbuffers = false;
  flatbuffers::Verifier verifier(bytes, frame.size(), options);
  if (!verifier.VerifySizePrefixedBuffer<VerifiedEnvelope>(fb::EnvelopeIdentifier())) {
    return Status::DataLoss("the frame fails FlatBuffers verification");
  }

  const fb::Envelope* envelope = fb::GetSizePrefixedEnvelope(bytes);
  if (envelope->version() != kSchemaVersion) {
    return Status::FailedPrecondition("the frame's schema version differs from this build's");
  }

  FrameView view;
  view.header = {envelope->sender(), envelope->round(), envelope->sequence()};
  EDGESGD_TRY(DecodeMessage(*envelope, view));
  return view;
}

}  // namespace edgesgd::wire
