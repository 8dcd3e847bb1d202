// Secure aggregation in the parameter-server sessions: whole rounds through the server and
// worker sessions (the four phases, each over frames), whose unmasked sum is what plain rounds
// average; a device vanishing in any phase is recovered, too many abort the round with the model
// unchanged; duplicated, replayed and tampered messages are refused; the configuration rules.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "edgesgd/protocol/secure_round.h"
#include "edgesgd/secagg/ecdsa.h"
#include "edgesgd/wire/frame_decoder.h"
#include "protocol/frame_factory.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

constexpr std::size_t kDim = 24;

// Error feedback lets a sparse codec's unsent coordinates grow for rounds: the bound leaves
// room for them, so that no value is clipped.
RunConfig SecureConfig(CodecId codec, std::uint32_t rounds) {
  RunConfig config = MeanConfig(kDim, codec, rounds);
  config.secure.enabled = true;
  config.secure.bound = 64.0f;
  return config;
}

ServerOptions Workers(std::uint32_t n) {
  ServerOptions options;
  options.workers = n;
  options.quorum = n;
  options.round_deadline_ns = 2 * kSecond;
  options.noise_key = {77};
  return options;
}

// Every worker of a test draws its keys from its id and the round (a stand-in for the
// operating system's entropy).
Status TestEntropy(void* user, std::uint32_t round, std::span<std::byte> out) {
  const auto* problem = static_cast<const QuadraticProblem*>(user);
  std::uint32_t state = round * 2654435761u + static_cast<std::uint32_t>(problem->target.size());
  state ^= static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(user));
  for (std::byte& b : out) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::byte>(state >> 24);
  }
  return Status::Ok();
}

WorkerOptions SecureWorkers() {
  WorkerOptions options;
  options.secure_entropy = &TestEntropy;
  return options;
}

// ECDSA keys of devices 1..8 for signed runs, generated once.
struct TestSigningKeys {
  TestSigningKeys() {
    secagg::SecretRandom random(secagg::Sha256(std::array<std::byte, 1>{std::byte{42}}));
    for (std::uint32_t device = 1; device <= 8; ++device) {
      secagg::SigningKey key;
      ring.push_back({device, {}});
      EXPECT_TRUE(secagg::GenerateSigningKey(random, key, ring.back().key).ok());
      signers.push_back(std::make_unique<secagg::EcdsaSigner>(key));
    }
    verifier = std::make_unique<secagg::EcdsaVerifier>(ring);
  }
  std::vector<secagg::DeviceVerifyingKey> ring;
  std::vector<std::unique_ptr<secagg::EcdsaSigner>> signers;
  std::unique_ptr<secagg::EcdsaVerifier> verifier;
};

const TestSigningKeys& SigningKeys() {
  static const TestSigningKeys keys;
  return keys;
}

RunConfig Signed(RunConfig config) {
  config.secure.signed_rounds = true;
  return config;
}

// Signed runs give the server the verifier and each worker its signer.
std::unique_ptr<Cluster> MakeCluster(const RunConfig& config, std::uint32_t n,
                                     const std::vector<float>& initial) {
  ServerOptions options = Workers(n);
  std::function<void(PeerId, WorkerOptions&)> customize;
  if (config.secure.signed_rounds) {
    options.secure_verifier = SigningKeys().verifier.get();
    customize = [](PeerId peer, WorkerOptions& worker) {
      worker.secure_signing = {SigningKeys().signers.at(peer - 1).get(),
                               SigningKeys().verifier.get()};
    };
  }
  return std::make_unique<Cluster>(config, options, Targets(n, kDim, 5), initial, SecureWorkers(),
                                   customize);
}

// A round's phases (SecureRound::kKeys ..), the consistency check in signed runs only.
std::vector<std::uint8_t> Phases(bool signed_rounds) {
  std::vector<std::uint8_t> phases{SecureRound::kKeys, SecureRound::kShares, SecureRound::kInputs,
                                   SecureRound::kUnmasking};
  if (signed_rounds) phases.insert(phases.begin() + 3, SecureRound::kConsistency);
  return phases;
}

// The phase of a device's SecureAggregation frame (SecureRound's), or nullopt for any other
// frame.
std::optional<std::uint8_t> DevicePhase(std::span<const std::byte> frame) {
  const Frame aligned(frame);
  const Result<wire::FrameView> view = wire::DecodeFrame(aligned.bytes());
  if (!view.ok() || view.value().kind != wire::MessageKind::kSecureAggregation) return {};
  const std::uint8_t phase = SecureRound::PhaseOf(view.value().secure.fields.phase);
  if (phase > SecureRound::kUnmasking) return {};
  return phase;
}

// Drops what the `vanishing` workers send from their message of `phase` on: they vanish there.
class Vanish final : public Interceptor {
 public:
  Vanish(std::vector<PeerId> vanishing, std::uint8_t phase)
      : vanishing_(std::move(vanishing)), phase_(phase) {}
  Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
    if (std::find(vanishing_.begin(), vanishing_.end(), from) == vanishing_.end()) return {};
    const std::optional<std::uint8_t> phase = DevicePhase(frame);
    if (phase.has_value() && *phase >= phase_) gone_ = true;
    Verdict verdict;
    verdict.drop = gone_;
    return verdict;
  }

 private:
  std::vector<PeerId> vanishing_;
  std::uint8_t phase_;
  bool gone_ = false;
};

// The model one round of mean aggregation gives when `members` (peer ids) report on the
// quadratic problem from `initial`: each update is lr * (x - target) (the first heavy-ball step).
std::vector<float> OneRoundOf(Cluster& cluster, const std::vector<PeerId>& members,
                              const std::vector<float>& initial) {
  const float lr = cluster.config().feedback.learning_rate;
  std::vector<float> model = initial;
  for (std::size_t i = 0; i < kDim; ++i) {
    double sum = 0.0;
    for (const PeerId peer : members) {
      sum += static_cast<double>(lr * (initial[i] - cluster.problem(peer).target[i]));
    }
    model[i] = static_cast<float>(static_cast<double>(initial[i]) -
                                  sum / static_cast<double>(members.size()));
  }
  return model;
}

TEST(SecureSessionTest, SecureRoundsMoveTheModelAsPlainRoundsDo) {
  const std::vector<float> initial = PseudoRandom(kDim, 3, 0.5f);
  for (const CodecId codec :
       {kCodecId<IdentityCodec>, kCodecId<RandomBlockCodec>, kCodecId<RandKCodec>}) {
    SCOPED_TRACE(CodecName(QuarterSparse(codec)));
    RunConfig plain_config = MeanConfig(kDim, codec, 6);
    std::unique_ptr<Cluster> secure = MakeCluster(SecureConfig(codec, 6), 4, initial);
    Cluster plain(plain_config, Workers(4), Targets(4, kDim, 5), initial);
    secure->Start();
    plain.Start();
    ASSERT_TRUE(secure->RunUntilFinished(600 * kSecond));
    ASSERT_TRUE(plain.RunUntilFinished(600 * kSecond));
    ASSERT_TRUE(secure->server().status().ok());
    EXPECT_EQ(secure->server().counters().secure_rounds_aborted, 0u);
    EXPECT_EQ(secure->server().counters().updates_accepted, 6u * 4u);
    // Fixed point rounds each value to 2^-24: the models agree far below the updates' size.
    for (std::size_t i = 0; i < kDim; ++i) {
      EXPECT_NEAR(secure->server().model()[i], plain.server().model()[i], 1e-5f) << i;
    }
    // Every round's masked payload is the plain payload's values, one 32-bit word each.
    const std::size_t values = EncodedShape(plain_config.codec, plain_config.layout).value().values;
    for (const RoundEvent& event : secure->DrainRounds()) {
      EXPECT_EQ(event.reported, 4u);
      EXPECT_EQ(event.payload_bits, 4u * 32u * values);
    }
    // Workers keep their error-feedback residuals as in plain runs.
    for (PeerId peer = 1; peer <= 4; ++peer) {
      EXPECT_EQ(secure->worker(peer).counters().secure_errors, 0u);
      EXPECT_EQ(secure->worker(peer).counters().secure_clipped, 0u);
      EXPECT_EQ(secure->worker(peer).counters().updates_sent, 6u);
    }
  }
}

TEST(SecureSessionTest, ASecureMajorityVoteIsThePlainVote) {
  // Two tensors, one of them not a multiple of 32: the padding lanes stay empty.
  const std::uint64_t sizes[] = {45, 20};
  for (const DownlinkKind downlink : {DownlinkKind::kModel, DownlinkKind::kAggregate}) {
    RunConfig plain_config = MajorityConfig(65, 12);
    plain_config.layout = TensorLayout::FromSizes(sizes).value();
    plain_config.downlink = downlink;
    RunConfig secure_config = plain_config;
    secure_config.secure.enabled = true;
    const std::vector<float> initial = PseudoRandom(65, 8, 0.5f);
    Cluster secure(secure_config, Workers(5), Targets(5, 65, 5), initial, SecureWorkers());
    Cluster plain(plain_config, Workers(5), Targets(5, 65, 5), initial);
    secure.Start();
    plain.Start();
    ASSERT_TRUE(secure.RunUntilFinished(600 * kSecond));
    ASSERT_TRUE(plain.RunUntilFinished(600 * kSecond));
    EXPECT_EQ(secure.server().counters().secure_rounds_aborted, 0u);
    // A count is an integer: the secure vote is the plain vote, bit for bit.
    for (std::size_t i = 0; i < 65; ++i) {
      EXPECT_EQ(secure.server().model()[i], plain.server().model()[i]) << i;
    }
    // Five voters: 3-bit lanes, ten to a word, 32 lanes per sign word (three words).
    EXPECT_EQ(SecureInputWords(secure_config, 5), 10u);
    for (const RoundEvent& event : secure.DrainRounds()) EXPECT_EQ(event.payload_bits, 5u * 320u);
  }
}

// qsgd with 7 levels of one shared scale, which the quadratic problem's updates stay within.
RunConfig SharedScaleQsgdConfig(std::uint32_t rounds) {
  RunConfig config = MeanConfig(kDim, kCodecId<QsgdCodec>, rounds);
  config.codec = QsgdParams{.levels = 7, .bucket = 8, .shared_scale = 8.0f};
  return config;
}

TEST(SecureSessionTest, SecureQsgdSumsTheLevelsThePlainRunSends) {
  const std::vector<float> initial = PseudoRandom(kDim, 3, 0.5f);
  const RunConfig plain_config = SharedScaleQsgdConfig(6);
  RunConfig secure_config = plain_config;
  secure_config.secure.enabled = true;
  Cluster secure(secure_config, Workers(4), Targets(4, kDim, 5), initial, SecureWorkers());
  Cluster plain(plain_config, Workers(4), Targets(4, kDim, 5), initial);
  secure.Start();
  plain.Start();
  ASSERT_TRUE(secure.RunUntilFinished(600 * kSecond));
  ASSERT_TRUE(plain.RunUntilFinished(600 * kSecond));
  ASSERT_TRUE(secure.server().status().ok());
  EXPECT_EQ(secure.server().counters().secure_rounds_aborted, 0u);
  EXPECT_EQ(secure.server().counters().updates_accepted, 6u * 4u);
  // The same dither gives the same levels: the sums differ only in float rounding, the
  // plain one adding decoded values, the secure one scaling the integer sum of levels.
  for (std::size_t i = 0; i < kDim; ++i) {
    EXPECT_NEAR(secure.server().model()[i], plain.server().model()[i], 1e-5f) << i;
  }
  // Four devices of levels in 0..14: sums up to 56 in 6-bit lanes, five to a word.
  EXPECT_EQ(SecureLevelLaneBits(7, 4), 6u);
  EXPECT_EQ(SecureInputWords(secure_config, 4), (kDim + 4) / 5);
  for (const RoundEvent& event : secure.DrainRounds()) {
    EXPECT_EQ(event.reported, 4u);
    EXPECT_EQ(event.payload_bits, 4u * 32u * ((kDim + 4) / 5));
  }
  for (PeerId peer = 1; peer <= 4; ++peer) {
    EXPECT_EQ(secure.worker(peer).counters().secure_errors, 0u);
    EXPECT_EQ(secure.worker(peer).counters().encode_errors, 0u);
  }
}

TEST(SecureSessionTest, AWorkerArenaOfArenaBytesHoldsASecureRunAndNoLess) {
  for (const RunConfig& config : {SecureConfig(kCodecId<RandomBlockCodec>, 1),
                                  [] {
                                    RunConfig majority = MajorityConfig(kDim, 1);
                                    majority.secure.enabled = true;
                                    return majority;
                                  }(),
                                  [] {
                                    RunConfig qsgd = SharedScaleQsgdConfig(1);
                                    qsgd.secure.enabled = true;
                                    return qsgd;
                                  }()}) {
    for (const std::size_t less : {std::size_t{0}, std::size_t{1}}) {
      ArenaStorage storage(WorkerSession::ArenaBytes(config, 4) - less);
      QuadraticProblem problem;
      problem.target.assign(kDim, 1.0f);
      WorkerOptions options = SecureWorkers();
      options.device_id = 1;
      options.gradient = &QuadraticGradient;
      options.user = &problem;
      options.codecs = &AllCodecs();
      WorkerSession worker;
      ASSERT_TRUE(worker.Init(storage.arena, options).ok());
      worker.Start(0);
      FrameFactory factory;
      worker.OnFrame(kServerPeer, factory.Welcome(ToWelcomeInfo(config, 1, 4)).bytes(), 0);
      EXPECT_EQ(worker.configured(), less == 0);
      if (less == 0) {
        EXPECT_EQ(storage.arena.remaining_bytes(), 0u);
      }
    }
  }
}

TEST(SecureSessionTest, ValuesBeyondTheBoundAreClippedAndCounted) {
  RunConfig config = SecureConfig(kCodecId<IdentityCodec>, 1);
  config.secure.bound = 0.25f;
  const std::vector<float> initial(kDim, 0.0f);
  std::unique_ptr<Cluster> cluster = MakeCluster(config, 4, initial);
  cluster->Start();
  ASSERT_TRUE(cluster->RunUntilFinished(600 * kSecond));
  std::uint64_t expected_clipped = 0;
  for (PeerId peer = 1; peer <= 4; ++peer) {
    for (const float target : cluster->problem(peer).target) {
      expected_clipped += std::fabs(0.2f * target) > 0.25f ? 1u : 0u;
    }
    EXPECT_GT(cluster->worker(peer).counters().secure_clipped, 0u);
  }
  std::uint64_t clipped = 0;
  for (PeerId peer = 1; peer <= 4; ++peer)
    clipped += cluster->worker(peer).counters().secure_clipped;
  EXPECT_EQ(clipped, expected_clipped);
  // Each update entered the sum within [-0.25, 0.25]: the mean moved no further.
  for (const float value : cluster->server().model()) EXPECT_LE(std::fabs(value), 0.25f + 1e-6f);
}

TEST(SecureSessionTest, SecureTrainingConvergesWithSecAggPlusNeighbourhoods) {
  RunConfig config = SecureConfig(kCodecId<RandomBlockCodec>, 60);
  config.secure.neighbours = 2;  // of 5 others
  const std::vector<float> initial(kDim, 0.0f);
  std::unique_ptr<Cluster> cluster = MakeCluster(config, 6, initial);
  Cluster plain(MeanConfig(kDim, kCodecId<RandomBlockCodec>, 60), Workers(6), Targets(6, kDim, 5),
                initial);
  cluster->Start();
  plain.Start();
  ASSERT_TRUE(cluster->RunUntilFinished(3600 * kSecond));
  ASSERT_TRUE(plain.RunUntilFinished(3600 * kSecond));
  EXPECT_EQ(cluster->server().counters().secure_rounds_aborted, 0u);
  // Error feedback on different targets settles near the optimum, as the plain run does.
  const std::vector<float> optimum = cluster->MeanTarget();
  const float end = Distance(cluster->server().model(), optimum);
  EXPECT_LT(end, 0.25f * Distance(initial, optimum));
  EXPECT_NEAR(end, Distance(plain.server().model(), optimum), 1e-4f);
}

// A one-round identity run of five devices in which `vanishing` vanish from their message of
// `phase` on.
std::unique_ptr<Cluster> RunVanishing(std::vector<PeerId> vanishing, std::uint8_t phase,
                                      const std::vector<float>& initial, bool signed_rounds) {
  const RunConfig config = SecureConfig(kCodecId<IdentityCodec>, 1);
  std::unique_ptr<Cluster> cluster =
      MakeCluster(signed_rounds ? Signed(config) : config, 5, initial);
  Vanish vanish(std::move(vanishing), phase);
  cluster->net().SetInterceptor(&vanish);
  cluster->Start();
  EXPECT_TRUE(cluster->RunUntilFinished(600 * kSecond));
  cluster->net().SetInterceptor(nullptr);
  return cluster;
}

TEST(SecureSessionTest, ADeviceVanishingInAnyPhaseIsRecovered) {
  const std::vector<float> initial = PseudoRandom(kDim, 4, 0.5f);
  // Five devices, threshold 2/3: t = 4 of each neighbourhood of five, so one may vanish.
  for (const bool signed_rounds : {false, true}) {
    for (const std::uint8_t phase : Phases(signed_rounds)) {
      SCOPED_TRACE(::testing::Message() << (signed_rounds ? "signed" : "unsigned") << ", phase "
                                        << static_cast<int>(phase));
      std::unique_ptr<Cluster> cluster = RunVanishing({3}, phase, initial, signed_rounds);
      EXPECT_EQ(cluster->server().counters().secure_rounds_aborted, 0u)
          << cluster->server().secure_abort_reason().reason();
      // Its input counts once it was summed, however the check and the unmasking went.
      const std::vector<PeerId> members = phase > SecureRound::kInputs
                                              ? std::vector<PeerId>{1, 2, 3, 4, 5}
                                              : std::vector<PeerId>{1, 2, 4, 5};
      const std::vector<RoundEvent> rounds = cluster->DrainRounds();
      ASSERT_EQ(rounds.size(), 1u);
      EXPECT_EQ(rounds[0].reported, members.size());
      const std::vector<float> expected = OneRoundOf(*cluster, members, initial);
      for (std::size_t i = 0; i < kDim; ++i) {
        EXPECT_NEAR(cluster->server().model()[i], expected[i], 1e-5f) << i;
      }
    }
  }
}

TEST(SecureSessionTest, TooManyVanishingDevicesAbortTheRoundAndLeaveTheModel) {
  const std::vector<float> initial = PseudoRandom(kDim, 5, 0.5f);
  for (const bool signed_rounds : {false, true}) {
    for (const std::uint8_t phase : Phases(signed_rounds)) {
      SCOPED_TRACE(::testing::Message() << (signed_rounds ? "signed" : "unsigned") << ", phase "
                                        << static_cast<int>(phase));
      std::unique_ptr<Cluster> cluster =
          RunVanishing({2, 4}, phase, initial, signed_rounds);  // below t = 4
      EXPECT_TRUE(cluster->server().status().ok());
      EXPECT_EQ(cluster->server().counters().secure_rounds_aborted, 1u);
      EXPECT_EQ(cluster->server().counters().rounds_completed, 0u);
      EXPECT_FALSE(cluster->server().secure_abort_reason().ok());
      for (std::size_t i = 0; i < kDim; ++i) EXPECT_EQ(cluster->server().model()[i], initial[i]);
      const std::vector<RoundEvent> rounds = cluster->DrainRounds();
      ASSERT_EQ(rounds.size(), 1u);
      EXPECT_EQ(rounds[0].reported, 0u);
    }
  }
}

// The device phase a server frame asks for (the keys answer the model broadcast, the shares the
// roster, the masked input the delivered shares, the check or the unmasking the survivors, the
// unmasking the signatures), or nullopt for any other frame.
std::optional<std::uint8_t> SolicitedPhase(std::span<const std::byte> frame, bool signed_rounds) {
  const Frame aligned(frame);
  const Result<wire::FrameView> view = wire::DecodeFrame(aligned.bytes());
  if (!view.ok()) return {};
  if (view.value().kind == wire::MessageKind::kModelBroadcast) return SecureRound::kKeys;
  if (view.value().kind != wire::MessageKind::kSecureAggregation) return {};
  switch (view.value().secure.fields.phase) {
    case wire::SecurePhase::kRoster:
      return SecureRound::kShares;
    case wire::SecurePhase::kDeliveredShares:
      return SecureRound::kInputs;
    case wire::SecurePhase::kSurvivors:
      return signed_rounds ? SecureRound::kConsistency : SecureRound::kUnmasking;
    case wire::SecurePhase::kSignatures:
      return SecureRound::kUnmasking;
    default:
      return {};
  }
}

// Loses the first frame of `phase` between worker `peer` and the server, in one direction.
class LoseOnce final : public Interceptor {
 public:
  LoseOnce(PeerId peer, std::uint8_t phase, bool to_server, bool signed_rounds)
      : peer_(peer), phase_(phase), to_server_(to_server), signed_(signed_rounds) {}
  Verdict OnSend(PeerId from, PeerId to, std::span<const std::byte> frame, TimeNs) override {
    Verdict verdict;
    if (lost_ || (to_server_ ? from : to) != peer_) return verdict;
    const std::optional<std::uint8_t> phase =
        to_server_ ? DevicePhase(frame) : SolicitedPhase(frame, signed_);
    verdict.drop = lost_ = phase == phase_;
    return verdict;
  }
  bool lost() const { return lost_; }

 private:
  PeerId peer_;
  std::uint8_t phase_;
  bool to_server_;
  bool signed_;
  bool lost_ = false;
};

TEST(SecureSessionTest, AFrameLostInAnyPhaseIsSentAgainAndTheDeviceStays) {
  const std::vector<float> initial = PseudoRandom(kDim, 6, 0.5f);
  for (const auto& [to_server, signed_rounds] :
       {std::pair{true, false}, {false, false}, {true, true}, {false, true}}) {
    for (const std::uint8_t phase : Phases(signed_rounds)) {
      SCOPED_TRACE(::testing::Message()
                   << (to_server ? "to the server" : "to the device")
                   << (signed_rounds ? ", signed" : "") << ", phase " << static_cast<int>(phase));
      const RunConfig config = SecureConfig(kCodecId<IdentityCodec>, 1);
      std::unique_ptr<Cluster> cluster =
          MakeCluster(signed_rounds ? Signed(config) : config, 5, initial);
      LoseOnce lose(3, phase, to_server, signed_rounds);
      cluster->net().SetInterceptor(&lose);
      cluster->Start();
      ASSERT_TRUE(cluster->RunUntilFinished(600 * kSecond));
      cluster->net().SetInterceptor(nullptr);
      EXPECT_TRUE(lose.lost());
      EXPECT_EQ(cluster->server().counters().secure_rounds_aborted, 0u);
      EXPECT_EQ(cluster->server().counters().secure_messages_resent, 1u);
      // Device 3 stayed in the round: every update is in the sum.
      const std::vector<RoundEvent> rounds = cluster->DrainRounds();
      ASSERT_EQ(rounds.size(), 1u);
      EXPECT_EQ(rounds[0].reported, 5u);
      const std::vector<float> expected = OneRoundOf(*cluster, {1, 2, 3, 4, 5}, initial);
      for (std::size_t i = 0; i < kDim; ++i) {
        EXPECT_NEAR(cluster->server().model()[i], expected[i], 1e-5f) << i;
      }
    }
  }
}

// Notes when worker `peer` sends its message of `phase`.
class WatchPhase final : public Interceptor {
 public:
  WatchPhase(PeerId peer, std::uint8_t phase) : peer_(peer), phase_(phase) {}
  Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
    if (from == peer_ && DevicePhase(frame) == phase_) seen_ = true;
    return {};
  }
  bool seen() const { return seen_; }

 private:
  PeerId peer_;
  std::uint8_t phase_;
  bool seen_ = false;
};

// A device that restarts after sending its shares rejoins, is sent the model again and answers
// with fresh keys: it is left out of the round, which completes with the others.
TEST(SecureSessionTest, ADeviceThatRestartsMidRoundIsLeftOutAndTheRoundCompletes) {
  const std::vector<float> initial = PseudoRandom(kDim, 8, 0.5f);
  for (const bool signed_rounds : {false, true}) {
    SCOPED_TRACE(signed_rounds ? "signed" : "unsigned");
    const RunConfig config = SecureConfig(kCodecId<IdentityCodec>, 1);
    std::unique_ptr<Cluster> cluster =
        MakeCluster(signed_rounds ? Signed(config) : config, 5, initial);
    cluster->net().SetLatencyAll(10 * kMs);  // one step at a time
    WatchPhase watch(3, SecureRound::kShares);
    cluster->net().SetInterceptor(&watch);
    cluster->Start();
    while (!watch.seen() && cluster->net().Step(600 * kSecond)) {
    }
    ASSERT_TRUE(watch.seen());
    cluster->net().SetInterceptor(nullptr);
    // The restarted device's operating system gives it new entropy, hence new keys.
    cluster->RestartWorker(3, [](WorkerOptions& options) {
      options.secure_entropy = [](void* user, std::uint32_t round, std::span<std::byte> out) {
        const Status drawn = TestEntropy(user, round, out);
        for (std::byte& b : out) b ^= std::byte{0x5C};
        return drawn;
      };
    });
    ASSERT_TRUE(cluster->RunUntilFinished(600 * kSecond));
    EXPECT_EQ(cluster->server().counters().secure_restarts_left, 1u);
    EXPECT_EQ(cluster->server().counters().secure_rounds_aborted, 0u)
        << cluster->server().secure_abort_reason().reason();
    const std::vector<RoundEvent> rounds = cluster->DrainRounds();
    ASSERT_EQ(rounds.size(), 1u);
    EXPECT_EQ(rounds[0].reported, 4u);
    const std::vector<float> expected = OneRoundOf(*cluster, {1, 2, 4, 5}, initial);
    for (std::size_t i = 0; i < kDim; ++i) {
      EXPECT_NEAR(cluster->server().model()[i], expected[i], 1e-5f) << i;
    }
  }
}

// Copies every frame of the run (duplicates), and keeps worker 1's round-0 keys to replay them.
class DuplicateAndRecord final : public Interceptor {
 public:
  Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
    if (from == 1 && keys.empty() && DevicePhase(frame) == SecureRound::kKeys) {
      keys.assign(frame.begin(), frame.end());
    }
    Verdict verdict;
    verdict.copies = 2;
    return verdict;
  }
  std::vector<std::byte> keys;
};

TEST(SecureSessionTest, DuplicatedAndReplayedMessagesChangeNothing) {
  const std::vector<float> initial = PseudoRandom(kDim, 6, 0.5f);
  std::unique_ptr<Cluster> cluster =
      MakeCluster(SecureConfig(kCodecId<IdentityCodec>, 2), 4, initial);
  Cluster plain(MeanConfig(kDim, kCodecId<IdentityCodec>, 2), Workers(4), Targets(4, kDim, 5),
                initial);
  DuplicateAndRecord record;
  cluster->net().SetInterceptor(&record);
  cluster->net().SetLatencyAll(10 * kMs);  // so that round 1 is still open when the replay lands
  cluster->Start();
  plain.Start();
  ASSERT_TRUE(cluster->RunUntilRound(1, 600 * kSecond));
  ASSERT_FALSE(record.keys.empty());
  // Round 0's keys presented again in round 1: refused as late.
  const std::uint64_t late = cluster->server().counters().rejected_for(RejectReason::kLate);
  cluster->net().SetInterceptor(nullptr);
  cluster->net().Inject(1, kServerPeer, record.keys);
  ASSERT_TRUE(cluster->RunUntilFinished(600 * kSecond));
  ASSERT_TRUE(plain.RunUntilFinished(600 * kSecond));
  EXPECT_GT(cluster->server().counters().rejected_for(RejectReason::kLate), late);
  EXPECT_GT(cluster->server().counters().rejected_for(RejectReason::kDuplicate), 0u);
  EXPECT_EQ(cluster->server().counters().secure_rounds_aborted, 0u);
  for (std::size_t i = 0; i < kDim; ++i) {
    EXPECT_NEAR(cluster->server().model()[i], plain.server().model()[i], 1e-5f) << i;
  }
}

// Flips one bit of the first sealed pair of worker 2's shares in round 0.
class TamperShares final : public Interceptor {
 public:
  Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
    if (from != 2 || done_ || DevicePhase(frame) != SecureRound::kShares) return {};
    done_ = true;
    const Frame aligned(frame);
    const std::span<const std::byte> bytes = aligned.bytes();
    const wire::FrameView view = wire::DecodeFrame(bytes).value();
    const wire::SecureSealedRecord first = view.secure.shares[0];
    const auto at =
        std::search(bytes.begin(), bytes.end(), first.sealed.begin(), first.sealed.end());
    tampered.assign(frame.begin(), frame.end());
    tampered[static_cast<std::size_t>(at - bytes.begin()) + 7] ^= std::byte{0x20};
    Verdict verdict;
    verdict.drop = true;  // the tampered copy goes instead
    return verdict;
  }
  std::vector<std::byte> tampered;

 private:
  bool done_ = false;
};

TEST(SecureSessionTest, ATamperedShareIsDroppedByItsReceiverWhichStaysInTheRound) {
  const std::vector<float> initial = PseudoRandom(kDim, 7, 0.5f);
  std::unique_ptr<Cluster> cluster =
      MakeCluster(SecureConfig(kCodecId<IdentityCodec>, 1), 5, initial);
  TamperShares tamper;
  cluster->net().SetInterceptor(&tamper);
  cluster->Start();
  ASSERT_TRUE(cluster->net().RunUntil([&] { return !tamper.tampered.empty(); }, 60 * kSecond));
  cluster->net().Inject(2, kServerPeer, tamper.tampered);
  ASSERT_TRUE(cluster->RunUntilFinished(600 * kSecond));
  // The receiver of the tampered pair drops it and masks on; every device finishes the round.
  std::uint64_t refused = 0;
  std::uint64_t unopened = 0;
  for (PeerId peer = 1; peer <= 5; ++peer) {
    refused += cluster->worker(peer).counters().secure_errors;
    unopened += cluster->worker(peer).counters().secure_shares_unopened;
  }
  EXPECT_EQ(refused, 0u);
  EXPECT_EQ(unopened, 1u);
  EXPECT_EQ(cluster->server().counters().secure_rounds_aborted, 0u);
  const std::vector<RoundEvent> rounds = cluster->DrainRounds();
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].reported, 5u);
}

TEST(SecureSessionTest, AWorkerWithoutEntropyIsRefusedAndDoesNotAdvertiseIt) {
  const RunConfig config = SecureConfig(kCodecId<RandomBlockCodec>, 3);
  wire::JoinInfo join;
  EXPECT_EQ(CheckWorkerCanRun(config, join, 4), Status::FailedPrecondition());
  join.features = wire::kFeatureSecureAggregation;
  EXPECT_TRUE(CheckWorkerCanRun(config, join, 4).ok());
  // A worker without an entropy source refuses the run its Welcome describes.
  Cluster cluster(config, Workers(2), Targets(2, kDim, 5), std::vector<float>(kDim, 0.0f),
                  SecureWorkers(), [](PeerId peer, WorkerOptions& options) {
                    if (peer == 2) options.secure_entropy = nullptr;
                  });
  cluster.Start();
  cluster.net().RunUntil(
      [&] { return cluster.server().counters().rejected_for(RejectReason::kIncompatible) > 0; },
      30 * kSecond);
  EXPECT_GT(cluster.server().counters().rejected_for(RejectReason::kIncompatible), 0u);
  EXPECT_EQ(cluster.server().phase(), ServerPhase::kJoining);
}

TEST(SecureSessionTest, TheConfigurationRulesNameTheirReason) {
  EXPECT_TRUE(ValidateRunConfig(SecureConfig(kCodecId<IdentityCodec>, 3)).ok());
  EXPECT_TRUE(ValidateRunConfig(SecureConfig(kCodecId<RandKCodec>, 3)).ok());
  const auto refused = [](RunConfig config) {
    return !ValidateRunConfig(config).ok() || !ValidateServerChoices(config).ok();
  };
  EXPECT_TRUE(refused(SecureConfig(kCodecId<TopKCodec>, 3)));
  EXPECT_TRUE(refused(SecureConfig(kCodecId<SignCodec>, 3)));
  // qsgd's levels sum only with one scale and one level count on every device.
  EXPECT_TRUE(refused(SecureConfig(kCodecId<QsgdCodec>, 3)));
  RunConfig qsgd = SharedScaleQsgdConfig(3);
  qsgd.secure.enabled = true;
  EXPECT_TRUE(ValidateRunConfig(qsgd).ok());
  std::get<QsgdParams>(qsgd.codec).schedule = QuantScheduleKind::kDq;
  EXPECT_TRUE(refused(qsgd));
  // 2 x 32767 levels x 65,539 workers passes 2^32 - 1.
  qsgd = SharedScaleQsgdConfig(3);
  qsgd.secure.enabled = true;
  std::get<QsgdParams>(qsgd.codec).levels = kMaxQsgdLevels;
  EXPECT_TRUE(CheckSecureCohort(qsgd, 65538).ok());
  EXPECT_EQ(CheckSecureCohort(qsgd, 65539).code(), StatusCode::kOutOfRange);
  RunConfig config = SecureConfig(kCodecId<RandomBlockCodec>, 3);
  config.downlink = DownlinkKind::kAggregate;
  EXPECT_TRUE(refused(config));
  config = SecureConfig(kCodecId<RandomBlockCodec>, 3);
  config.secure.threshold = 0.5f;
  EXPECT_TRUE(refused(config));
  config.secure.threshold = 1.0f;
  EXPECT_FALSE(refused(config));
  config.secure.neighbours = 3;
  EXPECT_TRUE(refused(config));
  config = SecureConfig(kCodecId<RandomBlockCodec>, 3);
  config.robust.rule = RobustRule::kMedian;
  EXPECT_TRUE(refused(config));
  config = SecureConfig(kCodecId<RandomBlockCodec>, 3);
  config.async.buffer = 2;
  EXPECT_TRUE(refused(config));
  // The Welcome carries the parameters, unchanged.
  config = SecureConfig(kCodecId<RandomBlockCodec>, 3);
  config.secure.neighbours = 6;
  config.secure.bound = 0.75f;
  RunConfig received;
  ASSERT_TRUE(FromWelcomeInfo(ToWelcomeInfo(config, 1, 8), received).ok());
  EXPECT_EQ(received, NormalizedRunConfig(config));
  // A bound the worker count cannot sum in 32 bits with 8 fraction bits is refused.
  config.secure.bound = 1e7f;
  EXPECT_FALSE(FromWelcomeInfo(ToWelcomeInfo(config, 1, 8), received).ok());
  ArenaStorage storage(1 << 20);
  ServerSession server;
  EXPECT_EQ(
      server.Init(storage.arena, AllCodecs(), config, Workers(8), std::vector<float>(kDim, 0.0f)),
      Status::OutOfRange());
}

TEST(SecureSessionTest, TheThresholdIsAMajorityOfEachNeighbourhood) {
  SecureAggregationParams params;
  params.enabled = true;
  EXPECT_EQ(SecureThreshold(params, 5), 4u);  // ceil(2/3 * 5)
  EXPECT_EQ(SecureThreshold(params, 8), 6u);  // ceil(2/3 * 8)
  EXPECT_EQ(SecureThreshold(params, 9), 6u);  // 2/3 of 9 exactly, despite float rounding
  EXPECT_EQ(SecureThreshold(params, 2), 2u);  // a majority of two is both
  params.threshold = 0.51f;
  EXPECT_EQ(SecureThreshold(params, 10), 6u);  // more than half of ten
  params.neighbours = 4;
  params.threshold = 1.0f;
  EXPECT_EQ(SecureThreshold(params, 100), 5u);  // all of a neighbourhood of five
}

}  // namespace
}  // namespace edgesgd::protocol::testing
