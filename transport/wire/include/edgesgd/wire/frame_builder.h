#pragma once

#include <flatbuffers/flatbuffer_builder.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"
#include "edgesgd/wire/internal/fixed_allocator.h"
#include "edgesgd/wire/messages.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::wire {

// Builds wire frames (size prefix + FlatBuffer with identifier "EDGS") in one caller-owned
// buffer, without heap allocation and without copying payloads: for an Update, ModelBroadcast
// or GossipExchange the payload vectors are reserved inside the frame at their exact final size
// (EncodedShape) and the codec writes into them directly.
//
//   FrameBuilder builder(arena.AllocateBytes(FrameBuilderBytes(params, layout)).value());
//   Result<std::span<const std::byte>> frame = builder.EncodePayloadFrame(
//       header, PayloadMessage::Update({.worker = id}), codecs, params, layout, context,
//       gradient, scratch);
//
// or in two steps, when something other than a codec fills the payload:
//
//   EDGESGD_TRY_ASSIGN(PayloadSpans out, builder.BeginPayloadFrame(header, message, params,
//                                                                  layout));
//   ... write out.values etc. ...
//   EDGESGD_TRY_ASSIGN(std::span<const std::byte> frame, builder.FinishPayloadFrame());
//
// A returned frame starts at an 8-byte aligned address, is a multiple of 8 bytes long, and stays
// valid until the next Begin/Encode call on this builder. Identical inputs give identical bytes
// on every architecture. Every call checks the frame's worst-case size against the buffer before
// writing anything, so a builder never needs more memory than it was given.
class FrameBuilder {
 public:
  // Builds in `buffer` from its first 8-byte aligned byte, up to a multiple of 8 bytes (storage
  // from an Arena or alignas(8) loses nothing). FrameBuilderBytes() says how much a run needs.
  // `buffer` must outlive the builder. Does not allocate.
  explicit FrameBuilder(std::span<std::byte> buffer);
  ~FrameBuilder();
  FrameBuilder(const FrameBuilder&) = delete;
  FrameBuilder& operator=(const FrameBuilder&) = delete;

  // ---- Payload frames: Update, ModelBroadcast, GossipExchange ----

  // Starts a frame of `message` (header fields from `header`) carrying the output of the codec
  // `params` over `layout`, and reserves its payload: the returned spans point into the frame
  // and hold exactly EncodedShape(params, layout) elements each. Write them (all of them: the
  // frame carries whatever they hold), then call FinishPayloadFrame or AbandonPayloadFrame.
  // Errors: kFailedPrecondition if a payload frame is already begun; kInvalidArgument for bad
  // codec parameters, an empty layout or a message kind/enum outside the schema;
  // kOutOfRange if the frame would exceed kMaxFrameBytes; kResourceExhausted if the buffer is
  // smaller than PayloadFrameBytes(shape) + kBuilderScratchBytes; kInternal if the codec's shape
  // has a field the payload table it names (PayloadLayoutOf) cannot carry.
  Result<PayloadSpans> BeginPayloadFrame(const FrameHeader& header, const PayloadMessage& message,
                                         const CodecParams& params, const TensorLayout& layout);

  // Replaces the message fields of the begun frame, which are written only when it is finished:
  // for fields that depend on the payload (adaptive clipping's indicator of an Update). Errors:
  // kFailedPrecondition if no payload frame is begun or `message` is of another kind;
  // kInvalidArgument for an enum outside the schema (nothing changes then).
  Status AmendPendingMessage(const PayloadMessage& message);

  // SCAFFOLD: reserves a second payload in the begun frame, written like the first: an Update's
  // change of its control variate, encoded with `params` (the Update's codec) over `layout`, or
  // a ModelBroadcast's control variate, dense (`params` identity). Call at most once, between
  // BeginPayloadFrame and FinishPayloadFrame. Errors (nothing changes): kFailedPrecondition if
  // no Update or ModelBroadcast is begun or its control is already reserved; kInvalidArgument
  // for bad parameters, another codec than the Update's or a non-identity broadcast control;
  // kOutOfRange above kMaxFrameBytes; kResourceExhausted if the buffer cannot hold the frame
  // with both payloads (PayloadFrameBytes + ControlPayloadBytes + kBuilderScratchBytes).
  Result<PayloadSpans> ReserveControlPayload(const CodecParams& params, const TensorLayout& layout);

  // Completes the begun frame: writes the payload, message and envelope tables, the file
  // identifier and the size prefix behind the reserved payload, and returns the frame.
  // Errors: kFailedPrecondition if no payload frame is begun.
  Result<std::span<const std::byte>> FinishPayloadFrame();

  // Drops a begun payload frame (e.g. when its codec failed). No-op when none is begun.
  void AbandonPayloadFrame();

  // Begin + the codec of `params` from `codecs` (CodecRegistry::Encode: `input`, `context`,
  // `scratch` as documented in codec.h) writing straight into the frame + Finish: the one path
  // every codec takes. Errors: those of BeginPayloadFrame, then the codec's (kInvalidArgument
  // for an input of the wrong length, kResourceExhausted for too little scratch,
  // kFailedPrecondition for an unregistered codec); on error no frame is pending.
  Result<std::span<const std::byte>> EncodePayloadFrame(
      const FrameHeader& header, const PayloadMessage& message, const CodecRegistry& codecs,
      const CodecParams& params, const TensorLayout& layout, const CodecContext& context,
      std::span<const float> input, std::span<std::byte> scratch);

  // ---- Control frames ----
  // Each builds a complete frame and needs kMaxControlFrameBytes + kBuilderScratchBytes of
  // buffer. Errors: kFailedPrecondition while a payload frame is begun; kResourceExhausted if
  // the buffer is too small; kInvalidArgument for an enum value outside the schema and, for a
  // Welcome, for codec parameters ValidateCodecParams rejects (its reason) or an empty layout. An Error's
  // reason is cut to kMaxErrorReasonBytes at a UTF-8 character boundary.

  Result<std::span<const std::byte>> EncodeJoin(const FrameHeader& header, const JoinInfo& join);
  Result<std::span<const std::byte>> EncodeWelcome(const FrameHeader& header,
                                                   const WelcomeInfo& welcome);
  Result<std::span<const std::byte>> EncodeHeartbeat(const FrameHeader& header,
                                                     const HeartbeatInfo& heartbeat);
  Result<std::span<const std::byte>> EncodeLeave(const FrameHeader& header, const LeaveInfo& leave);
  Result<std::span<const std::byte>> EncodeError(const FrameHeader& header, const ErrorInfo& error);

  // ---- Secure aggregation ----
  // A SecureAggregation message of `message.fields.phase`, with that phase's fields and list
  // (the others are left out). Needs SecureFrameBytes for the list's length +
  // kBuilderScratchBytes of buffer. Errors: kFailedPrecondition while a payload frame is begun,
  // or in a build without secure aggregation (kSecureAggregationFrames); kInvalidArgument for a
  // phase outside the schema or a revealed share of an unknown kind; kOutOfRange above
  // kMaxFrameBytes; kResourceExhausted if the buffer is too small.
  Result<std::span<const std::byte>> EncodeSecure(const FrameHeader& header,
                                                  const SecureMessage& message);

  // Usable bytes of the buffer (after alignment).
  std::size_t capacity_bytes() const { return allocator_.capacity(); }
  bool payload_frame_pending() const { return pending_; }

 private:
  // Re-creates the FlatBufferBuilder for a new frame (see builder_).
  void StartFrame();
  Status StartControlFrame();
  // A reserved payload: its codec, table and vectors (offset 0: field absent, empty). Every
  // field is written by ReservePayload before a pending flag lets it be read, so none has an
  // initializer (each would cost every builder's constructor code on a microcontroller).
  struct PendingPayload {
    CodecId codec;
    QuantizedHeader quantized;
    PayloadLayout layout;
    flatbuffers::uoffset_t indices;
    flatbuffers::uoffset_t values;
    flatbuffers::uoffset_t words;
    flatbuffers::uoffset_t scales;
  };
  // Reserves the vectors of a payload of `params` (`layout`, shape `shape`) and returns their
  // spans. This and CreatePayloadTable are inlined into their callers (frame_builder.cc alone),
  // which costs a microcontroller image without SCAFFOLD's second payload no call.
  [[gnu::always_inline]] inline PayloadSpans ReservePayload(const CodecParams& params,
                                                            PayloadLayout layout,
                                                            const PayloadShape& shape,
                                                            PendingPayload& pending);
  [[gnu::always_inline]] inline flatbuffers::Offset<void> CreatePayloadTable(
      const PendingPayload& pending);
  // Adds the envelope, finishes the buffer with size prefix and identifier, and returns it.
  // `type` has the numbering of the schema's Message union; `bound` is the size the caller
  // checked capacity against (exceeding it is a bug in the bounds of wire_format.h).
  std::span<const std::byte> FinishEnvelope(const FrameHeader& header, MessageKind type,
                                            flatbuffers::Offset<void> message, std::size_t bound);

  internal::FixedAllocator allocator_;
  // Constructed afresh (placement) for every frame and never destroyed, instead of Clear()ed:
  // Clear() and ~FlatBufferBuilder reach the shared-string pool (a std::set), whose code
  // references the global operator delete, and this builder owns nothing to release (the
  // storage is the caller's, the allocator is a member). A union member is not constructed or
  // destroyed implicitly.
  union {
    flatbuffers::FlatBufferBuilder builder_;
  };

  // The begun payload frame.
  bool pending_ = false;
  FrameHeader pending_header_;
  PayloadMessage pending_message_;
  std::size_t pending_bound_ = 0;
  PendingPayload pending_payload_;
  bool pending_has_control_ = false;
  PendingPayload pending_control_;
};

}  // namespace edgesgd::wire
