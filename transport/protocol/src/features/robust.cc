// A Byzantine-robust rule in place of the mean (core/robust_aggregator.h). The server's choice
// alone: workers run as for the mean.
#include "edgesgd/core/robust_aggregator.h"
#include "run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return config.robust.rule != RobustRule::kNone; }

Status Validate(const RunConfig& config) { return ValidateRobustParams(config.robust); }

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "--robust replaces the mean of updates: majority vote is not one (use --aggregate mean)"},
    {&kAggregateDownlinkFeature,
     "--robust aggregates decoded updates and broadcasts the model: use --downlink model (the "
     "model downlink)"},
    {&kPrivacyFeature,
     "--robust does not combine with --dp-mode: differential privacy calibrates its noise to a "
     "mean of clipped updates, and a robust rule is not one"},
    {&kScaffoldFeature,
     "--robust and --scaffold: SCAFFOLD keeps its control variate the mean of every device's "
     "change, and a robust rule would drop some of them"},
    {&kSecureAggregationFeature,
     "--robust compares the devices' updates: --secure-aggregation shows the server only their "
     "sum"},
};

}  // namespace

constinit const RunFeature kRobustFeature{"--robust", Enabled, Validate, kExcludes};

}  // namespace edgesgd::protocol
