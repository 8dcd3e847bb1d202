#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {

Status CheckRunFeatures(const RunConfig& config, std::span<const RunFeature* const> features) {
  for (const RunFeature* feature : features) {
    if (!feature->enabled(config)) continue;
    for (const FeatureExclusion& exclusion : feature->excludes) {
      if (exclusion.other->enabled(config)) return Status::InvalidArgument(exclusion.reason);
    }
    EDGESGD_TRY(feature->validate(config));
  }
  return Status::Ok();
}

Status CheckAggregationOptions(const RunConfig& config) {
  if ((config.aggregation_options & ~kAggregationOptionBits) != 0) {
    return Status::InvalidArgument("aggregation_options names an option no aggregation declares");
  }
  for (const AggregationDescriptor& descriptor : kAggregations) {
    const AggregationOption* option = descriptor.option;
    if (option == nullptr || (config.aggregation_options & option->bit) == 0) continue;
    const RunFeature* const feature[] = {option->feature};
    EDGESGD_TRY(CheckRunFeatures(config, feature));
  }
  return Status::Ok();
}

// The order is the order of the refusals a run with several faults meets first.
std::span<const RunFeature* const> SharedRunFeatures() {
  static constexpr const RunFeature* kFeatures[] = {
      &kMajorityVoteFeature, &kAggregateDownlinkFeature, &kProximalFeature,
      &kScaffoldFeature,     &kPrivacyFeature,           &kSecureAggregationFeature,
  };
  return kFeatures;
}

std::span<const RunFeature* const> ServerRunFeatures() {
  static constexpr const RunFeature* kFeatures[] = {
      &kRobustFeature,
      &kServerOptimizerFeature,
      &kAsyncFeature,
  };
  return kFeatures;
}

std::span<const FeatureFields* const> FeatureFieldTables() {
  static constexpr const FeatureFields* kTables[] = {&kProximalFields, &kPrivacyFields,
                                                     &kRobustFields};
  return kTables;
}

}  // namespace edgesgd::protocol
