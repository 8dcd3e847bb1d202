#include "edgesgd/wire/frame_builder.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/scaffold.h"
#include "schema_mapping.h"

namespace edgesgd::wire {
namespace {

// The 8-byte aligned part of `buffer`, a multiple of 8 bytes long (empty if there is none).
std::span<std::byte> AlignedPart(std::span<std::byte> buffer) {
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  const std::size_t skip = (kFrameAlignment - address % kFrameAlignment) % kFrameAlignment;
  if (skip >= buffer.size()) return {};
  const std::size_t usable = (buffer.size() - skip) & ~(kFrameAlignment - 1);
  return buffer.subspan(skip, usable);
}

// An allocator over the aligned part of `buffer` (returned as a prvalue: it cannot be copied).
internal::FixedAllocator MakeAllocator(std::span<std::byte> buffer) {
  const std::span<std::byte> part = AlignedPart(buffer);
  return internal::FixedAllocator(reinterpret_cast<std::uint8_t*>(part.data()), part.size());
}

// Reserves an uninitialised vector of `count` elements in the frame and points `out` at it.
// Returns the vector's offset, or 0 (field left out) when `count` is 0.
template <typename T>
flatbuffers::uoffset_t Reserve(flatbuffers::FlatBufferBuilder& builder, std::size_t count,
                               std::span<T>& out) {
  if (count == 0) {
    out = {};
    return 0;
  }
  T* data = nullptr;
  const flatbuffers::Offset<flatbuffers::Vector<T>> offset =
      builder.CreateUninitializedVector(count, &data);
  out = std::span<T>(data, count);
  return offset.o;
}

// Longest prefix of `text` of at most `limit` bytes that does not end inside a UTF-8 sequence,
// so flatc and log readers always see valid text.
std::string_view CutUtf8(std::string_view text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t end = limit;
  // Back off continuation bytes (10xxxxxx) so the cut falls before a character's first byte.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0u) == 0x80u) --end;
  return text.substr(0, end);
}

// A vector of `count` scalars reserved in the frame and written by `fill(data)` (offset 0, the
// field left out, when `count` is 0).
template <typename T, typename Fill>
flatbuffers::Offset<flatbuffers::Vector<T>> Column(flatbuffers::FlatBufferBuilder& builder,
                                                   std::size_t count, Fill fill) {
  if (count == 0) return 0;
  T* out = nullptr;
  const auto vector = builder.CreateUninitializedVector(count, &out);
  fill(out);
  return vector;
}

fb::SecureKey KeyToFb(const SecureKey& key) {
  fb::SecureKey out;
  std::memcpy(&out, key.data(), key.size());
  return out;
}

fb::SecureSignature SignatureToFb(const SecureSignature& signature) {
  fb::SecureSignature out;
  static_assert(sizeof(out) == kSecureSignatureBytes);
  std::memcpy(&out, signature.data(), signature.size());
  return out;
}

}  // namespace

FrameBuilder::FrameBuilder(std::span<std::byte> buffer) : allocator_(MakeAllocator(buffer)) {
  StartFrame();
}

// builder_ is deliberately not destroyed (see its declaration).
FrameBuilder::~FrameBuilder() {}

void FrameBuilder::StartFrame() {
  // The initial size is the whole (8-aligned) capacity, so the builder's first write takes the
  // entire buffer in one allocate() and never grows. A zero-capacity builder never writes
  // (every call fails its capacity check first); the builder still needs a nonzero size.
  const std::size_t initial = allocator_.capacity() != 0 ? allocator_.capacity() : kFrameAlignment;
  std::construct_at(&builder_, initial, &allocator_, /*own_allocator=*/false, kFrameAlignment);
}

Result<PayloadSpans> FrameBuilder::BeginPayloadFrame(const FrameHeader& header,
                                                     const PayloadMessage& message,
                                                     const CodecParams& params,
                                                     const TensorLayout& layout) {
  if (pending_) return Status::FailedPrecondition("a payload frame is already pending");
  EDGESGD_TRY(internal::CheckPayloadMessage(message));
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(params, layout));
  const PayloadLayout payload_layout = PayloadLayoutOf(params);
  if (!LayoutHolds(payload_layout, shape)) {
    return Status::Internal("the codec's payload does not fit the table it names");
  }
  const std::size_t bound = PayloadFrameBytes(shape);
  if (bound == 0) {
    return Status::OutOfRange("the payload frame would exceed kMaxFrameBytes (1 GiB)");
  }
  if (bound + kBuilderScratchBytes > capacity_bytes()) {
    return Status::ResourceExhausted("the builder's buffer is too small for the payload frame");
  }

  StartFrame();
  const PayloadSpans spans = ReservePayload(params, payload_layout, shape, pending_payload_);
  pending_header_ = header;
  pending_message_ = message;
  pending_bound_ = bound;
  pending_has_control_ = false;
  pending_ = true;
  return spans;
}

PayloadSpans FrameBuilder::ReservePayload(const CodecParams& params, PayloadLayout layout,
                                          const PayloadShape& shape, PendingPayload& pending) {
  // Vectors first: FlatBuffers builds children before the tables that refer to them, and the
  // tables are written in FinishPayloadFrame. The order is fixed so equal inputs give equal
  // bytes.
  PayloadSpans spans;
  pending.indices = Reserve(builder_, shape.indices, spans.indices);
  pending.values = Reserve(builder_, shape.values, spans.values);
  pending.words = Reserve(builder_, shape.words, spans.words);
  pending.scales = Reserve(builder_, shape.scales, spans.scales);
  pending.codec = CodecIdOf(params);
  pending.quantized = QuantizedHeaderOf(params);
  pending.layout = layout;
  return spans;
}

Result<PayloadSpans> FrameBuilder::ReserveControlPayload(const CodecParams& params,
                                                         const TensorLayout& layout) {
  if constexpr (!kScaffold) {
    return Status::FailedPrecondition("this build leaves out SCAFFOLD's control variates");
  }
  const MessageKind kind = pending_message_.kind;
  if (!pending_ || pending_has_control_ ||
      (kind != MessageKind::kUpdate && kind != MessageKind::kModelBroadcast)) {
    return Status::FailedPrecondition("no Update or ModelBroadcast without a control is begun");
  }
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(params, layout));
  if (kind == MessageKind::kUpdate ? CodecIdOf(params) != pending_payload_.codec
                                   : !std::holds_alternative<IdentityParams>(params)) {
    return Status::InvalidArgument(
        "an Update's control is in the Update's codec, a broadcast's control is dense");
  }
  const PayloadLayout payload_layout = PayloadLayoutOf(params);
  if (!LayoutHolds(payload_layout, shape)) {
    return Status::Internal("the codec's payload does not fit the table it names");
  }
  const std::size_t control = ControlPayloadBytes(shape);
  const std::size_t bound = pending_bound_ + control;
  if (control == 0 || bound > kMaxFrameBytes) {
    return Status::OutOfRange("the payload frame would exceed kMaxFrameBytes (1 GiB)");
  }
  if (bound + kBuilderScratchBytes > capacity_bytes()) {
    return Status::ResourceExhausted("the builder's buffer is too small for both payloads");
  }
  const PayloadSpans spans = ReservePayload(params, payload_layout, shape, pending_control_);
  pending_bound_ = bound;
  pending_has_control_ = true;
  return spans;
}

flatbuffers::Offset<void> FrameBuilder::CreatePayloadTable(const PendingPayload& pending) {
  using flatbuffers::Offset;
  using flatbuffers::Vector;
  const Offset<Vector<std::uint32_t>> indices(pending.indices);
  const Offset<Vector<float>> values(pending.values);
  const Offset<Vector<std::uint32_t>> words(pending.words);
  const Offset<Vector<float>> scales(pending.scales);
  switch (pending.layout) {
    case PayloadLayout::kDense:
      return fb::CreateDensePayload(builder_, values).Union();
    case PayloadLayout::kSparse:
      return fb::CreateSparsePayload(builder_, indices, values).Union();
    case PayloadLayout::kBlock:
      return fb::CreateBlockPayload(builder_, indices, values).Union();
    case PayloadLayout::kSignWords:
      return fb::CreateSignPayload(builder_, words, scales).Union();
    case PayloadLayout::kQuantized:
      return fb::CreateQuantizedPayload(builder_, words, scales, pending.quantized.levels,
                                        pending.quantized.bucket)
          .Union();
    case PayloadLayout::kPackedWords:
      return fb::CreatePackedPayload(builder_, words).Union();
  }
  EDGESGD_CHECK(false && "PayloadLayoutOf gives only known layouts");
  return 0;
}

Result<std::span<const std::byte>> FrameBuilder::FinishPayloadFrame() {
  if (!pending_) return Status::FailedPrecondition("no payload frame is pending");
  pending_ = false;
  const flatbuffers::Offset<void> payload = CreatePayloadTable(pending_payload_);
  const CodecId codec = pending_payload_.codec;
  const fb::Payload payload_type = internal::ToFb(pending_payload_.layout);
  flatbuffers::Offset<void> message;
  switch (pending_message_.kind) {
    case MessageKind::kUpdate: {
      const UpdateInfo& update = pending_message_.update;
      const bool control_set = kScaffold && pending_has_control_;
      const flatbuffers::Offset<void> control =
          control_set ? CreatePayloadTable(pending_control_) : 0;
      const fb::Payload control_type =
          control_set ? internal::ToFb(pending_control_.layout) : fb::Payload::NONE;
      message = fb::CreateUpdate(builder_, update.worker, update.samples, codec, payload_type,
                                 payload, update.clip_indicator, control_type, control,
                                 update.local_steps)
                    .Union();
      break;
    }
    case MessageKind::kModelBroadcast: {
      const ModelBroadcastInfo& broadcast = pending_message_.broadcast;
      const flatbuffers::Offset<flatbuffers::Vector<float>> control(
          kScaffold && pending_has_control_ ? pending_control_.values : 0);
      message = fb::CreateModelBroadcast(builder_, internal::ToFb(broadcast.content),
                                         broadcast.participants, codec, payload_type, payload,
                                         broadcast.clip_bound, control)
                    .Union();
      break;
    }
    case MessageKind::kGossipExchange: {
      const GossipInfo& gossip = pending_message_.gossip;
      message =
          fb::CreateGossipExchange(builder_, gossip.phase, gossip.step,
                                   internal::ToFb(gossip.vector), codec, payload_type, payload)
              .Union();
      break;
    }
    default:
      EDGESGD_CHECK(false && "BeginPayloadFrame admits only payload message kinds");
  }
  return FinishEnvelope(pending_header_, pending_message_.kind, message, pending_bound_);
}

void FrameBuilder::AbandonPayloadFrame() { pending_ = false; }

Status FrameBuilder::AmendPendingMessage(const PayloadMessage& message) {
  if (!pending_ || message.kind != pending_message_.kind) {
    return Status::FailedPrecondition("no payload frame of this message kind is begun");
  }
  EDGESGD_TRY(internal::CheckPayloadMessage(message));
  pending_message_ = message;
  return Status::Ok();
}

Result<std::span<const std::byte>> FrameBuilder::EncodePayloadFrame(
    const FrameHeader& header, const PayloadMessage& message, const CodecRegistry& codecs,
    const CodecParams& params, const TensorLayout& layout, const CodecContext& context,
    std::span<const float> input, std::span<std::byte> scratch) {
  EDGESGD_TRY_ASSIGN(const PayloadSpans spans, BeginPayloadFrame(header, message, params, layout));
  if (const Status status = codecs.Encode(params, layout, context, input, spans, scratch);
      !status.ok()) {
    AbandonPayloadFrame();
    return status;
  }
  return FinishPayloadFrame();
}

Status FrameBuilder::StartControlFrame() {
  if (pending_) return Status::FailedPrecondition("a payload frame is pending");
  if (kMaxControlFrameBytes + kBuilderScratchBytes > capacity_bytes()) {
    return Status::ResourceExhausted("the builder's buffer is too small for a control frame");
  }
  StartFrame();
  return Status::Ok();
}

Result<std::span<const std::byte>> FrameBuilder::EncodeJoin(const FrameHeader& header,
                                                            const JoinInfo& join) {
  if (!internal::InSchema(join.architecture)) {
    return Status::InvalidArgument("the architecture is outside the schema");
  }
  EDGESGD_TRY(StartControlFrame());
  const auto message = fb::CreateJoin(builder_, internal::ToFb(join.architecture), join.codecs,
                                      join.max_frame_bytes, join.memory_bytes, join.features);
  return FinishEnvelope(header, MessageKind::kJoin, message.Union(), kMaxControlFrameBytes);
}

Result<std::span<const std::byte>> FrameBuilder::EncodeWelcome(const FrameHeader& header,
                                                               const WelcomeInfo& welcome) {
  const TensorLayout& layout = welcome.layout;
  const CodecParams& codec = welcome.codec;
  if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
  EDGESGD_TRY(ValidateCodecParams(codec));
  EDGESGD_TRY(StartControlFrame());

  std::uint32_t* sizes = nullptr;
  const auto tensor_sizes = builder_.CreateUninitializedVector(layout.tensor_count(), &sizes);
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    sizes[t] = static_cast<std::uint32_t>(layout.size(t));  // TensorLayout keeps sizes < 2^32
  }
  std::array<std::uint32_t, kMaxCodecParamWords> words{};
  const std::size_t word_count = ParamWords(codec, words);
  std::uint32_t* parameters = nullptr;
  const auto parameter_vector = word_count == 0
                                    ? flatbuffers::Offset<flatbuffers::Vector<std::uint32_t>>()
                                    : builder_.CreateUninitializedVector(word_count, &parameters);
  std::copy_n(words.begin(), word_count, parameters);
  const auto codec_config = fb::CreateCodecConfig(builder_, CodecIdOf(codec), parameter_vector);
  const TrainingConfig& training = welcome.training;
  const auto training_config = fb::CreateTrainingConfig(
      builder_, training.feedback, training.detach, training.optimizer, training.learning_rate,
      training.momentum, training.weight_decay, training.local_steps, training.batch,
      training.aggregate, training.participation, training.mode, training.gossip, training.topology,
      training.gossip_rounds, training.prox_mu, training.scaffold,
      kSecureAggregationFrames ? welcome.secure.threshold : 0.0f,
      kSecureAggregationFrames ? welcome.secure.neighbours : 0u,
      kSecureAggregationFrames ? welcome.secure.bound : 0.0f,
      kSecureAggregationFrames && welcome.secure.signed_rounds);
  const PrivacyConfig& privacy = welcome.privacy;
  const auto privacy_config =
      privacy.mode == 0
          ? flatbuffers::Offset<fb::PrivacyConfig>()
          : fb::CreatePrivacyConfig(builder_, privacy.mode, privacy.clip, privacy.noise_multiplier,
                                    privacy.delta, privacy.target_quantile,
                                    privacy.clip_learning_rate, privacy.count_noise);
  const auto message =
      fb::CreateWelcome(builder_, welcome.assigned_id, welcome.workers, welcome.rounds,
                        welcome.seed, static_cast<std::uint32_t>(layout.dimension()), tensor_sizes,
                        codec_config, training_config, privacy_config);
  return FinishEnvelope(header, MessageKind::kWelcome, message.Union(), kMaxControlFrameBytes);
}

Result<std::span<const std::byte>> FrameBuilder::EncodeHeartbeat(const FrameHeader& header,
                                                                 const HeartbeatInfo& heartbeat) {
  EDGESGD_TRY(StartControlFrame());
  const auto message = fb::CreateHeartbeat(builder_, heartbeat.time_us, heartbeat.echo_time_us);
  return FinishEnvelope(header, MessageKind::kHeartbeat, message.Union(), kMaxControlFrameBytes);
}

Result<std::span<const std::byte>> FrameBuilder::EncodeLeave(const FrameHeader& header,
                                                             const LeaveInfo& leave) {
  if (!internal::InSchema(leave.reason)) {
    return Status::InvalidArgument("the leave reason is outside the schema");
  }
  EDGESGD_TRY(StartControlFrame());
  const auto message = fb::CreateLeave(builder_, internal::ToFb(leave.reason));
  return FinishEnvelope(header, MessageKind::kLeave, message.Union(), kMaxControlFrameBytes);
}

Result<std::span<const std::byte>> FrameBuilder::EncodeError(const FrameHeader& header,
                                                             const ErrorInfo& error) {
  if (!internal::InSchema(error.code)) {
    return Status::InvalidArgument("the error code is outside the schema");
  }
  EDGESGD_TRY(StartControlFrame());
  const std::string_view reason = CutUtf8(error.reason, kMaxErrorReasonBytes);
  // CreateString copies into the frame (bounded above); an empty reason is left out.
  const flatbuffers::Offset<flatbuffers::String> text =
      reason.empty() ? 0 : builder_.CreateString(reason.data(), reason.size());
  const auto message = fb::CreateError(builder_, static_cast<std::uint8_t>(error.code), text);
  return FinishEnvelope(header, MessageKind::kError, message.Union(), kMaxControlFrameBytes);
}

Result<std::span<const std::byte>> FrameBuilder::EncodeSecure(const FrameHeader& header,
                                                              const SecureMessage& message) {
  if constexpr (!kSecureAggregationFrames) {
    return Status::FailedPrecondition("this build leaves out secure aggregation");
  }
  const SecureFields& fields = message.fields;
  if (!internal::InSchema(fields.phase)) {
    return Status::InvalidArgument("the secure aggregation phase is outside the schema");
  }
  if (pending_) return Status::FailedPrecondition("a payload frame is pending");
  // Only the phase's list is written, so only it counts towards the bound.
  const SecurePhase phase = fields.phase;
  const std::span<const SecureRosterRecord> roster =
      phase == SecurePhase::kRoster ? message.roster : std::span<const SecureRosterRecord>();
  const std::span<const SecureSealedRecord> shares =
      phase == SecurePhase::kShares || phase == SecurePhase::kDeliveredShares
          ? message.shares
          : std::span<const SecureSealedRecord>();
  const std::span<const std::uint32_t> masked =
      phase == SecurePhase::kMaskedInput ? message.masked : std::span<const std::uint32_t>();
  const std::span<const std::uint32_t> survivors =
      phase == SecurePhase::kSurvivors ? message.survivors : std::span<const std::uint32_t>();
  const std::span<const SecureShareRecord> revealed =
      phase == SecurePhase::kUnmasking ? message.revealed : std::span<const SecureShareRecord>();
  const std::span<const SecureSignatureRecord> signers =
      phase == SecurePhase::kSignatures ? message.signatures
                                        : std::span<const SecureSignatureRecord>();
  // A roster carries its neighbours' advertisement signatures unless all are zeros (an unsigned
  // round's), which the decoder gives back for an absent column.
  const auto is_zero = [](const SecureSignature& signature) {
    return std::all_of(signature.begin(), signature.end(),
                       [](std::byte b) { return b == std::byte{0}; });
  };
  const bool roster_signed = std::any_of(roster.begin(), roster.end(), [&](const auto& entry) {
    return !is_zero(entry.keys_signature);
  });
  for (const SecureShareRecord& share : revealed) {
    if (share.kind > kSecureMaskKeyShare) {
      return Status::InvalidArgument("a revealed share's kind is outside the schema");
    }
  }
  const std::uint64_t list = std::uint64_t{roster.size()} * kSecureRosterRecordBytes +
                             std::uint64_t{shares.size()} * kSecureSealedRecordBytes +
                             std::uint64_t{revealed.size()} * kSecureShareRecordBytes +
                             std::uint64_t{signers.size()} * kSecureSignatureRecordBytes +
                             4 * (std::uint64_t{masked.size()} + survivors.size());
  const std::uint64_t bound = (list + kSecureFrameOverheadBytes + (kFrameAlignment - 1)) &
                              ~std::uint64_t{kFrameAlignment - 1};
  if (bound > kMaxFrameBytes) {
    return Status::OutOfRange("the secure aggregation frame would exceed kMaxFrameBytes (1 GiB)");
  }
  if (bound + kBuilderScratchBytes > capacity_bytes()) {
    return Status::ResourceExhausted("the builder's buffer is too small for the frame");
  }
  StartFrame();

  // At most one list is non-empty; its columns are written in a fixed order so equal inputs
  // give equal bytes.
  const std::size_t records =
      roster.size() + shares.size() + survivors.size() + revealed.size() + signers.size();
  const auto devices = Column<std::uint32_t>(builder_, records, [&](std::uint32_t* out) {
    for (const SecureRosterRecord& entry : roster) *out++ = entry.device;
    for (const SecureSealedRecord& pair : shares) *out++ = pair.device;
    out = std::copy(survivors.begin(), survivors.end(), out);
    for (const SecureShareRecord& share : revealed) *out++ = share.owner;
    for (const SecureSignatureRecord& signer : signers) *out++ = signer.device;
  });
  const auto points = Column<std::uint32_t>(builder_, roster.size(), [&](std::uint32_t* out) {
    for (const SecureRosterRecord& entry : roster) *out++ = entry.share_point;
  });
  const auto keys =
      Column<std::uint8_t>(builder_, 2 * kSecureKeyBytes * roster.size(), [&](std::uint8_t* out) {
        for (const SecureRosterRecord& entry : roster) {
          std::memcpy(out, entry.cipher_public.data(), kSecureKeyBytes);
          std::memcpy(out + kSecureKeyBytes, entry.mask_public.data(), kSecureKeyBytes);
          out += 2 * kSecureKeyBytes;
        }
      });
  const auto sealed =
      Column<std::uint8_t>(builder_, kSecureSealedBytes * shares.size(), [&](std::uint8_t* out) {
        for (const SecureSealedRecord& pair : shares) {
          std::memcpy(out, pair.sealed.data(), kSecureSealedBytes);
          out += kSecureSealedBytes;
        }
      });
  const auto masked_words = Column<std::uint32_t>(builder_, masked.size(), [&](std::uint32_t* out) {
    std::copy(masked.begin(), masked.end(), out);
  });
  const auto kinds = Column<std::uint8_t>(builder_, revealed.size(), [&](std::uint8_t* out) {
    for (const SecureShareRecord& share : revealed) *out++ = share.kind;
  });
  const auto share_words =
      Column<std::uint32_t>(builder_, kSecureShareWords * revealed.size(), [&](std::uint32_t* out) {
        for (const SecureShareRecord& share : revealed) {
          out = std::copy(share.y.begin(), share.y.end(), out);
        }
      });

  const std::size_t signed_records = roster_signed ? roster.size() : signers.size();
  const auto signatures = Column<std::uint8_t>(
      builder_, kSecureSignatureBytes * signed_records, [&](std::uint8_t* out) {
        for (std::size_t i = 0; roster_signed && i < roster.size(); ++i) {
          std::memcpy(out, roster[i].keys_signature.data(), kSecureSignatureBytes);
          out += kSecureSignatureBytes;
        }
        for (const SecureSignatureRecord& signer : signers) {
          std::memcpy(out, signer.signature.data(), kSecureSignatureBytes);
          out += kSecureSignatureBytes;
        }
      });

  const fb::SecureKey cipher_public = KeyToFb(fields.cipher_public);
  const fb::SecureKey mask_public = KeyToFb(fields.mask_public);
  const fb::SecureKey commitment = KeyToFb(fields.commitment);
  const bool keys_phase = phase == SecurePhase::kKeys;
  const bool roster_phase = phase == SecurePhase::kRoster;
  const fb::SecureSignature signature = SignatureToFb(fields.signature);
  // An unsigned advertisement (all zeros) leaves the field out.
  const bool carries_signature =
      (keys_phase && !is_zero(fields.signature)) || phase == SecurePhase::kConsistency;
  const auto secure = fb::CreateSecureAggregation(
      builder_, internal::EnumCast<fb::SecurePhase>(phase), keys_phase ? &cipher_public : nullptr,
      keys_phase ? &mask_public : nullptr, roster_phase ? fields.threshold : 0,
      roster_phase ? fields.share_point : 0, devices, points, keys,
      phase == SecurePhase::kShares ? &commitment : nullptr, sealed, masked_words, kinds, share_words,
      carries_signature ? &signature : nullptr, signatures);
  return FinishEnvelope(header, MessageKind::kSecureAggregation, secure.Union(),
                        static_cast<std::size_t>(bound));
}

std::span<const std::byte> FrameBuilder::FinishEnvelope(const FrameHeader& header, MessageKind type,
                                                        flatbuffers::Offset<void> message,
                                                        std::size_t bound) {
  const auto envelope = fb::CreateEnvelope(builder_, kSchemaVersion, header.sender, header.round,
                                           header.sequence, internal::ToFb(type), message);
  // Pads the finished buffer to a multiple of 8: it then starts 8-aligned (it ends at the
  // aligned end of the buffer), whether or not the frame holds a u64 field.
  builder_.TrackMinAlign(kFrameAlignment);
  fb::FinishSizePrefixedEnvelopeBuffer(builder_, envelope);
  const std::span<const std::byte> frame(
      reinterpret_cast<const std::byte*>(builder_.GetBufferPointer()), builder_.GetSize());
  EDGESGD_CHECK(frame.size() <= bound);
  EDGESGD_CHECK(reinterpret_cast<std::uintptr_t>(frame.data()) % kFrameAlignment == 0);
  return frame;
}

}  // namespace edgesgd::wire
