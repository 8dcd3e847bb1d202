#include "edgesgd/protocol/aggregation/server_privacy.h"

#include <cmath>
#include <cstring>

#include "../session_util.h"

namespace edgesgd::protocol {
void ServerPrivacy::Init(const RunConfig& config, std::uint32_t workers, const SecretKey& key) {
  params_ = config.privacy;
  central_ = params_.mode == PrivacyMode::kCentral;
  adaptive_ = AdaptsClipping(params_);
  const std::uint32_t cohort = SampledCount(config.participation, workers);
  cohort_ = cohort < 1 ? 1 : cohort;
  key_ = key;
  bound_ = params_.clip;
  unclipped_ = 0.0;
}

Status ServerPrivacy::CheckBound(const PayloadView& payload) const {
  if (!central_) return Status::Ok();
  const double squares = internal::SquaredNorm(payload.values);
  const double limit = static_cast<double>(bound_) * (1.0 + 1e-4);
  if (!(squares <= limit * limit)) {
    return Status::InvalidArgument("the update is longer than the round's clipping bound");
  }
  return Status::Ok();
}

void ServerPrivacy::AddNoiseToMean(std::span<float> mean, std::uint32_t updates,
                                   std::uint32_t round) const {
  if (!central_ || updates == 0) return;
  // bound_ is the run's fixed C unless clipping adapts.
  GaussianNoise({key_, round, 0, kNoiseOnValues})
      .AddTo(mean, SumNoiseStddev(params_, bound_) / updates);
}

float ServerPrivacy::NextBound(std::uint32_t round) const {
  if (!adaptive_) return 0.0f;
  float count = static_cast<float>(unclipped_);
  if (central_) {
    GaussianNoise({key_, round, 0, kNoiseOnCount})
        .AddTo(std::span(&count, 1), static_cast<double>(params_.count_noise));
  }
  return NextClipBound(bound_, static_cast<double>(count) / cohort_, params_);
}

std::span<const std::byte> ServerPrivacy::SavedState() const {
  if (!adaptive_) return {};
  return std::as_bytes(std::span(&bound_, 1));
}

Status ServerPrivacy::RestoreState(std::span<const std::byte> saved) {
  if (saved.size() != SavedState().size()) {
    return Status::InvalidArgument("the saved privacy state has the wrong size");
  }
  if (!adaptive_) return Status::Ok();
  float bound = 0.0f;
  std::memcpy(&bound, saved.data(), sizeof(bound));
  if (!(bound > 0.0f && std::isfinite(bound))) {
    return Status::InvalidArgument("the saved clipping bound is not a positive finite number");
  }
  bound_ = bound;
  return Status::Ok();
}

}  // namespace edgesgd::protocol
