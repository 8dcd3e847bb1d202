// RunConfig: every validation rule with its reason, the Welcome encoding both ways (also through
// real frames), and the server options.

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <functional>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

struct Case {
  const char* name;
  std::function<void(RunConfig&)> change;
  const char* reason;  // a substring of the expected reason
};

// Each case, applied to `base`, is refused with its own reason.
void ExpectRefused(const RunConfig& base, const std::vector<Case>& cases) {
  for (const Case& test : cases) {
    RunConfig config = base;
    test.change(config);
    const Status check = ValidateRunConfig(config);
    EXPECT_EQ(check, Status::InvalidArgument()) << test.name;
    EXPECT_NE(std::string(check.reason()).find(test.reason), std::string::npos)
        << test.name << ": " << check.reason();
  }
}

TEST(ProtocolConfigTest, DefaultsAndTestConfigurationsAreValid) {
  RunConfig defaults;
  defaults.layout = TensorLayout::Single(10).value();
  EXPECT_TRUE(ValidateRunConfig(defaults).ok()) << ValidateRunConfig(defaults).reason();
  EXPECT_TRUE(ValidateRunConfig(MeanConfig(10, kCodecId<QsgdCodec>, 3)).ok());
  EXPECT_TRUE(ValidateRunConfig(MajorityConfig(10, 3)).ok());
  EXPECT_STREQ(ValidateRunConfig(defaults).reason(), "ok");
}

TEST(ProtocolConfigTest, WorkBoundsAreInclusive) {
  RunConfig config = MeanConfig(10, kCodecId<TopKCodec>, 3);
  config.feedback.local_steps = kMaxLocalSteps;
  config.batch = static_cast<std::uint32_t>(kMaxSamplesPerRound / kMaxLocalSteps);
  EXPECT_TRUE(ValidateRunConfig(config).ok()) << ValidateRunConfig(config).reason();
  config.feedback.local_steps = static_cast<std::uint32_t>(kMaxSamplesPerRound / kMaxBatch);
  config.batch = kMaxBatch;
  EXPECT_TRUE(ValidateRunConfig(config).ok()) << ValidateRunConfig(config).reason();
  wire::WelcomeInfo welcome = ToWelcomeInfo(config, 1, kMaxWorkers);
  RunConfig out;
  EXPECT_TRUE(FromWelcomeInfo(welcome, out).ok());
}

TEST(ProtocolConfigTest, EveryRuleHasItsOwnReason) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> mean_cases = {
      {"empty layout", [](RunConfig& c) { c.layout = TensorLayout(); }, "no tensors"},
      {"k ratio", [](RunConfig& c) { c.codec = TopKParams{.k_ratio = 0.0f}; }, "k ratio"},
      {"k ratio nan", [&](RunConfig& c) { c.codec = RandKParams{.k_ratio = nan}; }, "k ratio"},
      {"unknown rand_k scaling",
       [](RunConfig& c) { c.codec = RandKParams{.scaling = static_cast<RandKScaling>(9)}; },
       "unknown rand_k scaling"},
      {"block ratio", [](RunConfig& c) { c.codec = RandomBlockParams{.block_ratio = 0}; },
       "block ratio"},
      {"unknown sign scale",
       [](RunConfig& c) { c.codec = SignParams{.scale = static_cast<SignScale>(9)}; },
       "unknown sign scale"},
      {"qsgd levels", [](RunConfig& c) { c.codec = QsgdParams{.levels = 0}; }, "qsgd levels"},
      {"qsgd bucket", [](RunConfig& c) { c.codec = QsgdParams{.bucket = 0}; }, "qsgd bucket"},
      {"reg_top_k k ratio", [](RunConfig& c) { c.codec = RegTopKParams{.k_ratio = 1.5f}; },
       "k ratio"},
      {"reg_top_k mu", [](RunConfig& c) { c.codec = RegTopKParams{.mu = 0.0f}; },
       "mu must be positive"},
      {"reg_top_k mu nan", [&](RunConfig& c) { c.codec = RegTopKParams{.mu = nan}; },
       "mu must be positive"},
      {"reg_top_k q", [](RunConfig& c) { c.codec = RegTopKParams{.q = -1.0f}; },
       "Q must be positive"},
      {"reg_top_k aggregate downlink",
       [](RunConfig& c) {
         c.codec = RegTopKParams{};
         c.downlink = DownlinkKind::kAggregate;
       },
       "downlink aggregate needs"},
      {"rounds", [](RunConfig& c) { c.rounds = 0; }, "rounds"},
      {"batch", [](RunConfig& c) { c.batch = 0; }, "batch"},
      {"batch above its bound", [](RunConfig& c) { c.batch = kMaxBatch + 1; }, "batch size"},
      {"participation 0", [](RunConfig& c) { c.participation = 0.0f; }, "participation"},
      {"participation > 1", [](RunConfig& c) { c.participation = 1.5f; }, "participation"},
      {"participation nan", [&](RunConfig& c) { c.participation = nan; }, "participation"},
      {"feedback kind", [](RunConfig& c) { c.feedback.kind = static_cast<FeedbackKind>(7); },
       "unknown error feedback"},
      {"detach",
       [](RunConfig& c) {
         c.feedback.kind = FeedbackKind::kDef;
         c.feedback.detach = 2.0f;
       },
       "detach"},
      {"learning rate", [](RunConfig& c) { c.feedback.learning_rate = 0.0f; }, "learning rate"},
      {"momentum", [](RunConfig& c) { c.feedback.momentum = 1.0f; }, "momentum"},
      {"weight decay", [](RunConfig& c) { c.feedback.weight_decay = -1.0f; }, "weight decay"},
      {"local steps", [](RunConfig& c) { c.feedback.local_steps = 0; }, "local steps H"},
      {"proximal mu", [&](RunConfig& c) { c.feedback.prox_mu = nan; }, "proximal coefficient"},
      {"local steps above the bound",
       [](RunConfig& c) { c.feedback.local_steps = kMaxLocalSteps + 1; }, "local steps H"},
      {"samples per round",
       [](RunConfig& c) {
         c.feedback.local_steps = kMaxLocalSteps;
         c.batch = static_cast<std::uint32_t>(kMaxSamplesPerRound / kMaxLocalSteps) + 1;
       },
       "times the batch"},
      {"unknown downlink", [](RunConfig& c) { c.downlink = static_cast<DownlinkKind>(5); },
       "unknown downlink"},
      {"unknown aggregation", [](RunConfig& c) { c.aggregation = static_cast<AggregationKind>(5); },
       "unknown aggregation"},
  };
  ExpectRefused(MeanConfig(64, kCodecId<IdentityCodec>, 5), mean_cases);

  const std::vector<Case> majority_cases = {
      {"not sign", [](RunConfig& c) { c.codec = TopKParams{}; }, "needs the sign codec"},
      {"scaled signs", [](RunConfig& c) { c.codec = SignParams{.scale = SignScale::kMeanAbs}; },
       "unit scale"},
      {"optimizer", [](RunConfig& c) { c.optimizer.kind = OptimizerKind::kMomentum; }, "Signum"},
      {"lr", [](RunConfig& c) { c.optimizer.learning_rate = -1.0f; }, "learning rate"},
      {"beta", [](RunConfig& c) { c.optimizer.momentum = 1.0f; }, "momentum"},
      {"wd", [&](RunConfig& c) { c.optimizer.weight_decay = nan; }, "weight decay"},
      {"local steps", [](RunConfig& c) { c.feedback.local_steps = 2; }, "one gradient per round"},
      {"proximal term", [](RunConfig& c) { c.feedback.prox_mu = 0.1f; }, "no proximal term"},
      {"tie rule", [](RunConfig& c) { c.tie_rule = static_cast<TieRule>(3); }, "tie rule"},
  };
  ExpectRefused(MajorityConfig(64, 5), majority_cases);
  // qsgd's dq quantization schedule: its parameters are the codec's.
  const auto with_dq = [](const std::function<void(QsgdParams&)>& change) {
    return [change](RunConfig& c) {
      QsgdParams dq = std::get<QsgdParams>(c.codec);
      change(dq);
      c.codec = dq;
    };
  };
  const std::vector<Case> schedule_cases = {
      {"dq votes", [](RunConfig& c) { c.aggregation = AggregationKind::kMajority; },
       "needs the sign codec"},
      {"bits min", with_dq([](QsgdParams& q) { q.bits_min = 1; }), "quantization bits"},
      {"bits max", with_dq([](QsgdParams& q) { q.bits_max = 17; }), "quantization bits"},
      {"bits order", with_dq([](QsgdParams& q) { q.bits_min = 7; }), "quantization bits"},
      {"K", with_dq([](QsgdParams& q) { q.dq_k = 0.0f; }), "constant K"},
      {"K nan", with_dq([&](QsgdParams& q) { q.dq_k = nan; }), "constant K"},
      {"rho", with_dq([](QsgdParams& q) { q.dq_rho = 1.5f; }), "rho"},
      {"rho 0", with_dq([](QsgdParams& q) { q.dq_rho = 0.0f; }), "rho"},
      {"unknown schedule",
       with_dq([](QsgdParams& q) { q.schedule = static_cast<QuantScheduleKind>(4); }),
       "unknown quantization schedule"},
  };
  RunConfig dq_config = MeanConfig(64, kCodecId<QsgdCodec>, 5);
  dq_config.codec = QsgdParams{.schedule = QuantScheduleKind::kDq, .bits_min = 2, .bits_max = 6};
  ASSERT_TRUE(ValidateRunConfig(dq_config).ok()) << ValidateRunConfig(dq_config).reason();
  ExpectRefused(dq_config, schedule_cases);
  // SCAFFOLD: several local steps of a mean with the model downlink, a codec without a selector,
  // no privacy (ValidateRunConfig); no robust rule and no asynchronous aggregation (the server's
  // own checks).
  RunConfig scaffold = MeanConfig(64, kCodecId<TopKCodec>, 5);
  scaffold.feedback.local_steps = 3;
  scaffold.scaffold = true;
  ASSERT_TRUE(ValidateRunConfig(scaffold).ok()) << ValidateRunConfig(scaffold).reason();
  ASSERT_TRUE(ValidateServerChoices(scaffold).ok());
  const std::vector<Case> scaffold_cases = {
      {"vote",
       [](RunConfig& c) {
         c = MajorityConfig(64, 5);
         c.scaffold = true;
       },
       "majority vote takes one gradient"},
      {"aggregate downlink", [](RunConfig& c) { c.downlink = DownlinkKind::kAggregate; },
       "use --downlink model"},
      {"one local step", [](RunConfig& c) { c.feedback.local_steps = 1; }, "2 or more"},
      {"reg_top_k", [](RunConfig& c) { c.codec = RegTopKParams{}; }, "reg_top_k"},
      {"privacy", [](RunConfig& c) { c.privacy = PrivacyParams{.mode = PrivacyMode::kCentral}; },
       "leave it unclipped"},
  };
  ExpectRefused(scaffold, scaffold_cases);
  RunConfig robust_scaffold = scaffold;
  robust_scaffold.robust.rule = RobustRule::kMedian;
  EXPECT_NE(std::string(ValidateServerChoices(robust_scaffold).reason()).find("robust rule"),
            std::string::npos);
  RunConfig async_scaffold = scaffold;
  async_scaffold.async.buffer = 2;
  EXPECT_NE(std::string(ValidateServerChoices(async_scaffold).reason()).find("asynchronous"),
            std::string::npos);

  // The dq schedule sizes frames for bits_max whatever `levels` says, which it does not read.
  with_dq([](QsgdParams& q) { q.levels = 3; })(dq_config);
  EXPECT_TRUE(ValidateRunConfig(dq_config).ok());
  // A fixed schedule reads none of the dq parameters.
  RunConfig fixed = MeanConfig(64, kCodecId<QsgdCodec>, 5);
  fixed.codec = QsgdParams{.bits_min = 0, .dq_k = nan};
  EXPECT_TRUE(ValidateRunConfig(fixed).ok());

  // The aggregate downlink is fine for majority vote (the vote itself travels).
  RunConfig majority = MajorityConfig(64, 5);
  majority.downlink = DownlinkKind::kAggregate;
  EXPECT_TRUE(ValidateRunConfig(majority).ok());
}

std::vector<RunConfig> SampleConfigs() {
  std::vector<RunConfig> configs;
  RunConfig mean = MeanConfig(100, kCodecId<QsgdCodec>, 17);
  const std::uint64_t sizes[] = {30, 1, 69};
  mean.layout = TensorLayout::FromSizes(sizes).value();
  mean.codec = QsgdParams{.levels = 15, .bucket = 32};
  mean.feedback.kind = FeedbackKind::kDef;
  mean.feedback.detach = 0.3f;
  mean.feedback.local_steps = 4;
  mean.feedback.prox_mu = 0.25f;  // FedProx's mu reaches the workers
  mean.participation = 0.25f;
  mean.seed = 0xFEEDFACECAFEBEEFull;
  mean.batch = 64;
  configs.push_back(mean);
  RunConfig aggregate = MeanConfig(50, kCodecId<RandKCodec>, 9);
  aggregate.codec = RandKParams{.k_ratio = 0.25f, .scaling = RandKScaling::kUnbiased};
  aggregate.downlink = DownlinkKind::kAggregate;
  configs.push_back(aggregate);
  // RegTop-k's mu and Q reach the workers with the codec.
  RunConfig regularised = MeanConfig(40, kCodecId<RegTopKCodec>, 12);
  regularised.codec = RegTopKParams{.k_ratio = 0.6f, .mu = 2.5f, .q = 5e6f};
  configs.push_back(regularised);
  RunConfig majority = MajorityConfig(70, 1000);
  majority.tie_rule = TieRule::kNegative;
  majority.downlink = DownlinkKind::kAggregate;
  majority.optimizer.weight_decay = 5e-4f;
  configs.push_back(majority);
  RunConfig dq = MeanConfig(40, kCodecId<QsgdCodec>, 600);
  dq.codec = QsgdParams{.levels = 63,
                        .bucket = 8,
                        .schedule = QuantScheduleKind::kDq,
                        .bits_min = 3,
                        .bits_max = 7,
                        .dq_k = 12.5f,
                        .dq_rho = 0.995f};
  configs.push_back(dq);
  RunConfig scaffold = MeanConfig(30, kCodecId<RandomBlockCodec>, 8);
  scaffold.feedback.local_steps = 5;
  scaffold.scaffold = true;
  configs.push_back(scaffold);
  return configs;
}

TEST(ProtocolConfigTest, WelcomeRoundTrip) {
  std::vector<std::uint64_t> buffer(4096);
  for (const RunConfig& config : SampleConfigs()) {
    ASSERT_TRUE(ValidateRunConfig(config).ok());
    const wire::WelcomeInfo welcome = ToWelcomeInfo(config, 5, 8);
    EXPECT_EQ(welcome.assigned_id, 5u);
    EXPECT_EQ(welcome.workers, 8u);
    RunConfig decoded;
    ASSERT_TRUE(FromWelcomeInfo(welcome, decoded).ok());
    EXPECT_EQ(decoded, NormalizedRunConfig(config));

    // Through a real frame.
    wire::FrameBuilder builder(std::as_writable_bytes(std::span(buffer)));
    const Result<std::span<const std::byte>> frame = builder.EncodeWelcome({0, 0, 1}, welcome);
    ASSERT_TRUE(frame.ok());
    const Result<wire::FrameView> view = wire::DecodeFrame(frame.value());
    ASSERT_TRUE(view.ok());
    RunConfig from_frame;
    ASSERT_TRUE(FromWelcomeInfo(view.value().welcome, from_frame).ok());
    EXPECT_EQ(from_frame, NormalizedRunConfig(config));
  }
  // The aggregate byte's bits.
  const wire::WelcomeInfo majority = ToWelcomeInfo(SampleConfigs()[3], 1, 1);
  EXPECT_EQ(majority.training.aggregate,
            kAggregateMajorityBit | kAggregateDownlinkBit | kAggregateTieNegativeBit);
  EXPECT_EQ(majority.training.learning_rate, SampleConfigs()[3].optimizer.learning_rate);
  const wire::WelcomeInfo regularised = ToWelcomeInfo(SampleConfigs()[2], 1, 1);
  EXPECT_EQ(std::get<RegTopKParams>(regularised.codec).mu, 2.5f);
  EXPECT_EQ(std::get<RegTopKParams>(regularised.codec).q, 5e6f);
  EXPECT_FALSE(majority.training.scaffold);
  EXPECT_TRUE(ToWelcomeInfo(SampleConfigs()[5], 1, 1).training.scaffold);
  // The quantization schedule travels with the codec: qsgd's parameter words.
  const wire::WelcomeInfo dq = ToWelcomeInfo(SampleConfigs()[4], 1, 1);
  std::array<std::uint32_t, kMaxCodecParamWords> words{};
  ASSERT_EQ(ParamWords(dq.codec, words), 8u);
  EXPECT_EQ(std::vector<std::uint32_t>(words.begin(), words.begin() + 8),
            (std::vector<std::uint32_t>{63, 8, static_cast<std::uint32_t>(QuantScheduleKind::kDq),
                                        3, 7, std::bit_cast<std::uint32_t>(12.5f),
                                        std::bit_cast<std::uint32_t>(0.995f), 0}));
}

// The robust rule is the server's: the Welcome leaves it out, and only the server checks it.
TEST(ProtocolConfigTest, RobustRuleStaysWithTheServer) {
  RunConfig config = MeanConfig(16, kCodecId<TopKCodec>, 5);
  config.robust = RobustParams{.rule = RobustRule::kMultiKrum, .byzantine = 2};
  ASSERT_TRUE(ValidateRunConfig(config).ok());
  ASSERT_TRUE(ValidateServerChoices(config).ok());
  RunConfig decoded;
  ASSERT_TRUE(FromWelcomeInfo(ToWelcomeInfo(config, 1, 4), decoded).ok());
  EXPECT_EQ(decoded.robust, RobustParams{});
  EXPECT_EQ(decoded, NormalizedRunConfig(config));

  const auto reason = [](const RunConfig& c) {
    return std::string(ValidateServerChoices(c).reason());
  };
  RunConfig clipped = config;
  clipped.robust = RobustParams{.rule = RobustRule::kCenteredClipping, .clip_radius = -1.0f};
  EXPECT_NE(reason(clipped).find("radius"), std::string::npos);
  RunConfig aggregate = config;
  aggregate.downlink = DownlinkKind::kAggregate;
  EXPECT_NE(reason(aggregate).find("model downlink"), std::string::npos);
  RunConfig vote = MajorityConfig(16, 5);
  vote.robust = config.robust;
  EXPECT_NE(reason(vote).find("majority vote"), std::string::npos);
  RunConfig private_run = config;
  private_run.privacy = PrivacyParams{.mode = PrivacyMode::kCentral};
  EXPECT_NE(reason(private_run).find("differential privacy"), std::string::npos);
}

TEST(ProtocolConfigTest, FromWelcomeRejectsWhatThisProtocolDoesNotRun) {
  const RunConfig config = SampleConfigs()[0];
  const std::vector<std::pair<std::function<void(wire::WelcomeInfo&)>, const char*>> cases = {
      {[](wire::WelcomeInfo& w) { w.training.mode = 1; }, "not a parameter-server run"},
      {[](wire::WelcomeInfo& w) { w.training.gossip = 1; }, "gossip"},
      {[](wire::WelcomeInfo& w) { w.training.gossip_rounds = 3; }, "gossip"},
      {[](wire::WelcomeInfo& w) {
         w.codec = QsgdParams{.schedule = static_cast<QuantScheduleKind>(2)};
       },
       "unknown quantization"},
      // A dynamic schedule without a bit range.
      {[](wire::WelcomeInfo& w) {
         w.codec = QsgdParams{.schedule = QuantScheduleKind::kDq, .bits_min = 0, .bits_max = 0};
       },
       "quantization bits"},
      {[](wire::WelcomeInfo& w) { w.training.feedback = 9; }, "feedback kind"},
      {[](wire::WelcomeInfo& w) { w.training.optimizer = 3; }, "optimizer kind"},
      {[](wire::WelcomeInfo& w) { w.training.aggregate = 8; }, "aggregation bits"},
      {[](wire::WelcomeInfo& w) { w.training.local_steps = 0; }, "local steps"},
      {[](wire::WelcomeInfo& w) { w.training.local_steps = 134217729; }, "local steps"},
      {[](wire::WelcomeInfo& w) { w.training.local_steps = 0xFFFFFFFFu; }, "local steps"},
      {[](wire::WelcomeInfo& w) { w.training.batch = 0xFFFFFFFFu; }, "batch"},
      {[](wire::WelcomeInfo& w) { w.workers = 0; }, "worker count"},
      {[](wire::WelcomeInfo& w) { w.workers = kMaxWorkers + 1; }, "worker count"},
      {[](wire::WelcomeInfo& w) { w.rounds = 0; }, "rounds"},
  };
  for (const auto& [change, reason] : cases) {
    wire::WelcomeInfo welcome = ToWelcomeInfo(config, 1, 2);
    change(welcome);
    RunConfig out = MajorityConfig(3, 3);
    const RunConfig before = out;
    const Status check = FromWelcomeInfo(welcome, out);
    EXPECT_EQ(check, Status::InvalidArgument()) << reason;
    EXPECT_NE(std::string(check.reason()).find(reason), std::string::npos) << check.reason();
    EXPECT_EQ(out, before);
  }
}

TEST(ProtocolConfigTest, ServerOptionsRules) {
  ServerOptions options;
  EXPECT_TRUE(ValidateServerOptions(options).ok());
  options.workers = 0;
  EXPECT_STREQ(ValidateServerOptions(options).reason(), "workers must be in 1..16384");
  options.workers = kMaxWorkers + 1;
  EXPECT_FALSE(ValidateServerOptions(options).ok());
  options.workers = kMaxWorkers;
  options.quorum = 0;
  EXPECT_STREQ(ValidateServerOptions(options).reason(), "quorum must be in 1..workers");
  options.quorum = 3;
  options.round_deadline_ns = 0;
  EXPECT_FALSE(ValidateServerOptions(options).ok());
  options.round_deadline_ns = kNever;
  options.liveness_timeout_ns = 0;
  EXPECT_FALSE(ValidateServerOptions(options).ok());
  options.liveness_timeout_ns = kNever;
  EXPECT_TRUE(ValidateServerOptions(options).ok());
  options.max_model_norm = -1.0f;
  EXPECT_STREQ(ValidateServerOptions(options).reason(),
               "max model norm must be finite and >= 0 (0: no bound)");
  options.max_model_norm = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(ValidateServerOptions(options).ok());
  options.max_model_norm = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(ValidateServerOptions(options).ok());
  options.max_model_norm = 0.0f;
  EXPECT_TRUE(ValidateServerOptions(options).ok());
}

TEST(ProtocolConfigTest, FrameBoundsCoverTheFramesSent) {
  for (const RunConfig& config : SampleConfigs()) {
    EXPECT_GE(UpdateFrameBytes(config), wire::kMaxControlFrameBytes);
    EXPECT_GE(BroadcastFrameBytes(config), wire::MaxFrameBytes(ModelCodec(), config.layout));
    EXPECT_GT(WorkerSession::ArenaBytes(config), WorkerSession::WelcomeArenaBytes(config));
  }
  // SCAFFOLD's frames carry a second payload: the control change in the codec, c dense.
  RunConfig scaffold = SampleConfigs()[5];
  const PayloadShape shape = EncodedShape(scaffold.codec, scaffold.layout).value();
  const PayloadShape dense = EncodedShape(ModelCodec(), scaffold.layout).value();
  EXPECT_EQ(UpdateFrameBytes(scaffold), wire::MaxFrameBytes(scaffold.codec, scaffold.layout) +
                                            wire::ControlPayloadBytes(shape));
  EXPECT_EQ(ModelFrameBytes(scaffold),
            wire::MaxFrameBytes(ModelCodec(), scaffold.layout) + wire::ControlPayloadBytes(dense));
  scaffold.scaffold = false;
  EXPECT_EQ(UpdateFrameBytes(scaffold), wire::MaxFrameBytes(scaffold.codec, scaffold.layout));
  RunConfig invalid;
  EXPECT_EQ(WorkerSession::ArenaBytes(invalid), 0u);  // empty layout
  EXPECT_EQ(ServerSession::ArenaBytes(invalid, ServerOptions{}), 0u);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
