// Buffered asynchronous aggregation (FedBuff, buffered_async.h) instead of synchronous rounds.
// The server's choice alone: a worker runs unchanged.
#include "edgesgd/protocol/buffered_async.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return IsAsynchronous(config.async); }

Status Validate(const RunConfig& config) { return ValidateAsyncParams(config.async); }

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "--buffer weighs each update by its staleness; majority vote counts the votes of one round "
     "(use --aggregate mean)"},
    {&kAggregateDownlinkFeature,
     "--buffer needs --downlink model: asynchronous workers hold different model versions, so "
     "no aggregate fits them all"},
    {&kRobustFeature,
     "--robust compares the updates of one round; asynchronous aggregation has none (drop "
     "--buffer or --robust)"},
    {&kPrivacyFeature,
     "differential privacy's accounting assumes synchronous rounds of sampled devices: drop "
     "--buffer or --dp-mode"},
    {&kScaffoldFeature,
     "--scaffold corrects steps that start from the round's model and control variate: "
     "asynchronous workers (--buffer) train on older ones"},
    {&kSecureAggregationFeature,
     "--secure-aggregation masks the updates of one round's cohort; asynchronous aggregation "
     "(--buffer) takes them one at a time"},
};

}  // namespace

constinit const RunFeature kAsyncFeature{"--buffer", Enabled, Validate, kExcludes};

}  // namespace edgesgd::protocol
