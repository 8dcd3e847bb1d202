#pragma once

// The input formats of the fuzz targets, shared with the corpus generator: the run
// configurations the session and checkpoint targets choose from, and the byte layout of each
// target's input (a small script of events for the sessions). Every format reads any bytes: a
// FuzzInput returns zeros past the end, and every choice is taken modulo its range.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_types.h"
#include "edgesgd/protocol/session.h"
#include "fuzz/fuzz_util.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::fuzz {

using protocol::PeerId;
using protocol::TimeNs;

inline constexpr TimeNs kMs = 1'000'000;

// ---- Run configurations (server, worker and checkpoint targets) ----

// Two tensors, so per-tensor code paths run more than once; small, so frames stay a few hundred
// bytes and scripts of whole runs fit in a small corpus.
inline constexpr std::array<std::uint64_t, 2> kTensorSizes = {20, 12};
inline constexpr std::uint32_t kRounds = 6;
inline constexpr std::uint32_t kWorkers = 3;

struct NamedRunConfig {
  std::string_view name;
  protocol::RunConfig config;
};

inline protocol::RunConfig MeanRun(const CodecParams& codec, protocol::DownlinkKind downlink) {
  protocol::RunConfig config;
  config.layout = TensorLayout::FromSizes(kTensorSizes).value();
  config.codec = codec;
  config.feedback.kind = FeedbackKind::kEf;
  config.feedback.learning_rate = 0.2f;
  config.feedback.momentum = 0.5f;
  config.feedback.weight_decay = 0.0f;
  config.feedback.local_steps = 1;
  config.rounds = kRounds;
  config.seed = 42;
  config.batch = 8;
  config.downlink = downlink;
  return config;
}

// One configuration per aggregation component and downlink, over most codecs. Index with
// RunConfigAt (any byte).
inline std::vector<NamedRunConfig> RunConfigs() {
  using protocol::DownlinkKind;
  std::vector<NamedRunConfig> configs;
  configs.push_back({"top_k_model", MeanRun(TopKParams{.k_ratio = 0.25f}, DownlinkKind::kModel)});
  configs.push_back(
      {"rand_k_aggregate", MeanRun(RandKParams{.k_ratio = 0.25f}, DownlinkKind::kAggregate)});
  configs.push_back(
      {"top_k_recompressed", MeanRun(TopKParams{.k_ratio = 0.25f}, DownlinkKind::kAggregate)});
  {
    protocol::RunConfig majority =
        MeanRun(SignParams{.scale = SignScale::kUnit}, DownlinkKind::kAggregate);
    majority.aggregation = protocol::AggregationKind::kMajority;
    majority.optimizer = OptimizerParams{OptimizerKind::kSignum, 0.01f, 0.5f, 0.0f};
    configs.push_back({"majority_vote", majority});
  }
  {
    protocol::RunConfig qsgd =
        MeanRun(QsgdParams{.levels = 15, .bucket = 16, .schedule = QuantScheduleKind::kDq},
                DownlinkKind::kModel);
    qsgd.feedback.local_steps = 2;
    configs.push_back({"qsgd_dq_two_steps", qsgd});
  }
  configs.push_back(
      {"reg_top_k_model", MeanRun(RegTopKParams{.k_ratio = 0.25f}, DownlinkKind::kModel)});
  configs.push_back({"natural_recompressed", MeanRun(NaturalParams{}, DownlinkKind::kAggregate)});
  {
    protocol::RunConfig block =
        MeanRun(RandomBlockParams{.block_ratio = 4}, DownlinkKind::kAggregate);
    block.feedback.kind = FeedbackKind::kDef;
    block.feedback.detach = 0.3f;
    block.participation = 0.67f;
    configs.push_back({"random_block_def_partial", block});
  }
  {
    protocol::RunConfig central = MeanRun(TopKParams{.k_ratio = 0.25f}, DownlinkKind::kModel);
    central.privacy = PrivacyParams{.mode = PrivacyMode::kCentral,
                                    .clip = 0.5f,
                                    .target_quantile = 0.5f,
                                    .count_noise = 1.0f};  // adaptive clipping
    configs.push_back({"top_k_central_privacy", central});
    protocol::RunConfig distributed =
        MeanRun(RandomBlockParams{.block_ratio = 4}, DownlinkKind::kAggregate);
    distributed.privacy = PrivacyParams{.mode = PrivacyMode::kDistributed, .clip = 0.5f};
    configs.push_back({"random_block_distributed_privacy", distributed});
  }
  {
    // SCAFFOLD: Updates and model broadcasts carry a second payload.
    protocol::RunConfig scaffold = MeanRun(TopKParams{.k_ratio = 0.25f}, DownlinkKind::kModel);
    scaffold.feedback.local_steps = 2;
    scaffold.scaffold = true;
    configs.push_back({"top_k_scaffold", scaffold});
  }
  {
    // Secure aggregation: the rounds' phases travel as SecureAggregation messages.
    protocol::RunConfig secure =
        MeanRun(RandomBlockParams{.block_ratio = 4}, DownlinkKind::kModel);
    secure.secure.enabled = true;
    secure.secure.bound = 16.0f;
    configs.push_back({"random_block_secure", secure});
    // Signed: the keys carry signatures, and the consistency check runs before unmasking.
    protocol::RunConfig signed_secure = secure;
    signed_secure.secure.signed_rounds = true;
    configs.push_back({"random_block_secure_signed", signed_secure});
    protocol::RunConfig votes =
        MeanRun(SignParams{.scale = SignScale::kUnit}, DownlinkKind::kAggregate);
    votes.aggregation = protocol::AggregationKind::kMajority;
    votes.optimizer = OptimizerParams{OptimizerKind::kSignum, 0.01f, 0.5f, 0.0f};
    votes.secure.enabled = true;
    configs.push_back({"majority_vote_secure", votes});
  }
  return configs;
}

// The harnesses' workers draw their secure aggregation keys from the round (fuzzing needs
// repeatable runs, not secrets).
inline Status ScriptEntropy(void*, std::uint32_t round, std::span<std::byte> out) {
  std::uint32_t state = 2654435761u * (round + 1u);
  for (std::byte& b : out) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::byte>(state >> 24);
  }
  return Status::Ok();
}

// Signed secure rounds: the test signatures of secagg_test_util.h (fast, and every harness can
// play any device), one signer per worker id and one verifier of them all.
inline const secagg::testing::TestVerifier& ScriptVerifier() {
  static const secagg::testing::TestVerifier verifier;
  return verifier;
}
inline secagg::DeviceSigning ScriptSigning(std::uint32_t device) {
  static const std::array<secagg::testing::TestSigner, 8> signers{
      secagg::testing::TestSigner(1), secagg::testing::TestSigner(2),
      secagg::testing::TestSigner(3), secagg::testing::TestSigner(4),
      secagg::testing::TestSigner(5), secagg::testing::TestSigner(6),
      secagg::testing::TestSigner(7), secagg::testing::TestSigner(8)};
  return {&signers.at((device - 1) % signers.size()), &ScriptVerifier()};
}

inline const std::vector<NamedRunConfig>& AllRunConfigs() {
  static const std::vector<NamedRunConfig> configs = RunConfigs();
  return configs;
}
inline const NamedRunConfig& RunConfigAt(std::uint8_t index) {
  return AllRunConfigs()[index % AllRunConfigs().size()];
}

// The model every server starts from.
inline std::vector<float> InitialModel(const protocol::RunConfig& config) {
  std::vector<float> model(config.layout.dimension());
  for (std::size_t i = 0; i < model.size(); ++i) {
    model[i] = 0.25f * static_cast<float>(static_cast<int>(i % 9) - 4);
  }
  return model;
}

// The quadratic problem the workers train on: gradient = point - target, target fixed.
inline float Target(std::size_t i) {
  return 0.5f * static_cast<float>(static_cast<int>(i % 7) - 3);
}

// Deterministic values for payloads the harnesses build: a pattern from `seed` scaled by 2^e
// with e from `scale` in -20..19, so huge, tiny and ordinary magnitudes all occur.
inline std::vector<float> PatternValues(std::size_t count, std::uint8_t seed, std::uint8_t scale) {
  std::vector<float> values(count);
  const float factor = std::ldexp(1.0f, static_cast<int>(scale % 40) - 20);
  std::uint32_t state = 2654435761u * (seed + 1u);
  for (float& value : values) {
    state = state * 1664525u + 1013904223u;
    value = factor * (static_cast<float>(state >> 8) * 0x1.0p-24f * 2.0f - 1.0f);
  }
  return values;
}

// Time steps of the session scripts: kAdvance moves the clock by this much per unit.
inline constexpr TimeNs kTick = kMs / 10;

// ---- Server session script ----
//
//   u8 configuration (RunConfigAt), u8 options (ServerOptionsFor), then events until the input
//   ends, each an op byte (ServerOp, modulo kServerOpCount) and its operands:
//     kFrame      u8 from, u16 length, that many bytes: a raw frame
//     kJoin       u8 from, u8 flags (JoinFlags)
//     kUpdate     u8 from, u8 round (current + v % 3 - 1), u8 value seed, u8 scale, u8 flags
//                 (bit 0: the header claims another sender; bit 1: identity codec, not the run's)
//     kHeartbeat  u8 from
//     kLeave      u8 from, u8 reason
//     kAdvance    u16 ticks of kTick, then the timer if due
//     kWakeup     the clock jumps to NextWakeup(), then the timer
//     kPeerLost   u8 peer
// Peers are `from % (kWorkers + 3)`: the server's own id, the workers and two strangers.
enum class ServerOp : std::uint8_t {
  kFrame = 0,
  kJoin,
  kUpdate,
  kHeartbeat,
  kLeave,
  kAdvance,
  kWakeup,
  kPeerLost,
};
inline constexpr std::uint8_t kServerOpCount = 8;
inline constexpr std::size_t kMaxScriptEvents = 4096;

// Feeds `harness` one event after another from `in` until the script ends, kMaxScriptEvents
// have run or `go_on` says stop.
template <typename Harness, typename GoOn = bool (*)()>
void RunScript(FuzzInput& in, Harness& harness, GoOn go_on = [] { return true; }) {
  for (std::size_t event = 0; event < kMaxScriptEvents && !in.empty() && go_on(); ++event) {
    harness.Event(in);
  }
}

inline PeerId ScriptPeer(std::uint8_t from) { return from % (kWorkers + 3); }

inline protocol::ServerOptions ServerOptionsFor(std::uint8_t flags) {
  protocol::ServerOptions options;
  options.workers = kWorkers;
  options.quorum = 1 + flags % kWorkers;
  options.round_deadline_ns = (flags & 4) != 0 ? protocol::kNever : 1000 * kMs;
  options.liveness_timeout_ns = (flags & 8) != 0 ? protocol::kNever : 5000 * kMs;
  options.join_timeout_ns = (flags & 16) != 0 ? 3000 * kMs : protocol::kNever;
  // The privacy configurations need a noise key, the signed one a verifier.
  options.noise_key = {0x5EC2E7};
  options.secure_verifier = &ScriptVerifier();
  return options;
}
// The options the corpus generator runs with (and records under).
inline constexpr std::uint8_t kDefaultServerFlags = 1;  // quorum 2, deadlines, liveness

// kJoin flags: bit 0 the sender is kUnassignedDevice (else the peer id); bit 1 advertises no
// codecs; bit 2 advertises 1 KiB of memory; bit 3 a tiny max_frame_bytes.

// ---- Worker session script ----
//
//   u8 flags (bit 0: device id unassigned, else 1; bit 1: no heartbeats; bit 2: signs secure
//   rounds), then events, each an
//   op byte (WorkerOp, modulo kWorkerOpCount) and its operands:
//     kFrame      u8 from (v % 3: 0 is the server), u16 length, that many bytes
//     kWelcome    u8 configuration (RunConfigAt), u8 override mask, then per set bit:
//                 bit 0 u32 assigned id, bit 1 u32 workers, bit 2 u32 rounds, bit 3 u32 local
//                 steps, bit 4 u32 batch, bit 5 f32 learning rate, bit 6 f32 momentum,
//                 bit 7 u8 aggregate bits and u8 feedback kind
//     kBroadcast  u8 round, u8 flags (bit 0 content Aggregate; bit 1 the run's codec, else the
//                 full model as identity), u8 participants, u8 value seed, u8 scale
//     kLeave      u8 reason
//     kError      u8 status code, u8 length, that many bytes of reason
//     kAdvance    u16 ticks of kTick, then the timer if due
//     kWakeup     the clock jumps to NextWakeup(), then the timer
//     kPeerLost   u8 peer (v % 3)
enum class WorkerOp : std::uint8_t {
  kFrame = 0,
  kWelcome,
  kBroadcast,
  kLeave,
  kError,
  kAdvance,
  kWakeup,
  kPeerLost,
};
inline constexpr std::uint8_t kWorkerOpCount = 8;

// ---- Frame decoder input ----
//
// A fixed header saying how a receiver is configured, then the frame's bytes:
//   u8  tensors - 1 (modulo 4)        u8 weight (DecoderWeight)
//   u8  flags (bit 0: also DecodeAdd with the configured parameters when ParamsForPayload
//       refuses the payload; bit 1: misaligned copy)
//   u8  codec id of the configured parameters
//   4 x u32 tensor sizes (1 + v % 4096 each)
//   u64 seed, u32 round, u32 worker   (the CodecContext)
//   u32 parameter word count, 8 x u32 parameter words (ParamsFromWords; the payload's codec's
//       defaults when they do not validate)
struct DecoderSetup {
  std::uint8_t tensors = 1;
  std::uint8_t weight = 0;
  std::uint8_t flags = 0;
  CodecId codec = 0;
  std::array<std::uint32_t, 4> sizes{};
  CodecContext context;
  std::uint32_t word_count = 0;
  std::array<std::uint32_t, kMaxCodecParamWords> words{};

  static DecoderSetup Read(FuzzInput& in) {
    DecoderSetup setup;
    setup.tensors = static_cast<std::uint8_t>(1 + in.U8() % 4);
    setup.weight = in.U8();
    setup.flags = in.U8();
    setup.codec = in.U8();
    for (std::uint32_t& size : setup.sizes) size = 1 + in.U32() % 4096;
    setup.context.seed = in.U64();
    setup.context.round = in.U32();
    setup.context.worker = in.U32();
    setup.word_count = in.U32() % (kMaxCodecParamWords + 1);
    for (std::uint32_t& word : setup.words) word = in.U32();
    return setup;
  }
  void Write(FuzzOutput& out) const {
    out.U8(static_cast<std::uint8_t>(tensors - 1));
    out.U8(weight);
    out.U8(flags);
    out.U8(codec);
    for (const std::uint32_t size : sizes) out.U32(size - 1);
    out.U64(context.seed);
    out.U32(context.round);
    out.U32(context.worker);
    out.U32(word_count);
    for (const std::uint32_t word : words) out.U32(word);
  }
  // For the generator: a receiver of `params` over `layout` (at most 4 tensors, each <= 4096).
  static DecoderSetup For(const CodecParams& params, const TensorLayout& layout,
                          const CodecContext& context) {
    DecoderSetup setup;
    setup.tensors = static_cast<std::uint8_t>(layout.tensor_count());
    for (std::size_t t = 0; t < layout.tensor_count() && t < 4; ++t) {
      setup.sizes[t] = static_cast<std::uint32_t>(layout.size(t));
    }
    for (std::size_t t = layout.tensor_count(); t < 4; ++t) setup.sizes[t] = 1;
    setup.codec = CodecIdOf(params);
    setup.context = context;
    setup.word_count = static_cast<std::uint32_t>(ParamWords(params, setup.words));
    return setup;
  }
};

inline float DecoderWeight(std::uint8_t selector) {
  constexpr std::array<float, 6> kWeights = {1.0f, 0.5f, -1.0f, 1.0f / 3.0f, 0.0f, 1e-30f};
  return kWeights[selector % kWeights.size()];
}

// ---- Auth record layer script ----
//
//   u8 device the initiator names (v % 4: 1 and 2 have keys, 0 and 3 do not), 16 bytes of
//   initiator nonce, 16 bytes of responder nonce, u8 handshake tampering (bit 0: u8 position,
//   u8 xor applied to the initiator hello; bit 1: the same for the responder hello), then
//   events, each an op byte (AuthOp, modulo kAuthOpCount) and operands:
//     kSealInitiator / kSealResponder   u16 length (modulo kAuthMaxPayload + 1), that many bytes
//     kDeliverToResponder / kDeliverToInitiator   u8 which record (modulo the records the other
//                 side sealed), u8 tampering count (modulo 5), then per tampering u8 kind,
//                 u16 position, u8 value (AuthTamper)
//     kForgeToResponder / kForgeToInitiator   u16 length, that many bytes: a made-up record
//     kReflect    u8 which record: one the responder sealed, sent back to the responder
//     kLength     u8 which record: ReadRecordLength of an untouched record from the initiator
enum class AuthOp : std::uint8_t {
  kSealInitiator = 0,
  kSealResponder,
  kDeliverToResponder,
  kDeliverToInitiator,
  kForgeToResponder,
  kForgeToInitiator,
  kReflect,
  kLength,
};
inline constexpr std::uint8_t kAuthOpCount = 8;
inline constexpr std::size_t kAuthMaxPayload = 1024;
enum class AuthTamper : std::uint8_t { kFlipBit = 0, kSetByte, kTruncate, kAppend };
inline constexpr std::uint8_t kAuthTamperCount = 4;

// ---- Checkpoint input ----
//
//   u8 configuration (RunConfigAt), u8 flags (bit 0: the harness rewrites the trailing FNV-1a
//   checksum so that mutations get past it), then the checkpoint's bytes.

}  // namespace edgesgd::fuzz
