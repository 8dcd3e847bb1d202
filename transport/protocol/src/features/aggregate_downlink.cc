// The aggregate downlink: a worker that holds the previous round's model receives only that
// round's aggregate and applies it itself.
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return config.downlink == DownlinkKind::kAggregate; }

Status Validate(const RunConfig& config) {
  // Majority vote sends its 1-bit vote, which every codec in vote form gives.
  if (config.aggregation == AggregationKind::kMean && !TraitsOf(config.codec).payload_sum &&
      !TraitsOf(config.codec).downlink_recompress) {
    return Status::InvalidArgument(
        "downlink aggregate needs a codec whose payloads sum or that the server can "
        "re-compress with; this one is neither (reg_top_k selects with each worker's "
        "posterior): use the model downlink");
  }
  return Status::Ok();
}

}  // namespace

constinit const RunFeature kAggregateDownlinkFeature{"--downlink aggregate", Enabled, Validate, {}};

}  // namespace edgesgd::protocol
