// What the worker checks of a run outside its session: whether a device can run it (the
// server asks, with the device's Join), and whether a second Welcome describes the same run.

#include "worker_checks.h"

#include <bit>

namespace edgesgd::protocol {
namespace {

// Bitwise float equality: a Welcome must compare equal to itself even if a field the run does
// not read holds a NaN.
bool SameBits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

bool SameTraining(const wire::TrainingConfig& a, const wire::TrainingConfig& b) {
  return a.feedback == b.feedback && SameBits(a.detach, b.detach) && a.optimizer == b.optimizer &&
         SameBits(a.learning_rate, b.learning_rate) && SameBits(a.momentum, b.momentum) &&
         SameBits(a.weight_decay, b.weight_decay) && a.local_steps == b.local_steps &&
         SameBits(a.prox_mu, b.prox_mu) && a.scaffold == b.scaffold && a.batch == b.batch &&
         a.aggregate == b.aggregate && SameBits(a.participation, b.participation) &&
         a.mode == b.mode && a.gossip == b.gossip && a.topology == b.topology &&
         a.gossip_rounds == b.gossip_rounds;
}

bool SamePrivacy(const wire::PrivacyConfig& a, const wire::PrivacyConfig& b) {
  return a.mode == b.mode && SameBits(a.clip, b.clip) &&
         SameBits(a.noise_multiplier, b.noise_multiplier) && SameBits(a.delta, b.delta) &&
         SameBits(a.target_quantile, b.target_quantile) &&
         SameBits(a.clip_learning_rate, b.clip_learning_rate) &&
         SameBits(a.count_noise, b.count_noise);
}

bool SameSecure(const wire::SecureConfig& a, const wire::SecureConfig& b) {
  return SameBits(a.threshold, b.threshold) && a.neighbours == b.neighbours &&
         SameBits(a.bound, b.bound);
}

}  // namespace

bool internal::SameWelcome(const wire::WelcomeInfo& a, const wire::WelcomeInfo& b) {
  return a.assigned_id == b.assigned_id && a.workers == b.workers && a.rounds == b.rounds &&
         a.seed == b.seed && a.layout == b.layout && SameCodecParams(a.codec, b.codec) &&
         SameTraining(a.training, b.training) && SamePrivacy(a.privacy, b.privacy) &&
         (!wire::kSecureAggregationFrames || SameSecure(a.secure, b.secure));
}

Status CheckWorkerCanRun(const RunConfig& config, const wire::JoinInfo& join,
                         std::uint32_t workers) {
  // The dense model broadcasts are copied, not decoded: the run's codec is all a worker needs.
  if (join.codecs != 0 && (join.codecs & wire::CodecBit(CodecIdOf(config.codec))) == 0) {
    return Status::FailedPrecondition("worker does not implement this run's codec");
  }
  // A device with 4 GiB or more reports the u32 maximum, which is not a limit.
  if (join.memory_bytes != 0 && join.memory_bytes != 0xFFFFFFFFu &&
      join.memory_bytes < WorkerSession::WelcomeArenaBytes(config, workers)) {
    return Status::ResourceExhausted("worker memory is too small for this run");
  }
  if (config.privacy.mode != PrivacyMode::kOff &&
      (join.features & wire::kFeatureDifferentialPrivacy) == 0) {
    return Status::FailedPrecondition(
        "worker does not implement differential privacy, which this run needs");
  }
  if (config.privacy.mode == PrivacyMode::kDistributed &&
      (join.features & wire::kFeatureDistributedNoise) == 0) {
    return Status::FailedPrecondition(
        "worker cannot add noise itself, which this run's distributed noise needs");
  }
  if (config.scaffold && (join.features & wire::kFeatureScaffold) == 0) {
    return Status::FailedPrecondition("worker does not implement SCAFFOLD, which this run uses");
  }
  if (config.secure.enabled && (join.features & wire::kFeatureSecureAggregation) == 0) {
    return Status::FailedPrecondition(
        "worker cannot take part in secure aggregation (no entropy source), which this run uses");
  }
  if (join.max_frame_bytes != 0 &&
      join.max_frame_bytes < WorkerReceiveFrameBytes(config, workers)) {
    return Status::ResourceExhausted("worker cannot receive this run's largest frame");
  }
  return Status::Ok();
}

}  // namespace edgesgd::protocol
