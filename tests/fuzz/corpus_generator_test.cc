// Writes the fuzz targets' seed corpora from short real runs: a server and three workers of each
// run configuration of fuzz_scripts.h, over the protocol tests' in-memory network, with every
// frame recorded. From them:
//   frame_decoder    each kind of frame of each run (a few Updates and broadcasts, the control
//                    frames) with the receiver setup that decodes it, plus frames of the codecs
//                    and messages the runs do not send (fp16, sign with mean-abs scales, fixed
//                    qsgd, a GossipExchange, a Heartbeat, secure aggregation's messages of
//                    every phase), and messages at the schema's limits
//                    (the longest Error reason, a Welcome with the most tensors): one mutation
//                    from what the decoder must refuse
//   server_session   the run as the server saw it: every frame it received, at its time
//   worker_session   the run as worker 1 saw it
//   auth_record      a connection carrying the run's frames both ways, and the same with a
//                    replayed, a tampered and a reflected record
//   checkpoint       the server's checkpoints at the start, in the middle and at the end
// The corpus in the repository was written by running this with EDGESGD_FUZZ_CORPUS_DIR set to
// tests/fuzz/corpus; without it, it writes to the build tree (a check that it still works).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "edgesgd/auth/auth_format.h"
#include "edgesgd/wire/edgesgd_generated.h"
#include "edgesgd/wire/internal/fixed_allocator.h"
#include "fuzz/fuzz_scripts.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/session_frames.h"
#include "protocol/frame_factory.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::fuzz {
namespace {

using protocol::testing::Cluster;
using protocol::testing::Recorder;

std::filesystem::path OutputDir() {
  const char* dir = std::getenv("EDGESGD_FUZZ_CORPUS_DIR");
  return dir != nullptr ? std::filesystem::path(dir)
                        : std::filesystem::path(EDGESGD_FUZZ_DEFAULT_CORPUS_OUT);
}

void WriteSeed(const std::string& target, const std::string& name,
               const std::vector<std::byte>& bytes) {
  const std::filesystem::path dir = OutputDir() / target;
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << (dir / name);
}

// A frame delivered in the run: who sent it to whom and when it arrived.
struct Delivery {
  TimeNs at;
  PeerId from;
  PeerId to;
  std::vector<std::byte> bytes;
  wire::MessageKind kind;
  std::uint32_t round;
  wire::BroadcastContent content;
};

constexpr TimeNs kLatency = kMs;

// A run of `index`'s configuration to the end, every frame recorded, and the server's
// checkpoints at round 0, kRounds / 2 and the end.
struct RecordedRun {
  std::vector<Delivery> deliveries;
  std::vector<std::vector<std::byte>> checkpoints;
};

std::vector<std::byte> Save(const protocol::ServerSession& server) {
  std::vector<std::byte> bytes(server.StateBytes());
  EXPECT_TRUE(server.SaveState(bytes).ok());
  return bytes;
}

RecordedRun Record(std::uint8_t index) {
  const protocol::RunConfig& config = RunConfigAt(index).config;
  protocol::WorkerOptions worker_options;
  worker_options.add_noise = &AddNoiseShare;
  worker_options.noise_key = {0x5EC2E7};
  worker_options.secure_entropy = &ScriptEntropy;
  Cluster cluster(config, ServerOptionsFor(kDefaultServerFlags),
                  protocol::testing::Targets(kWorkers, config.layout.dimension()),
                  InitialModel(config), worker_options,
                  [&config](protocol::PeerId peer, protocol::WorkerOptions& options) {
                    if (config.secure.signed_rounds) options.secure_signing = ScriptSigning(peer);
                  });
  cluster.net().SetLatencyAll(kLatency);
  Recorder recorder;
  cluster.net().SetInterceptor(&recorder);
  RecordedRun run;
  cluster.Start();
  run.checkpoints.push_back(Save(cluster.server()));
  EXPECT_TRUE(cluster.RunUntilRound(kRounds / 2, 1000 * protocol::testing::kSecond));
  run.checkpoints.push_back(Save(cluster.server()));
  EXPECT_TRUE(cluster.RunUntilFinished(1000 * protocol::testing::kSecond));
  EXPECT_EQ(cluster.server().counters().rounds_completed, kRounds);
  run.checkpoints.push_back(Save(cluster.server()));
  for (const Recorder::Record& record : recorder.records) {
    const auto bytes = record.frame.bytes();
    run.deliveries.push_back({record.time + kLatency, record.from, record.to,
                              std::vector<std::byte>(bytes.begin(), bytes.end()), record.kind,
                              record.round, record.content});
  }
  std::stable_sort(run.deliveries.begin(), run.deliveries.end(),
                   [](const Delivery& a, const Delivery& b) { return a.at < b.at; });
  return run;
}

// Script events moving the clock from `now` to `at`.
void AdvanceTo(FuzzOutput& out, TimeNs& now, TimeNs at, std::uint8_t op) {
  while (now + kTick <= at) {
    const TimeNs ticks = std::min<TimeNs>((at - now) / kTick, 0xFFFF);
    out.U8(op);
    out.U16(static_cast<std::uint16_t>(ticks));
    now += ticks * kTick;
  }
}

void WriteFrameOp(FuzzOutput& out, std::uint8_t op, PeerId from,
                  const std::vector<std::byte>& frame) {
  ASSERT_LE(frame.size(), 0xFFFFu);
  out.U8(op);
  out.U8(static_cast<std::uint8_t>(from));
  out.U16(static_cast<std::uint16_t>(frame.size()));
  out.Bytes(frame);
}

void WriteServerSeed(std::uint8_t index, const RecordedRun& run) {
  FuzzOutput out;
  out.U8(index);
  out.U8(kDefaultServerFlags);
  TimeNs now = 0;
  for (const Delivery& delivery : run.deliveries) {
    if (delivery.to != protocol::kServerPeer) continue;
    AdvanceTo(out, now, delivery.at, static_cast<std::uint8_t>(ServerOp::kAdvance));
    WriteFrameOp(out, static_cast<std::uint8_t>(ServerOp::kFrame), delivery.from, delivery.bytes);
  }
  WriteSeed("server_session", std::string(RunConfigAt(index).name), out.bytes());
}

void WriteWorkerSeed(std::uint8_t index, const RecordedRun& run) {
  FuzzOutput out;
  out.U8(2);  // device id 1, no heartbeats
  TimeNs now = 0;
  for (const Delivery& delivery : run.deliveries) {
    if (delivery.to != 1) continue;
    AdvanceTo(out, now, delivery.at, static_cast<std::uint8_t>(WorkerOp::kAdvance));
    WriteFrameOp(out, static_cast<std::uint8_t>(WorkerOp::kFrame), delivery.from, delivery.bytes);
  }
  WriteSeed("worker_session", std::string(RunConfigAt(index).name), out.bytes());
}

// The receiver setup that decodes `delivery`'s payload in a run of `config`.
DecoderSetup SetupFor(const protocol::RunConfig& config, const Delivery& delivery) {
  if (delivery.kind == wire::MessageKind::kUpdate) {
    return DecoderSetup::For(config.codec, config.layout,
                             {config.seed, delivery.round, delivery.from});
  }
  const std::uint32_t previous = delivery.round == 0 ? 0 : delivery.round - 1;
  if (delivery.kind == wire::MessageKind::kModelBroadcast &&
      delivery.content == wire::BroadcastContent::kAggregate) {
    return DecoderSetup::For(config.codec, config.layout, {config.seed, previous, 0});
  }
  return DecoderSetup::For(protocol::ModelCodec(), config.layout, {config.seed, previous, 0});
}

void WriteDecoderSeed(const std::string& name, const DecoderSetup& setup,
                      std::span<const std::byte> frame) {
  FuzzOutput out;
  setup.Write(out);
  out.Bytes(frame);
  WriteSeed("frame_decoder", name, out.bytes());
}

void WriteDecoderSeeds(std::uint8_t index, const RecordedRun& run) {
  const NamedRunConfig& named = RunConfigAt(index);
  std::map<std::string, int> written;
  for (const Delivery& delivery : run.deliveries) {
    std::string kind;
    int limit = 1;
    switch (delivery.kind) {
      case wire::MessageKind::kUpdate:
        kind = "update";
        limit = 2;
        break;
      case wire::MessageKind::kModelBroadcast:
        kind = delivery.content == wire::BroadcastContent::kAggregate ? "aggregate" : "model";
        limit = 2;
        break;
      case wire::MessageKind::kJoin:
        kind = "join";
        break;
      case wire::MessageKind::kWelcome:
        kind = "welcome";
        break;
      case wire::MessageKind::kHeartbeat:
        kind = "heartbeat";
        break;
      case wire::MessageKind::kLeave:
        kind = "leave";
        break;
      case wire::MessageKind::kError:
        kind = "error";
        break;
      default:
        continue;
    }
    // Control frames are alike across runs: the first run's are enough.
    const bool control = delivery.kind != wire::MessageKind::kUpdate &&
                         delivery.kind != wire::MessageKind::kModelBroadcast &&
                         delivery.kind != wire::MessageKind::kWelcome;
    if (control && index != 0) continue;
    int& count = written[kind];
    if (count >= limit) continue;
    WriteDecoderSeed(std::string(named.name) + "-" + kind + "-" + std::to_string(count),
                     SetupFor(named.config, delivery), delivery.bytes);
    ++count;
  }
}

// Frames no run of the table sends: the remaining codecs, and a GossipExchange.
void WriteSyntheticDecoderSeeds() {
  const TensorLayout layout =
      TensorLayout::FromSizes(std::array<std::uint64_t, 3>{40, 7, 33}).value();
  const std::vector<float> input = PatternValues(layout.dimension(), 7, 20);
  const std::vector<std::pair<std::string, CodecParams>> codecs = {
      {"fp16", Fp16Params{}},
      {"sign_mean_abs", SignParams{.scale = SignScale::kMeanAbs}},
      {"qsgd_fixed", QsgdParams{.levels = 7, .bucket = 10}},
      {"identity", IdentityParams{}},
      {"rand_k_unbiased", RandKParams{.k_ratio = 0.3f, .scaling = RandKScaling::kUnbiased}},
  };
  FrameMaker maker;
  for (const auto& [name, params] : codecs) {
    const CodecContext context{99, 4, 2};
    const std::span<const std::byte> update = maker.Payload(
        {2, 4, 17}, wire::PayloadMessage::Update({2, 8}), params, layout, context, input);
    ASSERT_FALSE(update.empty()) << name;
    WriteDecoderSeed("synthetic-" + name + "-update", DecoderSetup::For(params, layout, context),
                     update);
  }
  const CodecParams top_k = TopKParams{.k_ratio = 0.1f};
  const CodecContext context{5, 3, 1};
  const std::span<const std::byte> gossip = maker.Payload(
      {1, 3, 9}, wire::PayloadMessage::GossipExchange({1, 2, wire::GossipVector::kTrackerDelta}),
      top_k, layout, context, input);
  ASSERT_FALSE(gossip.empty());
  WriteDecoderSeed("synthetic-gossip-top_k", DecoderSetup::For(top_k, layout, context), gossip);
  // CHOCO's and BEER's copy repair: a dense public copy of the tracker, and its request.
  const CodecParams identity = IdentityParams{};
  const std::span<const std::byte> copy = maker.Payload(
      {1, 12, 10}, wire::PayloadMessage::GossipExchange({0, 1, wire::GossipVector::kModelCopy}),
      identity, layout, context, input);
  ASSERT_FALSE(copy.empty());
  WriteDecoderSeed("synthetic-gossip-copy", DecoderSetup::For(identity, layout, context), copy);
  const TensorLayout one_value = TensorLayout::Single(1).value();
  const std::span<const std::byte> request = maker.Payload(
      {3, 12, 11}, wire::PayloadMessage::GossipExchange({0, 1, wire::GossipVector::kCopyRequest}),
      identity, one_value, context, std::vector<float>{0.0f});
  ASSERT_FALSE(request.empty());
  WriteDecoderSeed("synthetic-gossip-copy-request",
                   DecoderSetup::For(identity, one_value, context), request);
  const std::span<const std::byte> error =
      maker.Error({0, 0, 1}, StatusCode::kFailedPrecondition, "the device lacks the run's codec");
  WriteDecoderSeed("synthetic-error", DecoderSetup::For(top_k, layout, context), error);
  const std::span<const std::byte> heartbeat = maker.Heartbeat({2, 3, 40}, {123456, 123000});
  WriteDecoderSeed("synthetic-heartbeat", DecoderSetup::For(top_k, layout, context), heartbeat);

  // Secure aggregation: a message of every phase, for a device with three neighbours.
  std::array<wire::SecureRosterRecord, 3> roster{};
  std::array<wire::SecureSealedRecord, 3> sealed{};
  std::array<wire::SecureShareRecord, 4> revealed{};
  for (std::uint32_t i = 0; i < 3; ++i) {
    roster[i] = {.device = 5 + i, .share_point = 1 + i, .cipher_public = {}, .mask_public = {}};
    roster[i].cipher_public[i] = std::byte{0x40};
    sealed[i].device = 5 + i;
    sealed[i].sealed[i] = std::byte{0x11};
    revealed[i] = {.owner = 5 + i, .kind = static_cast<std::uint8_t>(i % 2), .y = {}};
    revealed[i].y[i] = 0x7FFFFFF0u;
  }
  const std::vector<std::uint32_t> masked(24, 0xA5A5A5A5u);
  const std::uint32_t survivors[] = {5, 7};
  std::array<wire::SecureSignatureRecord, 2> signatures{};
  for (std::uint32_t i = 0; i < 2; ++i) {
    signatures[i].device = 5 + 2 * i;
    signatures[i].signature[3 * i] = std::byte{0x5A};
    roster[i].keys_signature[i + 1] = std::byte{0x33};
  }
  wire::SecureMessage secure{.fields = {.phase = wire::SecurePhase::kKeys,
                                        .cipher_public = {},
                                        .mask_public = {},
                                        .threshold = 3,
                                        .share_point = 4,
                                        .commitment = {}},
                             .roster = roster,
                             .shares = sealed,
                             .masked = masked,
                             .survivors = survivors,
                             .revealed = revealed,
                             .signatures = signatures};
  const char* const phases[] = {"keys",         "roster",    "shares",    "delivered-shares",
                                "masked-input", "survivors", "unmasking", "consistency",
                                "signatures"};
  for (std::uint8_t p = 0; p < std::size(phases); ++p) {
    secure.fields.phase = static_cast<wire::SecurePhase>(p);
    secure.fields.signature[p] = std::byte{0x21};
    const std::span<const std::byte> frame = maker.Secure({4, 6, 30u + p}, secure, 3, 24);
    ASSERT_FALSE(frame.empty()) << phases[p];
    WriteDecoderSeed(std::string("synthetic-secure-") + phases[p],
                     DecoderSetup::For(top_k, layout, context), frame);
  }

  // Messages at the schema's limits, one step from what the decoder must refuse.
  const std::string longest(wire::kMaxErrorReasonBytes, 'r');
  const std::span<const std::byte> long_error =
      maker.Error({0, 0, 2}, StatusCode::kInvalidArgument, longest);
  ASSERT_FALSE(long_error.empty());
  WriteDecoderSeed("limit-error-longest-reason", DecoderSetup::For(top_k, layout, context),
                   long_error);
  std::vector<std::uint64_t> sizes(kMaxTensors);
  for (std::size_t t = 0; t < sizes.size(); ++t) sizes[t] = 1 + t % 5;
  protocol::RunConfig widest = RunConfigAt(0).config;
  widest.layout = TensorLayout::FromSizes(sizes).value();
  const std::span<const std::byte> welcome =
      maker.Welcome({0, 0, 3}, protocol::ToWelcomeInfo(widest, 1, kWorkers));
  ASSERT_FALSE(welcome.empty());
  WriteDecoderSeed("limit-welcome-most-tensors", DecoderSetup::For(top_k, layout, context),
                   welcome);

  // And one step beyond, which the frame builder cannot produce: the decoder must refuse it, and
  // a decoder that stopped checking the limit trips the target's invariants at the first run.
  alignas(8) std::array<std::uint64_t, 256> storage{};
  wire::internal::FixedAllocator allocator(reinterpret_cast<std::uint8_t*>(storage.data()),
                                           sizeof(storage));
  flatbuffers::FlatBufferBuilder fbb(sizeof(storage), &allocator, false, 8);
  const std::string too_long(wire::kMaxErrorReasonBytes + 1, 'r');
  const auto reason = fbb.CreateString(too_long.data(), too_long.size());
  const auto error_table =
      wire::fb::CreateError(fbb, static_cast<std::uint8_t>(StatusCode::kInvalidArgument), reason);
  const auto envelope = wire::fb::CreateEnvelope(fbb, wire::kSchemaVersion, 0, 0, 4,
                                                 wire::fb::Message::Error, error_table.Union());
  fbb.TrackMinAlign(8);
  wire::fb::FinishSizePrefixedEnvelopeBuffer(fbb, envelope);
  const auto* beyond = reinterpret_cast<const std::byte*>(fbb.GetBufferPointer());
  WriteDecoderSeed("beyond-limit-error-reason", DecoderSetup::For(top_k, layout, context),
                   std::span<const std::byte>(beyond, fbb.GetSize()));
}

void WriteCheckpointSeeds(std::uint8_t index, const RecordedRun& run) {
  const std::string name(RunConfigAt(index).name);
  const char* stages[] = {"start", "middle", "end"};
  for (std::size_t i = 0; i < run.checkpoints.size(); ++i) {
    FuzzOutput out;
    out.U8(index);
    out.U8(i == 1 ? 1 : 0);  // the middle one with the checksum fixed up by the harness
    out.Bytes(run.checkpoints[i]);
    WriteSeed("checkpoint", name + "-" + stages[i], out.bytes());
  }
}

// An auth script: a genuine handshake for device 1, then the run's first frames sealed by the
// side that sent them and delivered, with `twist` adding one replay, tampered record or
// reflection.
void WriteAuthSeed(const RecordedRun& run, const std::string& name, int twist) {
  FuzzOutput out;
  out.U8(1);
  for (int i = 0; i < 32; ++i) out.U8(static_cast<std::uint8_t>(i * 37 + 11));
  out.U8(0);  // no handshake tampering
  int sealed_by_worker = 0;
  int sealed_by_server = 0;
  for (const Delivery& delivery : run.deliveries) {
    if (delivery.from != 1 && delivery.to != 1) continue;
    if (delivery.bytes.size() > kAuthMaxPayload) continue;
    const bool from_worker = delivery.from == 1;  // the worker opens the connection
    out.U8(
        static_cast<std::uint8_t>(from_worker ? AuthOp::kSealInitiator : AuthOp::kSealResponder));
    out.U16(static_cast<std::uint16_t>(delivery.bytes.size()));
    out.Bytes(delivery.bytes);
    int& sealed = from_worker ? sealed_by_worker : sealed_by_server;
    out.U8(static_cast<std::uint8_t>(from_worker ? AuthOp::kDeliverToResponder
                                                 : AuthOp::kDeliverToInitiator));
    out.U8(static_cast<std::uint8_t>(sealed));
    out.U8(0);  // untouched
    ++sealed;
    if (sealed_by_worker + sealed_by_server >= 12) break;
  }
  out.U8(static_cast<std::uint8_t>(AuthOp::kLength));
  out.U8(0);
  switch (twist) {
    case 1:  // replay the first worker record
      out.U8(static_cast<std::uint8_t>(AuthOp::kDeliverToResponder));
      out.U8(0);
      out.U8(0);
      break;
    case 2:  // a new record, delivered with one bit flipped in its payload
      out.U8(static_cast<std::uint8_t>(AuthOp::kSealInitiator));
      out.U16(8);
      for (int i = 0; i < 8; ++i) out.U8(static_cast<std::uint8_t>(i));
      out.U8(static_cast<std::uint8_t>(AuthOp::kDeliverToResponder));
      out.U8(static_cast<std::uint8_t>(sealed_by_worker));
      out.U8(1);
      out.U8(static_cast<std::uint8_t>(AuthTamper::kFlipBit));
      out.U16(auth::kRecordHeaderBytes + 3);
      out.U8(5);
      break;
    case 3:  // a server record reflected to the server
      out.U8(static_cast<std::uint8_t>(AuthOp::kReflect));
      out.U8(0);
      break;
    default:
      break;
  }
  WriteSeed("auth_record", name, out.bytes());
}

TEST(FuzzCorpusGenerator, WritesSeedsFromRealRuns) {
  std::filesystem::create_directories(OutputDir());
  for (std::uint8_t index = 0; index < AllRunConfigs().size(); ++index) {
    const RecordedRun run = Record(index);
    ASSERT_FALSE(run.deliveries.empty());
    WriteServerSeed(index, run);
    WriteWorkerSeed(index, run);
    WriteDecoderSeeds(index, run);
    WriteCheckpointSeeds(index, run);
    if (index == 0) {
      WriteAuthSeed(run, "genuine", 0);
      WriteAuthSeed(run, "replay", 1);
      WriteAuthSeed(run, "tampered", 2);
      WriteAuthSeed(run, "reflected", 3);
    }
    if (index == 3) WriteAuthSeed(run, std::string(RunConfigAt(index).name), 0);
  }
  WriteSyntheticDecoderSeeds();
}

}  // namespace
}  // namespace edgesgd::fuzz
