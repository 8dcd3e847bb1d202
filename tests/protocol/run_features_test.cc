// The run's feature components (src/features/): each turns on alone, and each exclusion it
// declares is refused with its own reason, by the one generic checker.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "edgesgd/protocol/aggregation_registry.h"
#include "features/run_feature.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

// How a test turns each feature on; a feature missing here fails EveryFeatureTurnsOnAlone. An
// aggregation option's feature is turned on by its bit.
const std::map<const RunFeature*, std::function<void(RunConfig&)>>& Enablers() {
  static const std::map<const RunFeature*, std::function<void(RunConfig&)>> enablers = [] {
    std::map<const RunFeature*, std::function<void(RunConfig&)>> listed = {
      {&kMajorityVoteFeature,
       [](RunConfig& c) {
         c.aggregation = AggregationKind::kMajority;
         c.codec = SignParams{.scale = SignScale::kUnit};
         c.optimizer = OptimizerParams{OptimizerKind::kSignum, 0.01f, 0.5f, 0.0f};
         c.feedback.local_steps = 1;
       }},
      {&kAggregateDownlinkFeature, [](RunConfig& c) { c.downlink = DownlinkKind::kAggregate; }},
      {&kProximalFeature,
       [](RunConfig& c) {
         c.feedback.prox_mu = 0.1f;
         c.feedback.local_steps = 3;
       }},
      {&kScaffoldFeature,
       [](RunConfig& c) {
         c.scaffold = true;
         c.feedback.local_steps = 3;
       }},
      {&kPrivacyFeature, [](RunConfig& c) { c.privacy.mode = PrivacyMode::kCentral; }},
      {&kSecureAggregationFeature, [](RunConfig& c) { c.secure.enabled = true; }},
      {&kRobustFeature, [](RunConfig& c) { c.robust.rule = RobustRule::kMedian; }},
      {&kServerOptimizerFeature,
       [](RunConfig& c) { c.server_optimizer.kind = ServerOptimizerKind::kFedAdam; }},
      {&kAsyncFeature, [](RunConfig& c) { c.async.buffer = 2; }},
    };
    for (const AggregationDescriptor& aggregation : kAggregations) {
      if (aggregation.option == nullptr) continue;
      listed[aggregation.option->feature] = [bit = aggregation.option->bit](RunConfig& c) {
        c.aggregation_options |= bit;
      };
    }
    return listed;
  }();
  return enablers;
}

// A plain mean run with a codec every feature accepts alone (values at shared coordinates).
// Plain SGD on the workers: an option may normalize by local steps of SGD.
RunConfig Base() {
  RunConfig config = MeanConfig(64, kCodecId<RandomBlockCodec>, 5);
  config.feedback.momentum = 0.0f;
  return config;
}

Status CheckWholeRun(const RunConfig& config) {
  EDGESGD_TRY(ValidateRunConfig(config));
  return ValidateServerChoices(config);
}

template <typename F>
void ForEachFeature(F&& f) {
  for (const RunFeature* feature : SharedRunFeatures()) f(*feature, false);
  for (const RunFeature* feature : ServerRunFeatures()) f(*feature, true);
  for (const AggregationDescriptor& aggregation : kAggregations) {
    if (aggregation.option != nullptr) f(*aggregation.option->feature, true);
  }
}

TEST(RunFeaturesTest, AnOptionNoAggregationDeclaresIsRefused) {
  RunConfig config = Base();
  config.aggregation_options = 1u << 31;
  ASSERT_EQ(kAggregationOptionBits & config.aggregation_options, 0u);
  EXPECT_EQ(ValidateServerChoices(config), Status::InvalidArgument());
}

TEST(RunFeaturesTest, EveryFeatureTurnsOnAlone) {
  ASSERT_TRUE(CheckWholeRun(Base()).ok()) << CheckWholeRun(Base()).reason();
  ForEachFeature([](const RunFeature& feature, bool) {
    const auto enabler = Enablers().find(&feature);
    ASSERT_NE(enabler, Enablers().end()) << feature.name << " has no enabler in this test";
    RunConfig config = Base();
    EXPECT_FALSE(feature.enabled(config)) << feature.name;
    enabler->second(config);
    EXPECT_TRUE(feature.enabled(config)) << feature.name;
    const Status check = CheckWholeRun(config);
    EXPECT_TRUE(check.ok()) << feature.name << ": " << check.reason();
  });
}

TEST(RunFeaturesTest, EveryExclusionIsRefusedWithItsReason) {
  std::size_t exclusions = 0;
  ForEachFeature([&](const RunFeature& feature, bool) {
    for (const FeatureExclusion& exclusion : feature.excludes) {
      RunConfig config = Base();
      Enablers().at(exclusion.other)(config);
      Enablers().at (&feature)(config);
      ASSERT_TRUE(exclusion.other->enabled(config))
          << feature.name << " / " << exclusion.other->name;
      // The feature alone in a registry: its exclusions are checked before its own validation.
      const RunFeature* alone[] = {&feature};
      EXPECT_EQ(CheckRunFeatures(config, alone), Status::InvalidArgument())
          << feature.name << " / " << exclusion.other->name;
      EXPECT_STREQ(CheckRunFeatures(config, alone).reason(), exclusion.reason);
      // And the whole run is refused, whichever refusal comes first.
      EXPECT_FALSE(CheckWholeRun(config).ok()) << feature.name << " / " << exclusion.other->name;
      ++exclusions;
    }
  });
  EXPECT_GT(exclusions, 0u);
}

// The registries keep the promise of run_feature.h: an exclusion names a feature registered
// earlier, and a shared feature excludes no server feature (a worker image links none of them).
TEST(RunFeaturesTest, ExclusionsPointBackwards) {
  std::vector<const RunFeature*> seen;
  ForEachFeature([&](const RunFeature& feature, bool) {
    for (const FeatureExclusion& exclusion : feature.excludes) {
      EXPECT_NE(std::find(seen.begin(), seen.end(), exclusion.other), seen.end())
          << feature.name << " excludes " << exclusion.other->name << ", registered after it";
      EXPECT_NE(std::string(exclusion.reason).find("--"), std::string::npos)
          << "a refusal names the flags: " << exclusion.reason;
    }
    seen.push_back(&feature);
  });
}

}  // namespace
}  // namespace edgesgd::protocol::testing
