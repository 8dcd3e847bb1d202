// SCAFFOLD's control variates (core/scaffold.h): workers correct each local gradient by c - c_i
// and send the compressed change of c_i beside their update.
#include "edgesgd/core/scaffold.h"

#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return config.scaffold; }

Status Validate(const RunConfig& config) {
  if (!kScaffold) return Status::InvalidArgument("this build leaves SCAFFOLD out");
  if (config.feedback.local_steps < 2) {
    return Status::InvalidArgument(
        "--scaffold needs --local-steps 2 or more: it corrects the drift of several local steps");
  }
  if (SelectorStateFloats(config.codec, config.layout) != 0) {
    return Status::InvalidArgument(
        "SCAFFOLD's control changes cannot be compressed by a codec that selects from its own "
        "past updates (reg_top_k)");
  }
  if (FrameWithControlBytes(config, config.codec) == 0 ||
      FrameWithControlBytes(config, ModelCodec()) == 0) {
    return Status::InvalidArgument("the model and its control variate exceed one frame (1 GiB)");
  }
  return Status::Ok();
}

constexpr FeatureExclusion kExcludes[] = {
    {&kMajorityVoteFeature,
     "--scaffold corrects the local steps of --aggregate mean: "
     "majority vote takes one gradient "
     "per round"},
    {&kAggregateDownlinkFeature,
     "--scaffold sends the server's control variate with the model: use --downlink model"},
};

}  // namespace

constinit const RunFeature kScaffoldFeature{"--scaffold", Enabled, Validate, kExcludes};

}  // namespace edgesgd::protocol
