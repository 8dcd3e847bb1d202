#pragma once

// The messages of the wire format as plain C++ values: what an encoder takes and a decoder
// returns. Field meanings are documented once, in transport/wire/edgesgd.fbs; enum values equal
// the schema's (checked by static_assert where the generated code is compiled).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "edgesgd/core/codec_registry.h"
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
  kSecureAggregation,
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

// Bit of codec `id` in JoinInfo::codecs (CodecRegistry::Mask sets one per registered codec).
constexpr std::uint32_t CodecBit(CodecId id) { return std::uint32_t{1} << id; }

// Bits of JoinInfo::features: parts of the protocol a device implements, so a server never hands
// a run to a device that would silently skip one (an older build ignores the Welcome fields it
// does not know).
inline constexpr std::uint32_t kFeatureDifferentialPrivacy = 1;  // clips its updates (and counts)
inline constexpr std::uint32_t kFeatureDistributedNoise = 2;     // adds its share of the noise
inline constexpr std::uint32_t kFeatureScaffold = 4;  // keeps SCAFFOLD's control variates
// Masks its updates (SecAgg) with 32-byte shares over GF(2^127 - 1). Bit 3 (8) meant 44-byte
// shares over GF(2^31 - 1), whose messages this build cannot read: retired.
inline constexpr std::uint32_t kFeatureSecureAggregation = 16;

struct JoinInfo {
  Architecture architecture = Architecture::kUnknown;
  std::uint32_t codecs = 0;  // CodecBit()s of the codecs the device registers
  std::uint32_t max_frame_bytes = 0;
  std::uint32_t memory_bytes = 0;
  std::uint32_t features = 0;  // kFeature* bits

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
  std::uint8_t mode = 0;
  std::uint8_t gossip = 0;
  std::uint8_t topology = 0;
  std::uint32_t gossip_rounds = 0;
  float prox_mu = 0.0f;
  bool scaffold = false;

  friend constexpr bool operator==(const TrainingConfig&, const TrainingConfig&) = default;
};

// Differential privacy's parameters; mode 0 (off) means the Welcome carries none. The mode is
// core's PrivacyMode, carried without interpretation.
struct PrivacyConfig {
  std::uint8_t mode = 0;
  float clip = 0.0f;
  float noise_multiplier = 0.0f;
  float delta = 0.0f;
  float target_quantile = 0.0f;
  float clip_learning_rate = 0.0f;
  float count_noise = 0.0f;

  friend constexpr bool operator==(const PrivacyConfig&, const PrivacyConfig&) = default;
};

// Secure aggregation's parameters; threshold 0 (off) means the Welcome carries none.
struct SecureConfig {
  float threshold = 0.0f;
  std::uint32_t neighbours = 0;
  float bound = 0.0f;
  bool signed_rounds = false;

  friend constexpr bool operator==(const SecureConfig&, const SecureConfig&) = default;
};

struct WelcomeInfo {
  std::uint32_t assigned_id = 0;
  std::uint32_t workers = 0;
  std::uint32_t rounds = 0;
  std::uint64_t seed = 0;
  TensorLayout layout;  // model dimension and tensor sizes
  CodecParams codec;    // travels as its codec id and parameter words (CodecConfig)
  TrainingConfig training;
  PrivacyConfig privacy;
  SecureConfig secure;

  friend constexpr bool operator==(const WelcomeInfo&, const WelcomeInfo&) = default;
};

struct HeartbeatInfo {
  std::uint64_t time_us = 0;
  std::uint64_t echo_time_us = 0;

  friend constexpr bool operator==(const HeartbeatInfo&, const HeartbeatInfo&) = default;
};

// kRefusedRun: a worker refused the run its Welcome described (outside its bounds or invalid).
enum class LeaveReason : std::uint8_t { kDone = 0, kShutdown, kFailure, kLowPower, kRefusedRun };

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
enum class GossipVector : std::uint8_t {
  kModel = 0,
  kTracker,
  kModelDelta,    // CHOCO, BEER: the model's change against its public copy, compressed
  kTrackerDelta,  // BEER: the tracker's change against its public copy, compressed
  // CHOCO, BEER: the sender's public copy, dense (resynchronises a holder that lost a delta);
  // GossipInfo::step names the copy: 0 the model's, 1 BEER's tracker's.
  kModelCopy,
  kCopyRequest,  // CHOCO, BEER: asks for the receiver's kModelCopy (step as there)
};
// Values of GossipVector, all of them below this (the schema's enum, checked in the decoder).
inline constexpr std::size_t kGossipVectorCount = 6;

struct UpdateInfo {
  std::uint32_t worker = 0;
  std::uint32_t samples = 0;
  float clip_indicator = 0.0f;  // adaptive clipping (see the schema)
  std::uint32_t local_steps = 0;  // fewer than H local steps taken, or 0 for all H

  friend constexpr bool operator==(const UpdateInfo&, const UpdateInfo&) = default;
};

struct ModelBroadcastInfo {
  BroadcastContent content = BroadcastContent::kModel;
  std::uint32_t participants = 0;
  float clip_bound = 0.0f;  // adaptive clipping (see the schema)

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

// ---- Secure aggregation (docs/secure-aggregation.md) ----

// Builds short of flash define EDGESGD_SECURE_AGGREGATION=0 (the bare-metal builds do): they
// neither build nor read SecureAggregation messages (their decoder refuses them as unknown).
#if defined(EDGESGD_SECURE_AGGREGATION) && !EDGESGD_SECURE_AGGREGATION
inline constexpr bool kSecureAggregationFrames = false;
#else
inline constexpr bool kSecureAggregationFrames = true;
#endif

// Which phase and direction a SecureAggregation message belongs to (the schema lists what each
// carries).
enum class SecurePhase : std::uint8_t {
  kKeys = 0,         // device -> server
  kRoster,           // server -> device
  kShares,           // device -> server
  kDeliveredShares,  // server -> device
  kMaskedInput,      // device -> server
  kSurvivors,        // server -> device
  kUnmasking,        // device -> server
  kConsistency,      // device -> server (signed rounds)
  kSignatures,       // server -> device (signed rounds)
};

inline constexpr std::size_t kSecureKeyBytes = 32;      // an X25519 public key, a SHA-256 digest
inline constexpr std::size_t kSecureSealedBytes = 80;  // two 32-byte shares and a 16-byte tag
inline constexpr std::size_t kSecureShareWords = 8;    // two elements of GF(2^127 - 1)
inline constexpr std::size_t kSecureSignatureBytes = 64;  // ECDSA P-256: r then s
using SecureKey = std::array<std::byte, kSecureKeyBytes>;
using SecureSignature = std::array<std::byte, kSecureSignatureBytes>;

struct SecureRosterRecord {
  std::uint32_t device = 0;
  std::uint32_t share_point = 0;
  SecureKey cipher_public{};
  SecureKey mask_public{};
  SecureSignature keys_signature{};  // signed rounds only; zeros otherwise

  friend constexpr bool operator==(const SecureRosterRecord&, const SecureRosterRecord&) = default;
};

struct SecureSealedRecord {
  std::uint32_t device = 0;  // the receiver on the way to the server, the sender from it
  std::array<std::byte, kSecureSealedBytes> sealed{};

  friend constexpr bool operator==(const SecureSealedRecord&, const SecureSealedRecord&) = default;
};

inline constexpr std::uint8_t kSecureSeedShare = 0;     // SecureShareRecord::kind
inline constexpr std::uint8_t kSecureMaskKeyShare = 1;  // SecureShareRecord::kind
struct SecureShareRecord {
  std::uint32_t owner = 0;
  std::uint8_t kind = kSecureSeedShare;
  std::array<std::uint32_t, kSecureShareWords> y{};  // the share at its holder's point

  friend constexpr bool operator==(const SecureShareRecord&, const SecureShareRecord&) = default;
};

// A device's signature of the survivor set, as the server forwards it to the device's neighbours.
struct SecureSignatureRecord {
  std::uint32_t device = 0;
  SecureSignature signature{};

  friend constexpr bool operator==(const SecureSignatureRecord&,
                                   const SecureSignatureRecord&) = default;
};

// Where a received list of records lies in its frame: the schema sends a list as parallel
// vectors of scalars (SecureAggregation's devices, points, keys / sealed / kinds, share_words).
struct SecureColumns {
  const std::uint32_t* devices = nullptr;
  const std::uint32_t* points = nullptr;
  const std::byte* bytes = nullptr;  // 64 key bytes, 80 sealed bytes or one kind per record
  const std::uint32_t* share_words = nullptr;
  const std::byte* signatures = nullptr;  // 64 bytes per record, or absent (unsigned rosters)
};

// Records of one kind inside a received frame, assembled on access from the frame's parallel
// vectors (whose lengths the decoder checked). Valid while the frame's bytes are.
template <typename Record>
class SecureRecords {
 public:
  SecureRecords() = default;
  SecureRecords(const SecureColumns& columns, std::size_t count)
      : columns_(columns), count_(count) {}
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  Record operator[](std::size_t index) const;  // index < size()

 private:
  SecureColumns columns_;
  std::size_t count_ = 0;
};

template <>
inline SecureRosterRecord SecureRecords<SecureRosterRecord>::operator[](std::size_t index) const {
  SecureRosterRecord out;
  out.device = columns_.devices[index];
  out.share_point = columns_.points[index];
  const std::byte* keys = columns_.bytes + 2 * kSecureKeyBytes * index;
  std::copy_n(keys, kSecureKeyBytes, out.cipher_public.begin());
  std::copy_n(keys + kSecureKeyBytes, kSecureKeyBytes, out.mask_public.begin());
  if (columns_.signatures != nullptr) {
    std::copy_n(columns_.signatures + kSecureSignatureBytes * index, kSecureSignatureBytes,
                out.keys_signature.begin());
  }
  return out;
}

template <>
inline SecureSealedRecord SecureRecords<SecureSealedRecord>::operator[](std::size_t index) const {
  SecureSealedRecord out;
  out.device = columns_.devices[index];
  std::copy_n(columns_.bytes + kSecureSealedBytes * index, kSecureSealedBytes, out.sealed.begin());
  return out;
}

template <>
inline SecureShareRecord SecureRecords<SecureShareRecord>::operator[](std::size_t index) const {
  SecureShareRecord out;
  out.owner = columns_.devices[index];
  out.kind = static_cast<std::uint8_t>(columns_.bytes[index]);
  std::copy_n(columns_.share_words + kSecureShareWords * index, kSecureShareWords, out.y.begin());
  return out;
}

template <>
inline SecureSignatureRecord SecureRecords<SecureSignatureRecord>::operator[](
    std::size_t index) const {
  SecureSignatureRecord out;
  out.device = columns_.devices[index];
  std::copy_n(columns_.signatures + kSecureSignatureBytes * index, kSecureSignatureBytes,
              out.signature.begin());
  return out;
}

// The fields of a SecureAggregation message besides its record lists; only those of its phase
// are meaningful.
struct SecureFields {
  SecurePhase phase = SecurePhase::kKeys;
  SecureKey cipher_public{};      // kKeys
  SecureKey mask_public{};        // kKeys
  std::uint32_t threshold = 0;    // kRoster
  std::uint32_t share_point = 0;  // kRoster
  SecureKey commitment{};         // kShares
  // kKeys: the advertisement's signature (zeros in unsigned rounds); kConsistency: the survivor
  // set's.
  SecureSignature signature{};

  friend constexpr bool operator==(const SecureFields&, const SecureFields&) = default;
};

// A SecureAggregation message to encode: the lists of other phases than `fields.phase` are not
// written.
struct SecureMessage {
  SecureFields fields;
  std::span<const SecureRosterRecord> roster;   // kRoster
  std::span<const SecureSealedRecord> shares;   // kShares, kDeliveredShares
  std::span<const std::uint32_t> masked;        // kMaskedInput
  std::span<const std::uint32_t> survivors;     // kSurvivors
  std::span<const SecureShareRecord> revealed;  // kUnmasking
  std::span<const SecureSignatureRecord> signatures;  // kSignatures
};

// What a FrameView holds for a SecureAggregation message in a build without secure aggregation.
struct NoSecureView {};

// A received SecureAggregation message; the lists point into the frame.
struct SecureView {
  SecureFields fields;
  SecureRecords<SecureRosterRecord> roster;
  SecureRecords<SecureSealedRecord> shares;
  std::span<const std::uint32_t> masked;
  std::span<const std::uint32_t> survivors;
  SecureRecords<SecureShareRecord> revealed;
  SecureRecords<SecureSignatureRecord> signatures;
};

// ---- Payloads ----

// A received payload: the codec it names, its table (layout) and, for kQuantized, its header,
// and zero-copy spans over the frame's vectors (valid while the frame's bytes are). Whether the
// codec and header fit the run is the receiver's decision (ParamsForPayload); the codec's
// DecodeAdd checks every field size.
struct EncodedPayload {
  CodecId codec = 0;
  PayloadLayout layout = PayloadLayout::kDense;
  QuantizedHeader header;  // kQuantized only
  PayloadView view;
};

}  // namespace edgesgd::wire
