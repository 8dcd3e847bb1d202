// Secure aggregation (secure_aggregation.h): the server sees only the sum of a round's updates,
// or each coordinate's count of +1 votes.
#include "edgesgd/core/privacy/differential_privacy.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

bool Enabled(const RunConfig& config) { return config.secure.enabled; }

// qsgd's levels are summed in lanes, which needs every device to quantize with the same scale
// and level count.
Status CheckSecureQsgd(const QsgdParams& qsgd) {
  if (qsgd.shared_scale == 0.0f) {
    return Status::InvalidArgument(
        "secure aggregation sums qsgd's levels, which mean the same on every device only with one "
        "scale for all: set --shared-scale (the magnitude of the top level, e.g. the clipping "
        "bound of the updates)");
  }
  if (qsgd.schedule != QuantScheduleKind::kFixed) {
    return Status::InvalidArgument(
        "secure aggregation sums qsgd's levels, so every device must use the same level count: "
        "use --quant-schedule fixed");
  }
  return Status::Ok();
}

Status Validate(const RunConfig& config) {
  if (!wire::kSecureAggregationFrames) {
    return Status::InvalidArgument("this build leaves secure aggregation out");
  }
  EDGESGD_TRY(ValidateSecureParams(config.secure));
  if (AdaptsClipping(config.privacy)) {
    return Status::InvalidArgument(
        "adaptive clipping (--dp-target-quantile) counts the devices that needed no clipping, one "
        "indicator each; secure aggregation does not carry them: keep --dp-clip fixed");
  }
  // Majority vote masks its signs as 0/1 counts in lanes: any vote form, either downlink.
  if (config.aggregation == AggregationKind::kMajority) return Status::Ok();
  if (config.downlink != DownlinkKind::kModel) {
    return Status::InvalidArgument(
        "--secure-aggregation needs --downlink model: the server unmasks the sum and broadcasts "
        "the model");
  }
  if (const QsgdParams* qsgd = SecureQsgdParams(config); qsgd != nullptr) {
    return CheckSecureQsgd(*qsgd);
  }
  if (const Result<PayloadShape> shape = EncodedShape(config.codec, config.layout);
      !TraitsOf(config.codec).payload_sum || !shape.ok() || shape.value().words != 0 ||
      shape.value().scales != 0) {
    return Status::InvalidArgument(
        "secure aggregation masks the same coordinates on every device, as plain values: use "
        "identity, random_block, rand_k or qsgd with a shared scale (top_k selects different "
        "coordinates on each device, so the masks could not cancel)");
  }
  return Status::Ok();
}

constexpr FeatureExclusion kExcludes[] = {
    {&kScaffoldFeature,
     "--scaffold and --secure-aggregation: SCAFFOLD's control changes would travel unmasked "
     "beside the masked update"},
};

}  // namespace

constinit const RunFeature kSecureAggregationFeature{"--secure-aggregation", Enabled, Validate,
                                                     kExcludes};

}  // namespace edgesgd::protocol
