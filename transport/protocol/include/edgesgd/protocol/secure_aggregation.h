#pragma once

// Secure aggregation in the parameter-server sessions (docs/secure-aggregation.md): the server
// learns the sum of a round's updates and nothing else about any one of them. A worker computes
// its update as usual, encodes the payload's values in fixed point and takes part in the round's
// four phases (keys, shares, masked input, unmasking) instead of sending an Update; the server
// runs each phase to its deadline and adds the unmasked sum to the aggregation component at once.
// These are the run's parameters and the rules that turn them into a round's plan.

#include <cstdint>

#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/secagg/fixed_point.h"
#include "edgesgd/secagg/server.h"

namespace edgesgd::protocol {

struct SecureAggregationParams {
  bool enabled = false;
  // Shares that reconstruct a secret, as a fraction of each neighbourhood with its device:
  // t = ceil(threshold * (k + 1)), at least a majority of it. Up to k + 1 - t devices of a
  // neighbourhood may vanish in a round. In (0.5, 1].
  float threshold = 2.0f / 3.0f;
  // SecAgg+'s neighbourhood k (even): each device masks with k others on a random ring; 0 masks
  // with every other device of the round.
  std::uint32_t neighbours = 0;
  // Every sent value is clipped to [-bound, bound] before it enters Z_2^32 in fixed point.
  float bound = 4.0f;
  // Signed rounds (Bonawitz et al.'s active-adversary variant, secagg/signing.h): every device
  // signs its keys and, before revealing any share, the survivor set, which the server must show
  // to be the same for all. Against a server that lies about who survived. Needs a signing key
  // on every device and their verifying keys on the server and the devices.
  bool signed_rounds = false;

  friend constexpr bool operator==(const SecureAggregationParams&,
                                   const SecureAggregationParams&) = default;
};

// The parameters as a run records them: the defaults when off.
constexpr SecureAggregationParams NormalizedSecureParams(const SecureAggregationParams& params) {
  return params.enabled ? params : SecureAggregationParams{};
}

// Why the parameters are refused, or Ok (off is always Ok): threshold in (0.5, 1], an even k,
// a positive finite bound. Errors: kInvalidArgument.
Status ValidateSecureParams(const SecureAggregationParams& params);

// The fixed point of a run of `workers` workers: every value within the bound, and any sum of
// up to `workers` of them inside a signed 32-bit word. Errors: kInvalidArgument or kOutOfRange
// (ChooseFixedPoint's) with a reason a flag can be fixed by.
Result<secagg::FixedPoint> SecureFixedPoint(const SecureAggregationParams& params,
                                            std::uint32_t workers);

// t for a round of `cohort` devices.
std::uint32_t SecureThreshold(const SecureAggregationParams& params, std::uint32_t cohort);

// The neighbourhood a device of a run of `workers` workers must be ready for: k, or everyone
// else when k is 0 or at least workers - 1.
constexpr std::uint32_t MaxSecureNeighbours(const SecureAggregationParams& params,
                                            std::uint32_t workers) {
  const std::uint32_t others = workers > 0 ? workers - 1 : 0;
  return params.neighbours == 0 || params.neighbours > others ? others : params.neighbours;
}

}  // namespace edgesgd::protocol
