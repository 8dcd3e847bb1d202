#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

#include "edgesgd/core/result.h"
#include "edgesgd/wire/messages.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::wire {

// A verified frame. `kind` says which message it holds and only that message's member is
// meaningful; `payload` (ModelBroadcast, Update, GossipExchange), `error.reason` and the lists
// of `secure` point into the frame's bytes, zero-copy, and are valid while those bytes are
// unchanged.
struct FrameView {
  FrameHeader header;
  MessageKind kind = MessageKind::kNone;
  JoinInfo join;
  WelcomeInfo welcome;
  PayloadMessage message;  // kModelBroadcast, kUpdate, kGossipExchange
  EncodedPayload payload;  // kModelBroadcast, kUpdate, kGossipExchange
  // SCAFFOLD's second payload, when the frame carries one (has_control): an Update's change of
  // its control variate (in the Update's codec), a ModelBroadcast's control variate (dense,
  // identity). Empty otherwise.
  bool has_control = false;
  EncodedPayload control;
  HeartbeatInfo heartbeat;
  LeaveInfo leave;
  ErrorInfo error;
  // kSecureAggregation: its lists point into the frame. Nothing in a build without secure
  // aggregation, whose stacks are the smallest and hold a FrameView or two.
  [[no_unique_address]] std::conditional_t<kSecureAggregationFrames, SecureView, NoSecureView>
      secure;
};

// Reads a frame's length prefix (the first kFramePrefixBytes of `prefix`) and returns the whole
// frame's length, prefix included — how many bytes a stream reader must collect. `max_frame_bytes`
// is the receiver's limit (capped at kMaxFrameBytes). Reads only `prefix`; does not allocate.
// Errors: kOutOfRange if the frame would exceed the limit (drop the connection rather than read
// it); kDataLoss if `prefix` is shorter than the prefix or announces fewer than kMinFrameBytes.
Result<std::size_t> ReadFrameLength(std::span<const std::byte> prefix,
                                    std::size_t max_frame_bytes = kMaxFrameBytes);

// Checks `frame` completely and returns views of its contents; never reads outside `frame` and
// never crashes, whatever the bytes. Checks, in order: alignment, length prefix against the
// limit and against frame.size(), file identifier, the FlatBuffers verifier (bounds, offsets,
// alignment, strings; at most 4 nested and 8 tables), schema version, then message content:
// union types known and present, enums in range, the Welcome's codec parameters within the
// codec's domain, reason length. The receiver checks the rest: which payload table a codec may
// send (ParamsForPayload), the run configuration (ValidateRunConfig) and payload field sizes
// against a layout (the codec's DecodeAdd, kDataLoss).
// Reads only `frame`; does not allocate.
// Errors:
//   kInvalidArgument   frame.data() is not kFrameAlignment-aligned (receive into a
//                      ReceiveBuffer, or AlignFrame() first; see receive_buffer.h).
//   kOutOfRange        the length prefix exceeds `max_frame_bytes` (capped at kMaxFrameBytes).
//   kDataLoss          anything malformed: truncated, trailing bytes, wrong identifier,
//                      verification failure, unknown or missing message/payload, inconsistent
//                      or out-of-range fields.
//   kFailedPrecondition  a well-formed frame of another schema version (an incompatible peer,
//                      not corruption: report it as such). A frame whose layout this version's
//                      verifier rejects is kDataLoss whatever its version field says.
Result<FrameView> DecodeFrame(std::span<const std::byte> frame,
                              std::size_t max_frame_bytes = kMaxFrameBytes);

}  // namespace edgesgd::wire
