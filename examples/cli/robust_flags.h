#pragma once

// What `simulate` and `server` add to the robust rule's own flags (which the robust feature
// declares, transport/protocol/src/features/robust.cc): the check of f against the cohort the
// worker count gives, and the summary's "robust" section.

#include <cstdint>

#include "cli/metrics.h"
#include "edgesgd/core/robust_aggregator.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

// Ok, or a one-line reason `robust`'s rule cannot tell f faulty updates apart in a round that
// samples `cohort` workers.
HostResult<> CheckRobustCohort(const RobustParams& robust, std::uint32_t cohort);

// The "robust" section of a summary: the rule and the parameters it reads; nothing for kNone.
void WriteRobustSummary(SummaryWriter& summary, const RobustParams& robust);

}  // namespace edgesgd::cli
