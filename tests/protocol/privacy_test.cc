// Differential privacy in the sessions: which runs can be private (and why not), the Welcome
// carrying it, workers clipping every update they send, noise of the right size added by the
// server (central) or as shares by the devices (distributed), and the keys that must keep the
// noise secret.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "edgesgd/core/codecs/qsgd.h"
#include "edgesgd/core/codecs/rand_k.h"
#include "edgesgd/core/codecs/random_block.h"
#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/core/codecs/top_k.h"
#include "protocol/frame_factory.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

constexpr std::size_t kDim = 400;
constexpr std::uint32_t kWorkers = 4;

RunConfig Private(CodecId codec, PrivacyMode mode, float clip, float noise) {
  RunConfig config = MeanConfig(kDim, codec, 6);
  config.privacy = PrivacyParams{.mode = mode, .clip = clip, .noise_multiplier = noise};
  return config;
}

ServerOptions Options() {
  ServerOptions options;
  options.workers = kWorkers;
  options.quorum = kWorkers;
  options.noise_key = {0xA11CE};
  return options;
}

void GiveNoiseKey(PeerId id, WorkerOptions& options) {
  options.add_noise = &AddNoiseShare;
  options.noise_key = {0xB0B0 + id};
}

double Norm(std::span<const float> values) {
  double squares = 0.0;
  for (const float value : values)
    squares += static_cast<double>(value) * static_cast<double>(value);
  return std::sqrt(squares);
}

double Stddev(std::span<const float> values) {
  double sum = 0.0;
  double squares = 0.0;
  for (const float value : values) {
    sum += static_cast<double>(value);
    squares += static_cast<double>(value) * static_cast<double>(value);
  }
  const double n = static_cast<double>(values.size());
  return std::sqrt(squares / n - (sum / n) * (sum / n));
}

// Decodes every Update a worker sends into a dense vector.
struct UpdateRecorder : Interceptor {
  explicit UpdateRecorder(const RunConfig& run) : config(run) {}
  Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
    if (from == kServerPeer) return {};
    const Result<wire::FrameView> view = wire::DecodeFrame(frame);
    if (!view.ok() || view.value().kind != wire::MessageKind::kUpdate) return {};
    std::vector<float> dense(kDim, 0.0f);
    std::vector<std::byte> scratch(CodecScratchBytes(config.codec, config.layout));
    const CodecContext context{config.seed, view.value().header.round, from};
    EXPECT_TRUE(AllCodecs()
                    .DecodeAdd(config.codec, config.layout, context, view.value().payload.view,
                               1.0f, dense, scratch)
                    .ok());
    updates.push_back(std::move(dense));
    payload_values.push_back(std::vector<float>(view.value().payload.view.values.begin(),
                                                view.value().payload.view.values.end()));
    return {};
  }
  RunConfig config;
  std::vector<std::vector<float>> updates;
  std::vector<std::vector<float>> payload_values;
};

TEST(PrivacyTest, RunsThatCannotBePrivateSayWhy) {
  struct Case {
    const char* name;
    RunConfig config;
    const char* reason;  // empty: valid
  };
  RunConfig majority = MajorityConfig(kDim, 6);
  majority.privacy = PrivacyParams{.mode = PrivacyMode::kCentral};
  RunConfig unbiased = Private(kCodecId<RandKCodec>, PrivacyMode::kCentral, 1.0f, 1.0f);
  unbiased.codec = RandKParams{.k_ratio = 0.1f, .scaling = RandKScaling::kUnbiased};
  RunConfig recompressed = Private(kCodecId<TopKCodec>, PrivacyMode::kCentral, 1.0f, 1.0f);
  recompressed.downlink = DownlinkKind::kAggregate;
  RunConfig block_aggregate =
      Private(kCodecId<RandomBlockCodec>, PrivacyMode::kDistributed, 1.0f, 1.0f);
  block_aggregate.downlink = DownlinkKind::kAggregate;
  RunConfig sign_scaled = Private(kCodecId<SignCodec>, PrivacyMode::kCentral, 1.0f, 1.0f);
  sign_scaled.codec = SignParams{.scale = SignScale::kMeanAbs};
  RunConfig bad_clip = Private(kCodecId<TopKCodec>, PrivacyMode::kCentral, 0.0f, 1.0f);
  const std::vector<Case> cases = {
      {"majority vote", majority, "majority vote is not one"},
      {"qsgd", Private(kCodecId<QsgdCodec>, PrivacyMode::kCentral, 1.0f, 1.0f), "never lengthens"},
      {"unbiased rand_k", unbiased, "never lengthens"},
      {"re-compressed aggregate", recompressed, "central noise needs"},
      {"distributed top_k", Private(kCodecId<TopKCodec>, PrivacyMode::kDistributed, 1.0f, 1.0f),
       "same coordinates"},
      {"bad clip", bad_clip, "clipping bound"},
      {"central top_k", Private(kCodecId<TopKCodec>, PrivacyMode::kCentral, 1.0f, 1.0f), ""},
      {"distributed random_block, aggregate downlink", block_aggregate, ""},
      {"distributed identity",
       Private(kCodecId<IdentityCodec>, PrivacyMode::kDistributed, 1.0f, 1.0f), ""},
      {"central sign (mean_abs)", sign_scaled, ""},
      {"clipping only", Private(kCodecId<TopKCodec>, PrivacyMode::kCentral, 1.0f, 0.0f), ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Status status = ValidateRunConfig(c.config);
    if (std::strlen(c.reason) == 0) {
      EXPECT_TRUE(status.ok()) << status.reason();
    } else {
      EXPECT_EQ(status, Status::InvalidArgument());
      EXPECT_NE(std::string(status.reason()).find(c.reason), std::string::npos) << status.reason();
    }
  }
}

TEST(PrivacyTest, TheWelcomeCarriesPrivacyAndOnlyCapableDevicesGetIt) {
  const RunConfig config = Private(kCodecId<TopKCodec>, PrivacyMode::kCentral, 0.25f, 1.5f);
  RunConfig decoded;
  ASSERT_TRUE(FromWelcomeInfo(ToWelcomeInfo(config, 2, kWorkers), decoded).ok());
  EXPECT_EQ(decoded.privacy, config.privacy);
  // Off: nothing of it on the wire, and its parameters normalised away.
  RunConfig off = config;
  off.privacy.mode = PrivacyMode::kOff;
  EXPECT_EQ(ToWelcomeInfo(off, 2, kWorkers).privacy, wire::PrivacyConfig{});
  ASSERT_TRUE(FromWelcomeInfo(ToWelcomeInfo(off, 2, kWorkers), decoded).ok());
  EXPECT_EQ(decoded, NormalizedRunConfig(off));
  EXPECT_EQ(decoded.privacy, PrivacyParams{});

  wire::JoinInfo join;
  join.features = 0;  // an older device that would ignore the privacy fields
  EXPECT_EQ(CheckWorkerCanRun(config, join), Status::FailedPrecondition());
  EXPECT_TRUE(CheckWorkerCanRun(off, join).ok());
  join.features = wire::kFeatureDifferentialPrivacy;
  EXPECT_TRUE(CheckWorkerCanRun(config, join).ok());
  // Distributed noise also needs a device that can draw it.
  RunConfig distributed = Private(kCodecId<IdentityCodec>, PrivacyMode::kDistributed, 0.25f, 1.5f);
  EXPECT_EQ(CheckWorkerCanRun(distributed, join), Status::FailedPrecondition());
  join.features |= wire::kFeatureDistributedNoise;
  EXPECT_TRUE(CheckWorkerCanRun(distributed, join).ok());
}

TEST(PrivacyTest, EveryUpdateSentIsClippedAndTheNoiseKeepsTheRunDeterministic) {
  constexpr float kClip = 0.05f;
  for (const CodecId codec :
       {kCodecId<TopKCodec>, kCodecId<IdentityCodec>, kCodecId<RandomBlockCodec>}) {
    SCOPED_TRACE(static_cast<int>(codec));
    const auto run = [&](float noise) {
      const RunConfig config = Private(codec, PrivacyMode::kCentral, kClip, noise);
      Cluster cluster(config, Options(), Targets(kWorkers, kDim), PseudoRandom(kDim, 9, 1.0f), {},
                      GiveNoiseKey);
      UpdateRecorder recorder(config);
      cluster.net().SetInterceptor(&recorder);
      cluster.Start();
      EXPECT_TRUE(cluster.RunUntilFinished(60 * kSecond));
      EXPECT_TRUE(cluster.server().status().ok());
      EXPECT_EQ(recorder.updates.size(), kWorkers * config.rounds);
      for (const std::vector<float>& update : recorder.updates) {
        EXPECT_LE(Norm(update), static_cast<double>(kClip) * (1.0 + 1e-5));
      }
      return std::vector<float>(cluster.server().model().begin(), cluster.server().model().end());
    };
    const std::vector<float> clipped = run(0.0f);
    const std::vector<float> noisy = run(1.0f);
    EXPECT_NE(clipped, noisy);
    EXPECT_EQ(noisy, run(1.0f));  // same keys, same noise
  }
}

// With every target at the initial model, gradients are zero: what moves the model is the noise
// alone, which must have the standard deviation z * C / n on the mean in both modes.
TEST(PrivacyTest, CentralAndDistributedNoiseHaveTheSameSizeOnTheMean) {
  constexpr float kClip = 0.5f;
  constexpr float kNoise = 2.0f;
  const std::vector<float> initial = PseudoRandom(kDim, 9, 1.0f);
  const std::vector<std::vector<float>> targets(kWorkers, initial);
  for (const PrivacyMode mode : {PrivacyMode::kCentral, PrivacyMode::kDistributed}) {
    SCOPED_TRACE(static_cast<int>(mode));
    RunConfig config = Private(kCodecId<IdentityCodec>, mode, kClip, kNoise);
    config.rounds = 1;
    config.feedback.momentum = 0.0f;
    Cluster cluster(config, Options(), targets, initial, {}, GiveNoiseKey);
    UpdateRecorder recorder(config);
    cluster.net().SetInterceptor(&recorder);
    cluster.Start();
    ASSERT_TRUE(cluster.RunUntilFinished(60 * kSecond));
    std::vector<float> change(kDim);
    for (std::size_t j = 0; j < kDim; ++j) change[j] = cluster.server().model()[j] - initial[j];
    const double expected = static_cast<double>(kNoise * kClip) / kWorkers;
    EXPECT_NEAR(Stddev(change), expected, 0.1 * expected);
    ASSERT_EQ(recorder.payload_values.size(), kWorkers);
    for (const std::vector<float>& values : recorder.payload_values) {
      if (mode == PrivacyMode::kCentral) {
        EXPECT_EQ(Norm(values), 0.0);  // the server's noise never passes through a device
      } else {
        const double share = static_cast<double>(kNoise * kClip) / std::sqrt(kWorkers);
        EXPECT_NEAR(Stddev(values), share, 0.1 * share);
      }
    }
  }
}

// Adaptive clipping: every worker's update has a known norm (its distance to its target times
// the learning rate, momentum off, one local step), the bound starts far below all of them, and
// with a target quantile of 0.5 it must climb to between the second and third of the four norms,
// announced in every broadcast and obeyed by every update.
TEST(PrivacyTest, AdaptiveClippingFindsTheTargetQuantileOfTheUpdateNorms) {
  RunConfig config = Private(kCodecId<IdentityCodec>, PrivacyMode::kCentral, 0.01f, 0.0f);
  config.rounds = 200;
  config.feedback.kind = FeedbackKind::kNone;
  config.feedback.momentum = 0.0f;
  config.feedback.learning_rate = 1e-3f;  // the model barely moves: the norms stay put
  config.privacy.target_quantile = 0.5f;
  config.privacy.clip_learning_rate = 0.2f;
  config.privacy.count_noise = 0.0f;  // z = 0: no noise, so the count is exact
  ASSERT_TRUE(ValidateRunConfig(config).ok());
  const std::vector<float> initial(kDim, 0.0f);
  std::vector<std::vector<float>> targets;
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    // Update norms lr * |target| = 1e-3 * sqrt(kDim) * (1, 2, 3, 4).
    targets.emplace_back(kDim, static_cast<float>(w + 1));
  }
  Cluster cluster(config, Options(), targets, initial, {}, GiveNoiseKey);
  struct BoundRecorder : Interceptor {
    Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
      const Result<wire::FrameView> view = wire::DecodeFrame(frame);
      if (!view.ok()) return {};
      if (from == kServerPeer && view.value().kind == wire::MessageKind::kModelBroadcast) {
        bounds.push_back(view.value().message.broadcast.clip_bound);
      } else if (view.value().kind == wire::MessageKind::kUpdate) {
        indicators.push_back(view.value().message.update.clip_indicator);
      }
      return {};
    }
    std::vector<float> bounds;
    std::vector<float> indicators;
  } recorder;
  cluster.net().SetInterceptor(&recorder);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(600 * kSecond));
  ASSERT_TRUE(cluster.server().status().ok());
  ASSERT_FALSE(recorder.bounds.empty());
  EXPECT_FLOAT_EQ(recorder.bounds.front(), 0.01f);
  for (const float indicator : recorder.indicators) {
    EXPECT_TRUE(indicator == 0.0f || indicator == 1.0f);
  }
  const double unit = 1e-3 * std::sqrt(static_cast<double>(kDim));
  const auto last = static_cast<double>(recorder.bounds.back());
  EXPECT_GT(last, 1.5 * unit);
  EXPECT_LT(last, 3.5 * unit);
}

TEST(PrivacyTest, AWorkerRefusesABroadcastWithoutAUsableBound) {
  RunConfig config = Private(kCodecId<IdentityCodec>, PrivacyMode::kCentral, 0.5f, 1.0f);
  config.privacy.target_quantile = 0.5f;
  config.privacy.count_noise = 1.0f;
  config.rounds = 100;
  Cluster cluster(config, Options(), Targets(kWorkers, kDim), PseudoRandom(kDim, 9, 1.0f), {},
                  GiveNoiseKey);
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilRound(2, 10 * kSecond));
  ASSERT_LT(cluster.server().round(), 4u);
  // A broadcast of a later round whose bound is zero (a forged or damaged frame): the worker
  // counts a bad payload and computes nothing.
  std::vector<std::uint64_t> buffer(BroadcastFrameBytes(config) / 8 + 1024);
  wire::FrameBuilder builder(std::as_writable_bytes(std::span(buffer)));
  const std::vector<float> model(kDim, 0.0f);
  const Result<std::span<const std::byte>> frame = builder.EncodePayloadFrame(
      {kServerPeer, 4, 1u << 30}, wire::PayloadMessage::ModelBroadcast({}), AllCodecs(),
      ModelCodec(), config.layout, {}, model, {});
  ASSERT_TRUE(frame.ok());
  const std::uint64_t calls = cluster.problem(1).calls;
  const std::uint64_t bad = cluster.worker(1).counters().bad_payloads;
  cluster.net().DeliverNow(kServerPeer, 1, frame.value());
  const WorkerCounters& counters = cluster.worker(1).counters();
  EXPECT_EQ(counters.bad_payloads, bad + 1);
  EXPECT_EQ(cluster.problem(1).calls, calls);
}

// A device that skips clipping under central noise: the server refuses its update, whose norm
// the noise would not hide, and the round goes on with the others (and the device's next
// answer, clipped).
TEST(PrivacyTest, CentralNoiseRefusesAnUpdateLongerThanTheBound) {
  constexpr float kClip = 0.05f;
  RunConfig config = Private(kCodecId<IdentityCodec>, PrivacyMode::kCentral, kClip, 1.0f);
  config.rounds = 2;
  Cluster cluster(config, Options(), Targets(kWorkers, kDim), PseudoRandom(kDim, 9, 1.0f), {},
                  GiveNoiseKey);
  // Worker 1's first update is held back; an unclipped one of norm 20 C goes in its place.
  struct HoldFirstUpdate : Interceptor {
    Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
      if (from != 1 || held) return {};
      const Result<wire::FrameView> view = wire::DecodeFrame(frame);
      if (!view.ok() || view.value().kind != wire::MessageKind::kUpdate) return {};
      held = true;
      Verdict verdict;
      verdict.drop = true;
      return verdict;
    }
    bool held = false;
  } hold;
  cluster.net().SetInterceptor(&hold);
  cluster.Start();
  ASSERT_TRUE(cluster.net().RunUntil([&] { return hold.held; }, 60 * kSecond));
  const std::vector<float> unclipped(kDim, 20 * kClip / std::sqrt(static_cast<float>(kDim)));
  FrameFactory factory;
  const Frame forged =
      factory.Update(1, 1, 0, config.codec, config.layout, unclipped, config.seed, 1000);
  const std::uint64_t refused = cluster.server().counters().rejected_for(RejectReason::kBadPayload);
  cluster.net().Inject(1, kServerPeer, forged.bytes());
  ASSERT_TRUE(cluster.RunUntilFinished(600 * kSecond));
  EXPECT_EQ(cluster.server().counters().rejected_for(RejectReason::kBadPayload), refused + 1);
  EXPECT_EQ(cluster.server().counters().rounds_completed, 2u);
  EXPECT_EQ(cluster.server().UpdatesAcceptedFrom(1), 2u);  // its clipped answers
}

TEST(PrivacyTest, NoiseNeedsASecretKey) {
  const RunConfig central = Private(kCodecId<TopKCodec>, PrivacyMode::kCentral, 1.0f, 1.0f);
  ServerOptions keyless = Options();
  keyless.noise_key = {};
  ArenaStorage server_storage(ServerSession::ArenaBytes(central, keyless));
  ServerSession server;
  const std::vector<float> model(kDim, 0.0f);
  EXPECT_EQ(server.Init(server_storage.arena, AllCodecs(), central, keyless, model),
            Status::InvalidArgument());

  // A worker without a key leaves a distributed run at once, before computing anything.
  const RunConfig distributed =
      Private(kCodecId<IdentityCodec>, PrivacyMode::kDistributed, 1.0f, 1.0f);
  Cluster cluster(distributed, Options(), Targets(kWorkers, kDim), model, {},
                  [](PeerId id, WorkerOptions& options) {
                    if (id != 1) GiveNoiseKey(id, options);
                  });
  cluster.Start();
  cluster.RunUntilRound(1, 10 * kSecond);
  EXPECT_TRUE(cluster.worker(1).Finished());
  EXPECT_EQ(cluster.worker(1).status(), Status::FailedPrecondition());
  EXPECT_EQ(cluster.problem(1).calls, 0u);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
