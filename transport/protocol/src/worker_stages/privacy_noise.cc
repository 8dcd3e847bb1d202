#include "update_stage.h"

namespace edgesgd::protocol::internal {

Status PrivacyNoise::Run(UpdateRound& round) const {
  const PrivacyParams& privacy = round.config.privacy;
  const WorkerOptions& options = round.options;
  const bool distributed = privacy.mode == PrivacyMode::kDistributed;
  const float bound = round.feedback.clip_norm();
  const std::uint32_t cohort = SampledCount(round.config.participation, round.workers);
  if (distributed) {
    // This device's share of the round's noise, on the coordinates every device sends; after
    // Compress, so the residual never holds noise.
    options.add_noise(privacy, bound, cohort,
                      {options.noise_key, round.round, round.id, kNoiseOnValues},
                      round.payload.values.first(round.shape.values));
  }
  if (!AdaptsClipping(privacy)) return Status::Ok();
  // Whether the update needed no clipping, for the server's count (with this device's share of
  // the count's noise when the devices add the noise).
  float indicator = round.feedback.norm_before_clipping() <= bound ? 1.0f : 0.0f;
  if (distributed) {
    options.add_noise(privacy, bound, cohort,
                      {options.noise_key, round.round, round.id, kNoiseOnCount},
                      std::span(&indicator, 1));
  }
  wire::PayloadMessage message = round.message;
  message.update.clip_indicator = indicator;
  if (const Status amended = round.builder.AmendPendingMessage(message); !amended.ok()) {
    ++round.counters.encode_errors;
    return amended;
  }
  return Status::Ok();
}

}  // namespace edgesgd::protocol::internal
