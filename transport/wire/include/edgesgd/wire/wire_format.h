#pragma once

// Constants of the edgesgd wire format and the sizes a caller needs to allocate frame buffers up
// front (see transport/wire/edgesgd.fbs for the schema itself).

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd::wire {

// Codecs write payload vectors in place and decoders read them in place as spans of u32/f32,
// which is only correct when the host's byte order and float format are the wire's. Every
// edgesgd target (x86-64, aarch64, armhf, Cortex-M4) is little-endian IEEE-754; a big-endian
// port would need a conversion pass here rather than zero-copy spans.
static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559);

// Schema version carried by every frame; a receiver rejects any other. Bump on a change that an
// older peer cannot read (see the evolution rules in edgesgd.fbs).
inline constexpr std::uint16_t kSchemaVersion = 2;

// FlatBuffers file identifier at bytes [8, 12) of every frame (after the length prefix and the
// root offset). Must equal `file_identifier` in edgesgd.fbs.
inline constexpr std::string_view kFileIdentifier = "EDGS";

// Every frame starts with the u32 little-endian length of the bytes that follow it.
inline constexpr std::size_t kFramePrefixBytes = 4;

// Frames are built and must be received at 8-byte aligned addresses: the FlatBuffers verifier
// checks alignment relative to the frame start only, so a frame at an odd address verifies and
// then faults on ARM when its u64 fields are read. Built frames are a multiple of 8 bytes long.
inline constexpr std::size_t kFrameAlignment = 8;

// Hard ceiling on a frame: no builder produces and no decoder accepts a larger one, whatever
// limit the caller asks for. 1 GiB is a dense model of 268M parameters, far above any edge model,
// and half FlatBuffers' own 2 GiB limit.
inline constexpr std::size_t kMaxFrameBytes = std::size_t{1} << 30;

// Shortest possible frame: prefix, root offset, identifier and an empty table with its vtable.
inline constexpr std::size_t kMinFrameBytes = 20;

// Upper bound on the bytes a payload-carrying frame (Update, ModelBroadcast, GossipExchange)
// adds to its payload: length prefix, root offset, identifier, the envelope, message and payload
// tables with their vtables, one length word per payload vector and alignment padding (up to 8
// bytes, from the u64 sequence field and the 8-byte frame length). Measured: 108-136 bytes
// depending on message kind and payload table (WireFrameSize tests print the table).
inline constexpr std::size_t kPayloadFrameOverheadBytes = 160;

// Upper bound on any control frame (Join, Welcome, Heartbeat, Leave, Error). The largest is a
// Welcome with kMaxTensors tensor sizes and every configuration field set, privacy and secure
// aggregation included: 600 bytes measured.
inline constexpr std::size_t kMaxControlFrameBytes = 640;

// Bytes FlatBuffers' builder needs beside the frame while building it: the field locations of
// the table being built (8 bytes per field, at most 24 fields in a table; TrainingConfig has
// 19) and the list of vtables written so far (4 bytes each, at most 8 tables per frame).
inline constexpr std::size_t kBuilderScratchBytes = 8 * 24 + 4 * 8;

// Longest Error reason carried; longer reasons are cut at a UTF-8 character boundary.
inline constexpr std::size_t kMaxErrorReasonBytes = 120;

// Device id a Join carries before the server has assigned one.
inline constexpr std::uint32_t kUnassignedDevice = 0xFFFFFFFFu;

static_assert(kPayloadFrameOverheadBytes % kFrameAlignment == 0 &&
              kMaxControlFrameBytes % kFrameAlignment == 0 &&
              kBuilderScratchBytes % kFrameAlignment == 0);

// Upper bound on the size of a payload frame whose payload has `shape`, a multiple of
// kFrameAlignment (as frames are); 0 if such a frame would exceed kMaxFrameBytes. Reads nothing
// else; constexpr so static buffers can be sized and checked with static_assert.
constexpr std::size_t PayloadFrameBytes(const PayloadShape& shape) {
  // Element counts come from layouts of up to 2^32 - 1 coordinates: sum in 64 bits so a 32-bit
  // size_t cannot wrap before the comparison.
  const std::uint64_t elements =
      std::uint64_t{shape.indices} + shape.values + shape.words + shape.scales;
  const std::uint64_t bytes = (4 * elements + kPayloadFrameOverheadBytes + (kFrameAlignment - 1)) &
                              ~std::uint64_t{kFrameAlignment - 1};
  return bytes <= kMaxFrameBytes ? static_cast<std::size_t>(bytes) : 0;
}

// Upper bound on the bytes a second payload of `shape` (SCAFFOLD's control variate or its
// change, FrameBuilder::ReserveControlPayload) adds to a payload frame: its vectors with their
// length words and padding, its table and vtable, and the union field in the message; 0 above
// kMaxFrameBytes.
inline constexpr std::size_t kControlPayloadOverheadBytes = 96;
constexpr std::size_t ControlPayloadBytes(const PayloadShape& shape) {
  const std::uint64_t elements =
      std::uint64_t{shape.indices} + shape.values + shape.words + shape.scales;
  const std::uint64_t bytes =
      (4 * elements + kControlPayloadOverheadBytes + (kFrameAlignment - 1)) &
      ~std::uint64_t{kFrameAlignment - 1};
  return bytes <= kMaxFrameBytes ? static_cast<std::size_t>(bytes) : 0;
}

// Secure aggregation's messages: the bytes a frame adds to its record lists and masked words
// (prefix, envelope, the message table with its inline keys, the vectors' lengths and padding;
// the WireRoundTrip tests print them), and the most bytes a record takes on the wire.
inline constexpr std::size_t kSecureFrameOverheadBytes = 264;
inline constexpr std::size_t kSecureRosterRecordBytes = 136;  // with its keys' signature
inline constexpr std::size_t kSecureSealedRecordBytes = 84;
inline constexpr std::size_t kSecureShareRecordBytes = 37;
inline constexpr std::size_t kSecureSignatureRecordBytes = 68;

// Upper bound on any SecureAggregation frame to or from a device with at most `neighbours`
// neighbours and a masked input of `words` words (a multiple of kFrameAlignment); 0 above
// kMaxFrameBytes. Every phase's message holds one list: at most `neighbours` roster entries,
// sealed pairs or signatures, `neighbours` + 1 revealed shares (its own too), `survivors`
// survivors (the neighbours, or in signed rounds the cohort), or the words.
constexpr std::size_t SecureFrameBytes(std::size_t neighbours, std::size_t words,
                                       std::size_t survivors) {
  const std::uint64_t n = neighbours;
  std::uint64_t list = n * kSecureRosterRecordBytes;  // the widest record
  if ((n + 1) * kSecureShareRecordBytes > list) list = (n + 1) * kSecureShareRecordBytes;
  if (4 * std::uint64_t{words} > list) list = 4 * std::uint64_t{words};
  if (4 * std::uint64_t{survivors} > list) list = 4 * std::uint64_t{survivors};
  const std::uint64_t bytes = (list + kSecureFrameOverheadBytes + (kFrameAlignment - 1)) &
                              ~std::uint64_t{kFrameAlignment - 1};
  return bytes <= kMaxFrameBytes ? static_cast<std::size_t>(bytes) : 0;
}

// Upper bound on any frame of a run using `params` over `layout` (its payload frames and every
// control frame); 0 for invalid parameters or a frame above kMaxFrameBytes. Size receive buffers
// with it. Payload frames carrying another codec (e.g. a dense model broadcast when `params` is
// a compressor, or a qsgd schedule's largest level count) need the bound of that codec as well.
constexpr std::size_t MaxFrameBytes(const CodecParams& params, const TensorLayout& layout) {
  const Result<PayloadShape> shape = EncodedShape(params, layout);
  if (!shape.ok()) return 0;
  const std::size_t payload_frame = PayloadFrameBytes(shape.value());
  if (payload_frame == 0) return 0;
  return payload_frame > kMaxControlFrameBytes ? payload_frame : kMaxControlFrameBytes;
}

// Buffer bytes a FrameBuilder needs to build every frame of such a run (8-byte aligned storage
// assumed, as an Arena gives); 0 when MaxFrameBytes is 0.
constexpr std::size_t FrameBuilderBytes(const CodecParams& params, const TensorLayout& layout) {
  const std::size_t frame = MaxFrameBytes(params, layout);
  return frame == 0 ? 0 : frame + kBuilderScratchBytes;
}

}  // namespace edgesgd::wire
