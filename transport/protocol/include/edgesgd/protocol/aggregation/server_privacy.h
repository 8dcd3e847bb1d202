#pragma once

// Differential privacy's server side, as a part of the aggregation components that average
// (mean, payload_mean; docs/privacy.md):
//   - central noise: the sum of a round's n clipped updates gets N(0, (z' C)^2) per coordinate it
//     releases, that is N(0, (z' C / n)^2) on the mean, z' being UpdateNoiseMultiplier;
//   - adaptive clipping: C follows the target quantile of the update norms, moved each round by
//     the count of updates that needed no clipping (each Update's clip_indicator), noised with
//     N(0, sigma_b^2) by the server (central) or by the devices' shares (distributed), over the
//     expected cohort.
// Noise is keyed by the server's secret, so no worker can subtract it. Nothing happens unless
// the run is private.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/payload.h"
#include "edgesgd/core/privacy/differential_privacy.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/wire/messages.h"

namespace edgesgd::protocol {

class ServerPrivacy {
 public:
  void Init(const RunConfig& config, std::uint32_t workers, const SecretKey& key);

  void BeginRound() { unclipped_ = 0.0; }
  // Under central noise, an update longer than the round's clipping bound (its device skipped
  // clipping) is refused, kInvalidArgument: the noise hides only updates of norm C. The norm
  // is the payload values' (the codecs that keep the bound place them unscaled); a relative
  // 1e-4 covers the float rounding of the device's clipping.
  Status CheckBound(const PayloadView& payload) const;
  // An accepted update of the round.
  void Count(const wire::UpdateInfo& update) {
    if (adaptive_) unclipped_ += static_cast<double>(update.clip_indicator);
  }

  // Adds the round's central noise to `mean`, the mean of `updates` updates. Does nothing
  // without central noise.
  void AddNoiseToMean(std::span<float> mean, std::uint32_t updates, std::uint32_t round) const;

  // The adaptive bound of this round (0 without adaptive clipping), the next round's from this
  // round's count, and the step from one to the other once the round is applied.
  float bound() const { return adaptive_ ? bound_ : 0.0f; }
  float NextBound(std::uint32_t round) const;
  void FinishRound(std::uint32_t round) {
    if (adaptive_) bound_ = NextBound(round);
  }

  // The adaptive bound as checkpoint state (empty without adaptive clipping), and its restore.
  std::span<const std::byte> SavedState() const;
  Status RestoreState(std::span<const std::byte> saved);

 private:
  PrivacyParams params_;
  bool central_ = false;
  bool adaptive_ = false;
  std::uint32_t cohort_ = 1;  // devices a round samples
  SecretKey key_;
  float bound_ = 0.0f;
  double unclipped_ = 0.0;  // the round's sum of clip indicators
};

}  // namespace edgesgd::protocol
