// RunConfig: every validation rule with its reason, the Welcome encoding both ways (also through
// real frames), and the server options.

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
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

TEST(ProtocolConfigTest, DefaultsAndTestConfigurationsAreValid) {
  RunConfig defaults;
  defaults.layout = TensorLayout::Single(10).value();
  EXPECT_TRUE(ValidateRunConfig(defaults).ok()) << ValidateRunConfig(defaults).reason();
  EXPECT_TRUE(ValidateRunConfig(MeanConfig(10, CodecKind::kQsgd, 3)).ok());
  EXPECT_TRUE(ValidateRunConfig(MajorityConfig(10, 3)).ok());
  EXPECT_STREQ(ValidateRunConfig(defaults).reason(), "ok");
}

TEST(ProtocolConfigTest, EveryRuleHasItsOwnReason) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> mean_cases = {
      {"empty layout", [](RunConfig& c) { c.layout = TensorLayout(); }, "no tensors"},
      {"k ratio",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kTopK;
         c.codec.k_ratio = 0.0f;
       },
       "k ratio"},
      {"k ratio nan",
       [&](RunConfig& c) {
         c.codec.kind = CodecKind::kRandK;
         c.codec.k_ratio = nan;
       },
       "k ratio"},
      {"block ratio",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kRandomBlock;
         c.codec.block_ratio = 0;
       },
       "block ratio"},
      {"qsgd levels",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kQsgd;
         c.codec.qsgd_levels = 0;
       },
       "qsgd levels"},
      {"qsgd bucket",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kQsgd;
         c.codec.qsgd_bucket = 0;
       },
       "qsgd bucket"},
      {"reg_top_k k ratio",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kRegTopK;
         c.codec.k_ratio = 1.5f;
       },
       "k ratio"},
      {"reg_top_k mu",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kRegTopK;
         c.codec.reg_top_k_mu = 0.0f;
       },
       "mu must be positive"},
      {"reg_top_k mu nan",
       [&](RunConfig& c) {
         c.codec.kind = CodecKind::kRegTopK;
         c.codec.reg_top_k_mu = nan;
       },
       "mu must be positive"},
      {"reg_top_k q",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kRegTopK;
         c.codec.reg_top_k_q = -1.0f;
       },
       "Q must be positive"},
      {"reg_top_k aggregate downlink",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kRegTopK;
         c.downlink = DownlinkKind::kAggregate;
       },
       "downlink aggregate needs"},
      {"unknown codec", [](RunConfig& c) { c.codec.kind = static_cast<CodecKind>(9); },
       "unknown codec"},
      {"rounds", [](RunConfig& c) { c.rounds = 0; }, "rounds"},
      {"batch", [](RunConfig& c) { c.batch = 0; }, "batch"},
      {"participation 0", [](RunConfig& c) { c.participation = 0.0f; }, "participation"},
      {"participation > 1", [](RunConfig& c) { c.participation = 1.5f; }, "participation"},
      {"participation nan", [&](RunConfig& c) { c.participation = nan; }, "participation"},
      {"feedback kind", [](RunConfig& c) { c.feedback.kind = static_cast<FeedbackKind>(7); },
       "feedback kind"},
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
      {"aggregate downlink codec",
       [](RunConfig& c) {
         c.codec.kind = CodecKind::kRegTopK;
         c.downlink = DownlinkKind::kAggregate;
       },
       "downlink aggregate needs"},
      {"unknown downlink", [](RunConfig& c) { c.downlink = static_cast<DownlinkKind>(5); },
       "unknown downlink"},
      {"unknown aggregation", [](RunConfig& c) { c.aggregation = static_cast<AggregationKind>(5); },
       "unknown aggregation"},
  };
  for (const Case& test : mean_cases) {
    RunConfig config = MeanConfig(64, CodecKind::kIdentity, 5);
    test.change(config);
    const Status check = ValidateRunConfig(config);
    EXPECT_EQ(check, Status::InvalidArgument()) << test.name;
    EXPECT_NE(std::string(check.reason()).find(test.reason), std::string::npos)
        << test.name << ": " << check.reason();
  }

  const std::vector<Case> majority_cases = {
      {"not sign", [](RunConfig& c) { c.codec.kind = CodecKind::kTopK; }, "needs the sign codec"},
      {"scaled signs", [](RunConfig& c) { c.codec.sign_scale = SignScale::kMeanAbs; },
       "unit scale"},
      {"optimizer", [](RunConfig& c) { c.optimizer.kind = OptimizerKind::kMomentum; }, "Signum"},
      {"lr", [](RunConfig& c) { c.optimizer.learning_rate = -1.0f; }, "Signum learning rate"},
      {"beta", [](RunConfig& c) { c.optimizer.momentum = 1.0f; }, "beta"},
      {"wd", [&](RunConfig& c) { c.optimizer.weight_decay = nan; }, "Signum weight decay"},
      {"local steps", [](RunConfig& c) { c.feedback.local_steps = 2; }, "one gradient per round"},
      {"tie rule", [](RunConfig& c) { c.tie_rule = static_cast<TieRule>(3); }, "tie rule"},
  };
  for (const Case& test : majority_cases) {
    RunConfig config = MajorityConfig(64, 5);
    test.change(config);
    const Status check = ValidateRunConfig(config);
    EXPECT_EQ(check, Status::InvalidArgument()) << test.name;
    EXPECT_NE(std::string(check.reason()).find(test.reason), std::string::npos)
        << test.name << ": " << check.reason();
  }
  const std::vector<Case> schedule_cases = {
      {"dq needs qsgd", [](RunConfig& c) { c.codec.kind = CodecKind::kTopK; }, "needs the qsgd"},
      {"dq needs mean",
       [](RunConfig& c) { c.aggregation = AggregationKind::kMajority; }, "needs mean"},
      {"bits min", [](RunConfig& c) { c.quant_schedule.bits_min = 1; }, "quantization bits"},
      {"bits max", [](RunConfig& c) { c.quant_schedule.bits_max = 17; }, "quantization bits"},
      {"bits order", [](RunConfig& c) { c.quant_schedule.bits_min = 7; }, "quantization bits"},
      {"K", [](RunConfig& c) { c.quant_schedule.dq_k = 0.0f; }, "constant K"},
      {"K nan", [&](RunConfig& c) { c.quant_schedule.dq_k = nan; }, "constant K"},
      {"rho", [](RunConfig& c) { c.quant_schedule.dq_rho = 1.5f; }, "rho"},
      {"rho 0", [](RunConfig& c) { c.quant_schedule.dq_rho = 0.0f; }, "rho"},
      {"levels", [](RunConfig& c) { c.codec.qsgd_levels = 127; }, "those of the maximum bits"},
      {"unknown schedule",
       [](RunConfig& c) { c.quant_schedule.kind = static_cast<QuantScheduleKind>(4); },
       "unknown quantization schedule"},
  };
  for (const Case& test : schedule_cases) {
    RunConfig config = MeanConfig(64, CodecKind::kQsgd, 5);
    config.quant_schedule = {QuantScheduleKind::kDq, 2, 6, 20.0f, 0.99f};
    config.codec.qsgd_levels = 31;  // 6 bits
    ASSERT_TRUE(ValidateRunConfig(config).ok()) << ValidateRunConfig(config).reason();
    test.change(config);
    const Status check = ValidateRunConfig(config);
    EXPECT_EQ(check, Status::InvalidArgument()) << test.name;
    EXPECT_NE(std::string(check.reason()).find(test.reason), std::string::npos)
        << test.name << ": " << check.reason();
  }
  // A fixed schedule reads none of its parameters.
  RunConfig fixed = MeanConfig(64, CodecKind::kTopK, 5);
  fixed.quant_schedule.bits_min = 0;
  fixed.quant_schedule.dq_k = nan;
  EXPECT_TRUE(ValidateRunConfig(fixed).ok());

  // The aggregate downlink is fine for majority vote (the vote itself travels).
  RunConfig majority = MajorityConfig(64, 5);
  majority.downlink = DownlinkKind::kAggregate;
  EXPECT_TRUE(ValidateRunConfig(majority).ok());
}

std::vector<RunConfig> SampleConfigs() {
  std::vector<RunConfig> configs;
  RunConfig mean = MeanConfig(100, CodecKind::kQsgd, 17);
  const std::uint64_t sizes[] = {30, 1, 69};
  mean.layout = TensorLayout::FromSizes(sizes).value();
  mean.codec.qsgd_levels = 15;
  mean.codec.qsgd_bucket = 32;
  mean.feedback.kind = FeedbackKind::kDef;
  mean.feedback.detach = 0.3f;
  mean.feedback.local_steps = 4;
  mean.participation = 0.25f;
  mean.seed = 0xFEEDFACECAFEBEEFull;
  mean.batch = 64;
  configs.push_back(mean);
  RunConfig aggregate = MeanConfig(50, CodecKind::kRandK, 9);
  aggregate.codec.rand_k_scaling = RandKScaling::kUnbiased;
  aggregate.downlink = DownlinkKind::kAggregate;
  configs.push_back(aggregate);
  // RegTop-k's mu and Q reach the workers with the codec.
  RunConfig regularised = MeanConfig(40, CodecKind::kRegTopK, 12);
  regularised.codec.k_ratio = 0.6f;
  regularised.codec.reg_top_k_mu = 2.5f;
  regularised.codec.reg_top_k_q = 5e6f;
  configs.push_back(regularised);
  RunConfig majority = MajorityConfig(70, 1000);
  majority.tie_rule = TieRule::kNegative;
  majority.downlink = DownlinkKind::kAggregate;
  majority.optimizer.weight_decay = 5e-4f;
  configs.push_back(majority);
  RunConfig dq = MeanConfig(40, CodecKind::kQsgd, 600);
  dq.quant_schedule = {QuantScheduleKind::kDq, 3, 7, 12.5f, 0.995f};
  dq.codec.qsgd_levels = 63;
  dq.codec.qsgd_bucket = 8;
  configs.push_back(dq);
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
  EXPECT_EQ(regularised.codec.reg_top_k_mu, 2.5f);
  EXPECT_EQ(regularised.codec.reg_top_k_q, 5e6f);
  // The schedule's fields travel only beside a dynamic schedule.
  const wire::TrainingConfig fixed = ToWelcomeInfo(SampleConfigs()[0], 1, 1).training;
  EXPECT_EQ(fixed.quant_schedule, 0u);
  EXPECT_EQ(fixed.quant_bits_min, 0u);
  EXPECT_EQ(fixed.quant_k, 0.0f);
  const wire::TrainingConfig dq = ToWelcomeInfo(SampleConfigs()[4], 1, 1).training;
  EXPECT_EQ(dq.quant_schedule, static_cast<std::uint8_t>(QuantScheduleKind::kDq));
  EXPECT_EQ(dq.quant_bits_min, 3u);
  EXPECT_EQ(dq.quant_bits_max, 7u);
  EXPECT_EQ(dq.quant_k, 12.5f);
  EXPECT_EQ(dq.quant_rho, 0.995f);
}

TEST(ProtocolConfigTest, FromWelcomeRejectsWhatThisProtocolDoesNotRun) {
  const RunConfig config = SampleConfigs()[0];
  const std::vector<std::pair<std::function<void(wire::WelcomeInfo&)>, const char*>> cases = {
      {[](wire::WelcomeInfo& w) { w.training.mode = 1; }, "not a parameter-server run"},
      {[](wire::WelcomeInfo& w) { w.training.gossip = 1; }, "gossip"},
      {[](wire::WelcomeInfo& w) { w.training.gossip_rounds = 3; }, "gossip"},
      {[](wire::WelcomeInfo& w) { w.training.quant_schedule = 2; }, "unknown quantization"},
      {[](wire::WelcomeInfo& w) { w.training.quant_k = 3.0f; }, "beside a fixed schedule"},
      {[](wire::WelcomeInfo& w) { w.training.quant_bits_max = 8; }, "beside a fixed schedule"},
      // A dynamic schedule with the codec's 15 levels (4 bits) but no bit range.
      {[](wire::WelcomeInfo& w) { w.training.quant_schedule = 1; }, "quantization bits"},
      {[](wire::WelcomeInfo& w) {
         w.training.quant_schedule = 1;
         w.training.quant_bits_min = 2;
         w.training.quant_bits_max = 8;
         w.training.quant_k = 20.0f;
         w.training.quant_rho = 0.99f;
       },
       "those of the maximum bits"},
      {[](wire::WelcomeInfo& w) { w.training.feedback = 9; }, "feedback kind"},
      {[](wire::WelcomeInfo& w) { w.training.optimizer = 3; }, "optimizer kind"},
      {[](wire::WelcomeInfo& w) { w.training.aggregate = 8; }, "aggregation bits"},
      {[](wire::WelcomeInfo& w) { w.training.local_steps = 0; }, "local steps"},
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
  EXPECT_STREQ(ValidateServerOptions(options).reason(), "workers must be in 1..256");
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
}

TEST(ProtocolConfigTest, FrameBoundsCoverTheFramesSent) {
  for (const RunConfig& config : SampleConfigs()) {
    EXPECT_GE(UpdateFrameBytes(config), wire::kMaxControlFrameBytes);
    EXPECT_GE(BroadcastFrameBytes(config), wire::MaxFrameBytes(ModelCodec(), config.layout));
    EXPECT_GT(WorkerSession::ArenaBytes(config), WorkerSession::WelcomeArenaBytes(config));
  }
  RunConfig invalid;
  EXPECT_EQ(WorkerSession::ArenaBytes(invalid), 0u);  // empty layout
  EXPECT_EQ(ServerSession::ArenaBytes(invalid, ServerOptions{}), 0u);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
