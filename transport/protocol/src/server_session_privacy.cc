// ServerSession's privacy account: each released round charged to the ledger with what happened
// in it (docs/privacy.md, "What the epsilon counts").

#include "edgesgd/protocol/server_session.h"

#include <cmath>

namespace edgesgd::protocol {

void ServerSession::ChargePrivacy() {
  const PrivacyParams& privacy = config_.privacy;
  if (!IsPrivate(privacy) || reported_ == 0) return;  // no update released, nothing spent
  // Every participant was sampled with probability P. The noise on the sum is z C when the
  // server adds it; when the devices do, each adds the share of an expected cohort, so the sum
  // carries only the shares of those who reported.
  double noise = static_cast<double>(privacy.noise_multiplier);
  if (privacy.mode == PrivacyMode::kDistributed) {
    const std::uint32_t shares = SampledCount(config_.participation, options_.workers);
    noise *= std::sqrt(static_cast<double>(reported_) / static_cast<double>(shares));
  }
  // Both values are in range by the run's validation.
  (void)privacy_ledger_.Charge(static_cast<double>(config_.participation), noise);
}

Status ServerSession::RestorePrivacyLedger(std::span<const double> rdp, std::uint64_t rounds) {
  if (started_) return Status::FailedPrecondition("the privacy account is restored before Start");
  return privacy_ledger_.Restore(rdp, rounds);
}

}  // namespace edgesgd::protocol
