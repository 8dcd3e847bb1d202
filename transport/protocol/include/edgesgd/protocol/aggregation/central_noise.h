#pragma once

// Differential privacy's central noise, as a part of the aggregation components that average
// (mean, payload_mean): the sum of a round's n clipped updates gets N(0, (zC)^2) per coordinate
// it releases, that is N(0, (zC / n)^2) on the mean. Keyed by the server's secret, so no worker
// can subtract it. Does nothing unless the run's privacy mode is central.

#include <cstdint>
#include <span>

#include "edgesgd/core/privacy/differential_privacy.h"
#include "edgesgd/protocol/run_config.h"

namespace edgesgd::protocol {

class CentralNoise {
 public:
  void Init(const RunConfig& config, std::uint64_t key) {
    enabled_ = config.privacy.mode == PrivacyMode::kCentral;
    stddev_ = SumNoiseStddev(config.privacy);
    key_ = key;
  }

  // Adds the noise of round `round` to `mean`, the mean of `updates` (>= 1) clipped updates.
  void AddToMean(std::span<float> mean, std::uint32_t updates, std::uint32_t round) const {
    if (!enabled_ || updates == 0) return;
    GaussianNoise(key_, round, 0).AddTo(mean, stddev_ / updates);
  }

 private:
  bool enabled_ = false;
  double stddev_ = 0.0;
  std::uint64_t key_ = 0;
};

}  // namespace edgesgd::protocol
