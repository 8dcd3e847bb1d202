#pragma once

// The messages of the wire format as plain C++ values: what an encoder takes and a decoder
// returns. Field meanings are documented once, in transport/wire/edgesgd.fbs; enum values equal
// the schema's (checked by static_assert where the generated code is compiled).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "edgesgd/core/codec_params.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd::wire {

enum class MessageKind : std::uint8_t {
  kNone = 0,
  kJoin,
  kWelcome,
  kModelBroadcast,
  kUpdate,
  kGossipExchange,
  kHeartbeat,
  kLeave,
  kError,
};

// Envelope fields every frame carries besides the schema version (which the codec layer adds and
// checks itself).
struct FrameHeader {
  std::uint32_t sender = 0;    // device id of the sender (kUnassignedDevice before a Welcome)
  std::uint32_t round = 0;     // training round the message belongs to (0 where none applies)
  std::uint64_t sequence = 0;  // per-sender counter, for duplicate and replay detection

  friend constexpr bool operator==(const FrameHeader&, const FrameHeader&) = default;
};

// ---- Control messages ----

enum class Architecture : std::uint8_t { kUnknown = 0, kX86_64, kAarch64, kArmv7, kCortexM };

// The architecture this code was compiled for.
constexpr Architecture HostArchitecture() {
#if defined(__x86_64__) || defined(_M_X64)
  return Architecture::kX86_64;
#elif defined(__aarch64__)
  return Architecture::kAarch64;
#elif defined(__arm__) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
  return Architecture::kCortexM;
#elif defined(__arm__)
  return Architecture::kArmv7;
#else
  return Architecture::kUnknown;
#endif
}

// Bit of `kind` in JoinInfo::codecs.
constexpr std::uint32_t CodecBit(CodecKind kind) {
  return std::uint32_t{1} << static_cast<std::uint32_t>(kind);
}
inline constexpr std::uint32_t kAllCodecs = (std::uint32_t{1} << kCodecCount) - 1;

struct JoinInfo {
  Architecture architecture = Architecture::kUnknown;
  std::uint32_t codecs = 0;  // CodecBit()s of the codecs the device implements
  std::uint32_t max_frame_bytes = 0;
  std::uint32_t memory_bytes = 0;

  friend constexpr bool operator==(const JoinInfo&, const JoinInfo&) = default;
};

// Training hyper-parameters a Welcome distributes. The one-byte kinds are numbered by the layer
// that defines them (core's FeedbackKind and OptimizerKind, the protocol's modes); the wire
// carries them without interpreting them.
struct TrainingConfig {
  std::uint8_t feedback = 0;
  float detach = 0.0f;
  std::uint8_t optimizer = 0;
  float learning_rate = 0.0f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  std::uint32_t local_steps = 0;
  std::uint32_t batch = 0;
  std::uint8_t aggregate = 0;
  float participation = 0.0f;
  std::uint8_t quant_schedule = 0;
  std::uint8_t mode = 0;
  std::uint8_t gossip = 0;
  std::uint8_t topology = 0;
  std::uint32_t gossip_rounds = 0;
  std::uint8_t quant_bits_min = 0;
  std::uint8_t quant_bits_max = 0;
  float quant_k = 0.0f;
  float quant_rho = 0.0f;

  friend constexpr bool operator==(const TrainingConfig&, const TrainingConfig&) = default;
};

struct WelcomeInfo {
  std::uint32_t assigned_id = 0;
  std::uint32_t workers = 0;
  std::uint32_t rounds = 0;
  std::uint64_t seed = 0;
  TensorLayout layout;  // model dimension and tensor sizes
  CodecParams codec;
  TrainingConfig training;

  friend constexpr bool operator==(const WelcomeInfo&, const WelcomeInfo&) = default;
};

struct HeartbeatInfo {
  std::uint64_t time_us = 0;
  std::uint64_t echo_time_us = 0;

  friend constexpr bool operator==(const HeartbeatInfo&, const HeartbeatInfo&) = default;
};

enum class LeaveReason : std::uint8_t { kDone = 0, kShutdown, kFailure, kLowPower };

struct LeaveInfo {
  LeaveReason reason = LeaveReason::kDone;

  friend constexpr bool operator==(const LeaveInfo&, const LeaveInfo&) = default;
};

struct ErrorInfo {
  StatusCode code = StatusCode::kOk;
  // Encoding: copied, cut to kMaxErrorReasonBytes. Decoding: points into the frame.
  std::string_view reason;

  friend constexpr bool operator==(const ErrorInfo&, const ErrorInfo&) = default;
};

// ---- Payload-carrying messages ----

enum class BroadcastContent : std::uint8_t { kModel = 0, kAggregate };
enum class GossipVector : std::uint8_t { kModel = 0, kTracker, kModelDelta, kTrackerDelta };

struct UpdateInfo {
  std::uint32_t worker = 0;
  std::uint32_t samples = 0;

  friend constexpr bool operator==(const UpdateInfo&, const UpdateInfo&) = default;
};

struct ModelBroadcastInfo {
  BroadcastContent content = BroadcastContent::kModel;
  std::uint32_t participants = 0;

  friend constexpr bool operator==(const ModelBroadcastInfo&, const ModelBroadcastInfo&) = default;
};

struct GossipInfo {
  std::uint32_t phase = 0;
  std::uint32_t step = 0;
  GossipVector vector = GossipVector::kModel;

  friend constexpr bool operator==(const GossipInfo&, const GossipInfo&) = default;
};

// The non-payload fields of an Update, ModelBroadcast or GossipExchange; `kind` says which, and
// only that kind's member is meaningful.
struct PayloadMessage {
  MessageKind kind = MessageKind::kUpdate;
  UpdateInfo update;
  ModelBroadcastInfo broadcast;
  GossipInfo gossip;

  static constexpr PayloadMessage Update(const UpdateInfo& info) {
    PayloadMessage message;
    message.kind = MessageKind::kUpdate;
    message.update = info;
    return message;
  }
  static constexpr PayloadMessage ModelBroadcast(const ModelBroadcastInfo& info) {
    PayloadMessage message;
    message.kind = MessageKind::kModelBroadcast;
    message.broadcast = info;
    return message;
  }
  static constexpr PayloadMessage GossipExchange(const GossipInfo& info) {
    PayloadMessage message;
    message.kind = MessageKind::kGossipExchange;
    message.gossip = info;
    return message;
  }

  friend constexpr bool operator==(const PayloadMessage&, const PayloadMessage&) = default;
};

// ---- Payload types ----

// The payload tables of the schema's `Payload` union (same numbering).
enum class PayloadKind : std::uint8_t { kNone = 0, kDense, kSparse, kBlock, kSign, kQuantized };

// Which payload table carries a codec's output, and which PayloadShape fields it stores. Fields
// map by position: indices -> SparsePayload.indices or BlockPayload.starts; values -> .values;
// words -> .words; scales -> SignPayload.scales or QuantizedPayload.norms.
struct PayloadMapping {
  CodecKind codec = CodecKind::kIdentity;
  PayloadKind kind = PayloadKind::kNone;
  bool indices = false;
  bool values = false;
  bool words = false;
  bool scales = false;
};

// The one place that ties codecs to payload tables, indexed by CodecKind. rand_k shares
// DensePayload with identity: its coordinates follow from the shared seed, so only values travel.
// reg_top_k shares SparsePayload with top_k: only the choice of coordinates differs.
inline constexpr std::array<PayloadMapping, kCodecCount> kPayloadMap = {{
    {CodecKind::kIdentity, PayloadKind::kDense, false, true, false, false},
    {CodecKind::kTopK, PayloadKind::kSparse, true, true, false, false},
    {CodecKind::kRandK, PayloadKind::kDense, false, true, false, false},
    {CodecKind::kRandomBlock, PayloadKind::kBlock, true, true, false, false},
    {CodecKind::kSign, PayloadKind::kSign, false, false, true, true},
    {CodecKind::kQsgd, PayloadKind::kQuantized, false, false, true, true},
    {CodecKind::kRegTopK, PayloadKind::kSparse, true, true, false, false},
}};

namespace internal {
constexpr bool PayloadMapMatchesEnum() {
  for (std::size_t i = 0; i < kPayloadMap.size(); ++i) {
    if (static_cast<std::size_t>(kPayloadMap[i].codec) != i) return false;
  }
  return true;
}
static_assert(PayloadMapMatchesEnum(), "kPayloadMap must be indexed by CodecKind");
}  // namespace internal

// The row of kPayloadMap for `kind`. Errors: kInvalidArgument for a value outside CodecKind.
constexpr Result<PayloadMapping> PayloadMappingOf(CodecKind kind) {
  const auto index = static_cast<std::size_t>(kind);
  if (index >= kPayloadMap.size()) return Status::InvalidArgument();
  return kPayloadMap[index];
}

// A received payload: the codec that produced it, its per-frame parameters and zero-copy spans
// over the frame's vectors (valid while the frame's bytes are).
struct EncodedPayload {
  CodecKind codec = CodecKind::kIdentity;
  PayloadKind kind = PayloadKind::kNone;
  std::uint32_t qsgd_levels = 0;  // kQuantized only
  std::uint32_t qsgd_bucket = 0;  // kQuantized only
  PayloadView view;
};

// The parameters DecodeAdd needs for `payload`: `configured` (the run's parameters from the
// Welcome) with the codec kind and, for qsgd, the level count and bucket the frame carries.
// Reads only its arguments. Whether the codec may differ from the configured one is the
// protocol's decision; DecodeAdd checks every field size against these parameters.
constexpr CodecParams DecodeParams(CodecParams configured, const EncodedPayload& payload) {
  configured.kind = payload.codec;
  if (payload.kind == PayloadKind::kQuantized) {
    configured.qsgd_levels = payload.qsgd_levels;
    configured.qsgd_bucket = payload.qsgd_bucket;
  }
  return configured;
}

}  // namespace edgesgd::wire
