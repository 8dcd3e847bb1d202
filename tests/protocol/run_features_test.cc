// The run's feature components (src/features/): each turns on alone, and each exclusion it
// declares is refused with its own reason, by the one generic checker.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/run_feature.h"
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

// The fields a feature declares make the command line's flags: each name is taken once (by no
// other feature's field and no codec parameter), each writes and reads back its own word and
// nothing else, a choice's default is one of its choices, and a reason a field goes unread
// names the flags that would read it.
TEST(RunFeaturesTest, DeclaredFieldsAreWellFormed) {
  std::vector<std::string> names;
  ForEachCodec([&names](auto codec) {
    using Codec = typename decltype(codec)::type;
    for (const auto& field : Codec::kFields) names.emplace_back(field.name);
  });
  std::vector<const RunFeature*> features;
  ForEachFeature([&features](const RunFeature& feature, bool) { features.push_back(&feature); });
  std::size_t fields = 0;
  for (const FeatureFields* table : FeatureFieldTables()) {
    EXPECT_NE(std::find(features.begin(), features.end(), table->feature), features.end())
        << "a field table of an unregistered feature";
    for (const FeatureField& field : table->fields) {
      ++fields;
      const std::string name(field.name);
      EXPECT_EQ(std::count(names.begin(), names.end(), name), 0) << name << " is taken";
      names.push_back(name);
      const RunConfig defaults;
      const std::uint32_t word = field.get(defaults);
      if (field.kind == ParamKind::kChoice) {
        EXPECT_LT(word, field.choices.size()) << name;
      }
      RunConfig changed = defaults;
      const std::uint32_t other = field.kind == ParamKind::kChoice ? (word + 1) % 2 : word + 1;
      field.set(changed, other);
      EXPECT_EQ(field.get(changed), other) << name;
      field.set(changed, word);
      EXPECT_EQ(changed, defaults) << name << " writes beyond its own word";
      if (field.unused_because != nullptr) {
        const char* reason = field.unused_because(defaults);
        if (reason != nullptr) {
          EXPECT_NE(std::string(reason).find("--"), std::string::npos) << name;
        }
      }
    }
  }
  EXPECT_GE(fields, 5u);  // FedProx's and the robust rule's, at least
}

// The robust rule's fields go unread exactly where its parameters do.
TEST(RunFeaturesTest, RobustFieldsAreReadByTheRulesThatUseThem) {
  const auto unused = [](std::string_view name, RobustRule rule) {
    RunConfig config;
    config.robust.rule = rule;
    for (const FeatureField& field : kRobustFields.fields) {
      if (field.name == name) {
        return field.unused_because != nullptr && field.unused_because(config) != nullptr;
      }
    }
    ADD_FAILURE() << name << " is not a field of the robust rule";
    return false;
  };
  EXPECT_FALSE(unused("robust", RobustRule::kNone));
  EXPECT_TRUE(unused("robust_f", RobustRule::kMedian));
  EXPECT_FALSE(unused("robust_f", RobustRule::kTrimmedMean));
  EXPECT_FALSE(unused("robust_f", RobustRule::kMultiKrum));
  EXPECT_TRUE(unused("robust_clip_radius", RobustRule::kMultiKrum));
  EXPECT_FALSE(unused("robust_clip_radius", RobustRule::kCenteredClipping));
  EXPECT_FALSE(unused("robust_clip_iterations", RobustRule::kCenteredClipping));
}

}  // namespace
}  // namespace edgesgd::protocol::testing
