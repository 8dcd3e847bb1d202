// Majority vote (signSGD, docs/algorithms.md): workers send plain signs of Signum's momentum and
// the server broadcasts the vote.
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return config.aggregation == AggregationKind::kMajority; }

Status Validate(const RunConfig& config) {
  EDGESGD_TRY_ASSIGN(const CodecParams votes, VoteForm(config.codec));
  if (!(votes == config.codec)) {
    return Status::InvalidArgument("majority vote needs plain signs (sign codec with unit scale)");
  }
  if (config.tie_rule != TieRule::kPositive && config.tie_rule != TieRule::kNegative) {
    return Status::InvalidArgument("unknown tie rule");
  }
  if (config.optimizer.kind != OptimizerKind::kSignum) {
    return Status::InvalidArgument("majority vote runs the Signum optimizer");
  }
  EDGESGD_TRY(ValidateOptimizerParams(config.optimizer));
  if (config.feedback.local_steps != 1) {
    return Status::InvalidArgument(
        "majority vote takes one gradient per round (local steps H = 1)");
  }
  return Status::Ok();
}

}  // namespace

constinit const RunFeature kMajorityVoteFeature{"--aggregate majority", Enabled, Validate, {}};

}  // namespace edgesgd::protocol
