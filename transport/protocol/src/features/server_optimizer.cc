// A server optimizer other than plain FedAvg (core/server_optimizer.h): the server moves the
// model by the round's mean update. The server's choice alone.
#include "edgesgd/core/server_optimizer.h"

#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return ChangesFedAvg(config.server_optimizer); }

Status Validate(const RunConfig& config) {
  return ValidateServerOptimizerParams(config.server_optimizer);
}

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "--server-optimizer and --server-lr move the model by the mean update: majority "
     "vote moves "
     "it by the vote with Signum's learning rate (use --aggregate mean)"},
    {&kAggregateDownlinkFeature,
     "--server-optimizer and --server-lr need --downlink model: with the aggregate downlink "
     "every worker applies the aggregate itself, so a server optimizer needs the model "
     "downlink"},
};

}  // namespace

constinit const RunFeature kServerOptimizerFeature{"--server-optimizer", Enabled, Validate,
                                                   kExcludes};

}  // namespace edgesgd::protocol
