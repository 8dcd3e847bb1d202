// The aggregation components behind the server (aggregation_registry.h): which one a
// configuration selects, the exact memory each declares, the state each keeps across rounds,
// and the majority vote's refusal of anything but plain signs.

#include "edgesgd/protocol/aggregation.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "edgesgd/core/codecs/sign.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

// The component FindAggregation picks for `config`, created with `workers` in an arena of
// exactly the bytes the component declares.
class ComponentBox {
 public:
  ComponentBox(const RunConfig& config, std::uint32_t workers)
      : config_(config),
        descriptor_(FindAggregation(config_)),
        bytes_(descriptor_ == nullptr ? 0 : descriptor_->arena_bytes(config_, workers)),
        storage_(bytes_) {
    if (descriptor_ == nullptr) return;
    const Result<Aggregation*> created =
        descriptor_->create(storage_.arena, AggregationSetup{&AllCodecs(), &config_, workers});
    status_ = created.status();
    if (created.ok()) component_ = created.value();
  }
  ComponentBox(const ComponentBox&) = delete;
  ComponentBox& operator=(const ComponentBox&) = delete;

  const AggregationDescriptor* descriptor() const { return descriptor_; }
  std::size_t declared_bytes() const { return bytes_; }
  std::size_t used_bytes() const { return storage_.arena.used_bytes(); }
  Status status() const { return status_; }
  Aggregation& component() { return *component_; }

 private:
  RunConfig config_;  // components keep a pointer to it
  const AggregationDescriptor* descriptor_;
  std::size_t bytes_;
  ArenaStorage storage_;
  Status status_ = Status::FailedPrecondition("no component serves the configuration");
  Aggregation* component_ = nullptr;
};

// Mean runs of every codec with both downlinks, majority votes with both downlinks, robust
// rules and SCAFFOLD.
std::vector<RunConfig> ConfigurationVariety(std::size_t dimension) {
  std::vector<RunConfig> configs;
  for (CodecId id = 0; id < kCodecCount; ++id) {
    for (const DownlinkKind downlink : {DownlinkKind::kModel, DownlinkKind::kAggregate}) {
      RunConfig config = MeanConfig(dimension, id, 5);
      config.downlink = downlink;
      configs.push_back(config);
    }
  }
  for (const DownlinkKind downlink : {DownlinkKind::kModel, DownlinkKind::kAggregate}) {
    RunConfig config = MajorityConfig(dimension, 5);
    config.downlink = downlink;
    configs.push_back(config);
  }
  for (const RobustRule rule : {RobustRule::kMedian, RobustRule::kTrimmedMean,
                                RobustRule::kMultiKrum, RobustRule::kCenteredClipping}) {
    RunConfig config = MeanConfig(dimension, kCodecId<QsgdCodec>, 5);
    config.robust.rule = rule;
    configs.push_back(config);
  }
  // SCAFFOLD over every codec but reg_top_k (whose selector it refuses), model downlink.
  for (CodecId id = 0; id < kCodecCount; ++id) {
    if (id == kCodecId<RegTopKCodec>) continue;
    RunConfig config = MeanConfig(dimension, id, 5);
    config.feedback.local_steps = 2;
    config.scaffold = true;
    configs.push_back(config);
  }
  return configs;
}

std::string Describe(const RunConfig& config) {
  return std::string(config.aggregation == AggregationKind::kMajority ? "majority " : "mean ") +
         std::string(CodecName(config.codec)) + " robust " +
         std::string(RobustRuleName(config.robust.rule)) +
         (config.downlink == DownlinkKind::kAggregate ? " aggregate downlink" : " model downlink") +
         (config.scaffold ? " scaffold" : "");
}

TEST(AggregationTest, EachConfigurationSelectsItsComponent) {
  for (const RunConfig& config : ConfigurationVariety(40)) {
    SCOPED_TRACE(Describe(config));
    const CodecParams& codec = config.codec;
    std::string_view expected;
    if (config.scaffold) {
      expected = "scaffold";
    } else if (config.aggregation == AggregationKind::kMajority) {
      expected = "majority_vote";
    } else if (config.robust.rule != RobustRule::kNone) {
      expected = "robust_mean";
    } else if (config.downlink == DownlinkKind::kModel) {
      expected = "mean";
    } else if (std::holds_alternative<IdentityParams>(codec) ||
               std::holds_alternative<RandKParams>(codec) ||
               std::holds_alternative<RandomBlockParams>(codec)) {
      expected = "payload_mean";
    } else if (std::holds_alternative<TopKParams>(codec) ||
               std::holds_alternative<SignParams>(codec) ||
               std::holds_alternative<StochasticSignParams>(codec) ||
               std::holds_alternative<QsgdParams>(codec) ||
               std::holds_alternative<NaturalParams>(codec) ||
               std::holds_alternative<Fp16Params>(codec)) {
      expected = "recompressed_mean";
    }
    const AggregationDescriptor* found = FindAggregation(config);
    if (expected.empty()) {
      // reg_top_k with the aggregate downlink: nothing serves it, and the run is refused.
      EXPECT_EQ(found, nullptr);
      EXPECT_FALSE(ValidateRunConfig(config).ok());
      continue;
    }
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->name, expected);
    EXPECT_EQ(found->aggregate_is_payload,
              expected != "mean" && expected != "robust_mean" && expected != "scaffold");
    EXPECT_TRUE(ValidateRunConfig(config).ok());
    // Exactly one component serves each run: the registry's order does not decide.
    int serving = 0;
    for (const AggregationDescriptor& descriptor : kAggregations) {
      serving += descriptor.serves(config) ? 1 : 0;
    }
    EXPECT_EQ(serving, 1);
  }
  // Every registered component serves some run.
  for (const AggregationDescriptor& descriptor : kAggregations) {
    bool used = false;
    for (const auto& [component, config] : ConfigPerAggregation(40, 5)) {
      used |= FindAggregation(config) == &descriptor && descriptor.name == component;
    }
    EXPECT_TRUE(used) << descriptor.name;
  }
}

TEST(AggregationTest, ArenaBytesIsExactlyWhatCreationTakes) {
  for (const std::size_t dimension : {1u, 33u, 200u}) {
    for (const RunConfig& config : ConfigurationVariety(dimension)) {
      if (FindAggregation(config) == nullptr) continue;  // checked above
      for (const std::uint32_t workers : {1u, 4u, 9u}) {
        SCOPED_TRACE(Describe(config) + " d=" + std::to_string(dimension) +
                     " workers=" + std::to_string(workers));
        ComponentBox box(config, workers);
        EXPECT_GT(box.declared_bytes(), 0u);
        ASSERT_TRUE(box.status().ok()) << box.status().reason();
        EXPECT_EQ(box.used_bytes(), box.declared_bytes());
        // One byte less does not fit.
        ArenaStorage short_storage(box.declared_bytes() - 1);
        EXPECT_FALSE(
            box.descriptor()
                ->create(short_storage.arena, AggregationSetup{&AllCodecs(), &config, workers})
                .ok());
      }
    }
  }
}

// Only the re-compressed mean (the server's downlink residual) and SCAFFOLD (the server's
// control variate) keep state across rounds, d floats; restoring it checks the size and the
// values, and restores what was saved.
TEST(AggregationTest, OnlyTheRecompressedMeanAndScaffoldKeepState) {
  constexpr std::size_t kDim = 24;
  for (const auto& [component, config] : ConfigPerAggregation(kDim, 5)) {
    SCOPED_TRACE(std::string(component));
    ComponentBox box(config, 4);
    ASSERT_TRUE(box.status().ok());
    Aggregation& aggregation = box.component();
    const bool keeps_state = component == "recompressed_mean" || component == "scaffold";
    ASSERT_EQ(aggregation.SavedState().size(), keeps_state ? kDim * sizeof(float) : 0u);
    const std::vector<std::byte> wrong_size(3 * sizeof(float));
    EXPECT_EQ(aggregation.RestoreState(wrong_size), Status::InvalidArgument());
    if (!keeps_state) {
      EXPECT_TRUE(aggregation.RestoreState({}).ok());
      continue;
    }
    std::vector<float> residual = PseudoRandom(kDim, 3, 1.0f);
    ASSERT_TRUE(aggregation.RestoreState(std::as_bytes(std::span(residual))).ok());
    EXPECT_EQ(std::memcmp(aggregation.SavedState().data(), residual.data(), kDim * 4), 0);
    // A non-finite residual is refused and changes nothing.
    std::vector<float> poisoned = residual;
    poisoned[7] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(aggregation.RestoreState(std::as_bytes(std::span(poisoned))),
              Status::InvalidArgument());
    EXPECT_EQ(std::memcmp(aggregation.SavedState().data(), residual.data(), kDim * 4), 0);
  }
}

// The majority vote counts plain signs: a vote whose scales are not all 1, or that carries
// other fields, is refused and not counted.
TEST(AggregationTest, MajorityVoteRejectsAnythingButPlainSigns) {
  constexpr std::size_t kDim = 40;  // two words, the second with padding bits
  const RunConfig config = MajorityConfig(kDim, 5);
  ComponentBox box(config, 3);
  ASSERT_TRUE(box.status().ok());
  ASSERT_EQ(box.descriptor()->name, std::string_view("majority_vote"));
  Aggregation& vote = box.component();
  vote.BeginRound(0);

  const std::vector<float> momentum = PseudoRandom(kDim, 5, 1.0f);
  const PayloadShape shape = EncodedShape(config.codec, config.layout).value();
  std::vector<std::uint32_t> words(shape.words);
  std::vector<float> unit_scales(shape.scales);
  ASSERT_TRUE(SignCodec::Encode({.scale = SignScale::kUnit}, config.layout, {}, momentum,
                                {{}, {}, words, unit_scales}, {})
                  .ok());
  const CodecContext context{config.seed, 0, 1};

  const auto expect_refused = [&](const PayloadView& payload, const char* what) {
    const Status check = vote.Add(config.codec, payload, context, {});
    EXPECT_EQ(check, Status::DataLoss()) << what;
  };
  std::vector<float> mean_abs_scales(shape.scales);
  ASSERT_TRUE(SignCodec::Encode({.scale = SignScale::kMeanAbs}, config.layout, {}, momentum,
                                {{}, {}, words, mean_abs_scales}, {})
                  .ok());
  ASSERT_NE(mean_abs_scales[0], 1.0f);
  expect_refused(PayloadView({}, {}, words, mean_abs_scales), "mean |x| scales");
  for (const float scale : {0.5f, -1.0f, 0.0f, std::numeric_limits<float>::quiet_NaN()}) {
    expect_refused(PayloadView({}, {}, words, std::vector<float>{scale}), "another scale");
  }
  expect_refused(PayloadView({}, {}, words, {}), "no scale");
  const std::vector<float> two_scales = {1.0f, 1.0f};
  expect_refused(PayloadView({}, {}, words, two_scales), "a scale too many");
  const std::vector<float> values = {1.0f};
  expect_refused(PayloadView({}, values, words, unit_scales), "values beside the signs");
  const std::vector<std::uint32_t> indices = {0};
  expect_refused(PayloadView(indices, {}, words, unit_scales), "indices beside the signs");

  // The plain vote counts; alone, it is the majority.
  ASSERT_TRUE(
      vote.Add(config.codec, PayloadView({}, {}, words, unit_scales), context, {}).ok());
  std::vector<std::uint32_t> majority(shape.words);
  std::vector<float> majority_scales(shape.scales, 0.0f);
  ASSERT_TRUE(vote.FillBroadcast({{}, {}, majority, majority_scales}, context).ok());
  EXPECT_EQ(majority, words);
  EXPECT_EQ(majority_scales, unit_scales);
}

// Five workers pull towards nearby targets and a sixth towards one a thousand times further
// away: the mean follows it, every robust rule stays with the honest five.
TEST(AggregationTest, RobustRulesResistAFarTarget) {
  constexpr std::size_t kDim = 12;
  std::vector<std::vector<float>> targets = Targets(6, kDim);
  for (float& v : targets[5]) v = 1000.0f;
  std::vector<float> honest_mean(kDim, 0.0f);
  for (std::size_t w = 0; w < 5; ++w) {
    for (std::size_t i = 0; i < kDim; ++i) honest_mean[i] += targets[w][i] / 5.0f;
  }
  ServerOptions options;
  options.workers = 6;
  options.quorum = 6;
  const auto distance_to_honest = [&](const RobustParams& robust) {
    RunConfig config = MeanConfig(kDim, kCodecId<IdentityCodec>, 60);
    config.robust = robust;
    Cluster cluster(config, options, targets, std::vector<float>(kDim, 0.0f));
    cluster.Start();
    EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
    double squared = 0.0;
    for (std::size_t i = 0; i < kDim; ++i) {
      const double gap = static_cast<double>(cluster.server().model()[i] - honest_mean[i]);
      squared += gap * gap;
    }
    return std::sqrt(squared);
  };
  EXPECT_GT(distance_to_honest({}), 100.0);  // the mean: a sixth of the way to 1000
  for (const RobustParams robust :
       {RobustParams{.rule = RobustRule::kMedian},
        RobustParams{.rule = RobustRule::kTrimmedMean, .byzantine = 1},
        RobustParams{.rule = RobustRule::kMultiKrum, .byzantine = 1},
        RobustParams{.rule = RobustRule::kCenteredClipping, .clip_radius = 0.1f}}) {
    SCOPED_TRACE(std::string(RobustRuleName(robust.rule)));
    EXPECT_LT(distance_to_honest(robust), 3.0);
  }
}

// Centered clipping's centre is the state a checkpoint keeps (d floats); the others keep none.
TEST(AggregationTest, CenteredClippingKeepsItsCentre) {
  constexpr std::size_t kDim = 10;
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 5);
  config.robust = RobustParams{.rule = RobustRule::kCenteredClipping};
  ComponentBox box(config, 4);
  ASSERT_TRUE(box.status().ok());
  EXPECT_EQ(box.component().SavedState().size(), kDim * sizeof(float));
  const std::vector<float> centre = PseudoRandom(kDim, 9, 1.0f);
  ASSERT_TRUE(box.component().RestoreState(std::as_bytes(std::span(centre))).ok());
  EXPECT_EQ(std::memcmp(box.component().SavedState().data(), centre.data(), kDim * 4), 0);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
