#include "edgesgd/protocol/secure_aggregation.h"

#include <cmath>

namespace edgesgd::protocol {

Status ValidateSecureParams(const SecureAggregationParams& params) {
  if (!params.enabled) return Status::Ok();
  if (!(params.threshold > 0.5f && params.threshold <= 1.0f)) {
    return Status::InvalidArgument(
        "the secure aggregation threshold must be in (0.5, 1]: a majority of each neighbourhood "
        "must hold a secret's shares, or a server could collect both of a device's secrets");
  }
  if (params.neighbours % 2 != 0) {
    return Status::InvalidArgument(
        "the secure aggregation neighbourhood must be even (k/2 devices on either side of a "
        "ring), or 0 for every device");
  }
  if (!(params.bound > 0.0f) || !std::isfinite(params.bound)) {
    return Status::InvalidArgument(
        "the secure aggregation bound must be positive and finite: values are clipped to it");
  }
  return Status::Ok();
}

Result<secagg::FixedPoint> SecureFixedPoint(const SecureAggregationParams& params,
                                            std::uint32_t workers) {
  const Result<secagg::FixedPoint> format = secagg::ChooseFixedPoint(params.bound, workers);
  if (!format.ok() && format.status().code() == StatusCode::kOutOfRange) {
    return Status::OutOfRange(
        "the secure aggregation bound times the worker count leaves fewer than 8 fraction bits "
        "in a 32-bit sum: lower the bound");
  }
  return format;
}

std::uint32_t SecureThreshold(const SecureAggregationParams& params, std::uint32_t cohort) {
  const std::uint32_t holders = secagg::NeighbourhoodSize(cohort, params.neighbours) + 1;
  // Less a little, so that 2/3 of 9 (a float just above 2/3) asks for 6 holders, not 7.
  const auto wanted =
      static_cast<std::uint32_t>(std::ceil(static_cast<double>(params.threshold) * holders - 1e-6));
  const std::uint32_t majority = holders / 2 + 1;
  const std::uint32_t threshold = wanted > majority ? wanted : majority;
  return threshold < holders ? threshold : holders;
}

}  // namespace edgesgd::protocol
