#include "edgesgd/protocol/run_config.h"

#include "edgesgd/core/aggregator.h"
#include "edgesgd/protocol/server_types.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::protocol {
namespace {

static_assert(kMaxLocalSteps == 4096 && kMaxBatch == 1048576 && kMaxSamplesPerRound == 16777216 &&
                  kMaxWorkers == 16384,
              "the refusal reasons below spell out the bounds");

Status CheckCodec(const CodecParams& codec, const TensorLayout& layout) {
  EDGESGD_TRY(ValidateCodecParams(codec));
  if (!EncodedShape(codec, layout).ok()) {
    return Status::InvalidArgument("the codec cannot encode this model");
  }
  if (wire::MaxFrameBytes(codec, layout) == 0) {
    return Status::InvalidArgument("an encoded update would exceed the 1 GiB frame limit");
  }
  return Status::Ok();
}

// Core's checks of the fields, and the bound on the work one Welcome may ask of a worker.
Status CheckFeedback(const FeedbackParams& feedback) {
  if (feedback.local_steps < 1 || feedback.local_steps > kMaxLocalSteps) {
    return Status::InvalidArgument("local steps H must be in 1..4096");
  }
  return ValidateFeedbackParams(feedback);
}

}  // namespace

Status CheckSecureCohort(const RunConfig& config, std::uint32_t workers) {
  if (!wire::kSecureAggregationFrames || !config.secure.enabled ||
      config.aggregation == AggregationKind::kMajority) {
    return Status::Ok();
  }
  if (const QsgdParams* qsgd = SecureQsgdParams(config); qsgd != nullptr) {
    if (SecureLevelLaneBits(qsgd->levels, workers) == 0) {
      return Status::OutOfRange(
          "secure qsgd sums levels in 32-bit lanes: 2 x levels x workers must stay below 2^32, "
          "so use fewer --bits");
    }
    return Status::Ok();
  }
  return SecureFixedPoint(config.secure, workers).status();
}

Status ValidateRunConfig(const RunConfig& config) {
  if (config.layout.tensor_count() == 0) return Status::InvalidArgument("the model has no tensors");
  if (wire::MaxFrameBytes(ModelCodec(), config.layout) == 0) {
    return Status::InvalidArgument("the model is too large for one frame (1 GiB limit)");
  }
  if (const Status codec = CheckCodec(config.codec, config.layout); !codec.ok()) {
    return codec;
  }
  if (config.rounds < 1) return Status::InvalidArgument("rounds must be at least 1");
  if (config.batch < 1 || config.batch > kMaxBatch) {
    return Status::InvalidArgument("batch size must be in 1..1048576");
  }
  if (!(config.participation > 0.0f && config.participation <= 1.0f)) {
    return Status::InvalidArgument("participation must be in (0, 1]");
  }
  if (config.downlink != DownlinkKind::kModel && config.downlink != DownlinkKind::kAggregate) {
    return Status::InvalidArgument("unknown downlink");
  }
  if (config.aggregation != AggregationKind::kMean &&
      config.aggregation != AggregationKind::kMajority) {
    return Status::InvalidArgument("unknown aggregation");
  }
  // kMajority reads Signum's parameters instead (its feature checks them).
  if (config.aggregation == AggregationKind::kMean) {
    EDGESGD_TRY(CheckFeedback(config.feedback));
    if (std::uint64_t{config.feedback.local_steps} * config.batch > kMaxSamplesPerRound) {
      return Status::InvalidArgument(
          "local steps H times the batch must be at most 16777216 samples per round");
    }
  }
  return CheckRunFeatures(config, SharedRunFeatures());
}

Status ValidateServerChoices(const RunConfig& config) {
  // Read even when they leave FedAvg unchanged, so a bad value never passes unnoticed.
  EDGESGD_TRY(ValidateServerOptimizerParams(config.server_optimizer));
  EDGESGD_TRY(CheckRunFeatures(config, ServerRunFeatures()));
  return CheckAggregationOptions(config);
}

RunConfig NormalizedRunConfig(const RunConfig& config) {
  RunConfig out = config;
  if (config.aggregation == AggregationKind::kMajority) {
    out.feedback.learning_rate = config.optimizer.learning_rate;
    out.feedback.momentum = config.optimizer.momentum;
    out.feedback.weight_decay = config.optimizer.weight_decay;
  } else {
    out.optimizer.learning_rate = config.feedback.learning_rate;
    out.optimizer.momentum = config.feedback.momentum;
    out.optimizer.weight_decay = config.feedback.weight_decay;
  }
  out.privacy = NormalizedPrivacyParams(config.privacy);
  out.secure = NormalizedSecureParams(config.secure);
  out.robust = RobustParams{};
  out.server_optimizer = ServerOptimizerParams{};
  out.async = AsyncParams{};
  out.aggregation_options = 0;
  return out;
}

wire::WelcomeInfo ToWelcomeInfo(const RunConfig& config, std::uint32_t assigned_id,
                                std::uint32_t workers) {
  wire::WelcomeInfo welcome;
  welcome.assigned_id = assigned_id;
  welcome.workers = workers;
  welcome.rounds = config.rounds;
  welcome.seed = config.seed;
  welcome.layout = config.layout;
  welcome.codec = config.codec;

  const bool majority = config.aggregation == AggregationKind::kMajority;
  wire::TrainingConfig& training = welcome.training;
  training.feedback = static_cast<std::uint8_t>(config.feedback.kind);
  training.detach = config.feedback.detach;
  training.optimizer = static_cast<std::uint8_t>(config.optimizer.kind);
  training.learning_rate =
      majority ? config.optimizer.learning_rate : config.feedback.learning_rate;
  training.momentum = majority ? config.optimizer.momentum : config.feedback.momentum;
  training.weight_decay = majority ? config.optimizer.weight_decay : config.feedback.weight_decay;
  training.local_steps = config.feedback.local_steps;
  training.prox_mu = config.feedback.prox_mu;
  training.scaffold = config.scaffold;
  training.batch = config.batch;
  std::uint8_t aggregate = 0;
  if (majority) aggregate |= kAggregateMajorityBit;
  if (config.downlink == DownlinkKind::kAggregate) aggregate |= kAggregateDownlinkBit;
  if (config.tie_rule == TieRule::kNegative) aggregate |= kAggregateTieNegativeBit;
  training.aggregate = aggregate;
  training.participation = config.participation;
  training.mode = kServerMode;
  training.gossip = 0;
  training.topology = 0;
  training.gossip_rounds = 0;
  if (const PrivacyParams privacy = NormalizedPrivacyParams(config.privacy);
      privacy.mode != PrivacyMode::kOff) {
    welcome.privacy = {static_cast<std::uint8_t>(privacy.mode),
                       privacy.clip,
                       privacy.noise_multiplier,
                       privacy.delta,
                       privacy.target_quantile,
                       privacy.clip_learning_rate,
                       privacy.count_noise};
  }
  if (wire::kSecureAggregationFrames && config.secure.enabled) {
    welcome.secure = {config.secure.threshold, config.secure.neighbours, config.secure.bound,
                      config.secure.signed_rounds};
  }
  return welcome;
}

Status FromWelcomeInfo(const wire::WelcomeInfo& welcome, RunConfig& out) {
  const wire::TrainingConfig& training = welcome.training;
  if (training.mode != kServerMode) {
    return Status::InvalidArgument(
        "the Welcome describes a run that is not a parameter-server run");
  }
  if (training.gossip != 0 || training.topology != 0 || training.gossip_rounds != 0) {
    return Status::InvalidArgument("gossip fields are set in a parameter-server Welcome");
  }
  if (welcome.workers < 1 || welcome.workers > kMaxWorkers) {
    return Status::InvalidArgument("the Welcome's worker count is outside 1..16384");
  }
  if (training.feedback > static_cast<std::uint8_t>(FeedbackKind::kSaef)) {
    return Status::InvalidArgument("unknown feedback kind");
  }
  if (training.optimizer > static_cast<std::uint8_t>(OptimizerKind::kSignum)) {
    return Status::InvalidArgument("unknown optimizer kind");
  }
  constexpr std::uint8_t kKnownAggregateBits =
      kAggregateMajorityBit | kAggregateDownlinkBit | kAggregateTieNegativeBit;
  if ((training.aggregate & ~kKnownAggregateBits) != 0) {
    return Status::InvalidArgument("unknown aggregation bits");
  }

  RunConfig config;
  config.layout = welcome.layout;
  config.codec = welcome.codec;
  config.feedback.kind = static_cast<FeedbackKind>(training.feedback);
  config.feedback.detach = training.detach;
  config.feedback.learning_rate = training.learning_rate;
  config.feedback.momentum = training.momentum;
  config.feedback.weight_decay = training.weight_decay;
  config.feedback.local_steps = training.local_steps;
  config.feedback.prox_mu = training.prox_mu;
  config.scaffold = training.scaffold;
  config.optimizer.kind = static_cast<OptimizerKind>(training.optimizer);
  config.optimizer.learning_rate = training.learning_rate;
  config.optimizer.momentum = training.momentum;
  config.optimizer.weight_decay = training.weight_decay;
  config.aggregation = (training.aggregate & kAggregateMajorityBit) != 0
                           ? AggregationKind::kMajority
                           : AggregationKind::kMean;
  config.downlink = (training.aggregate & kAggregateDownlinkBit) != 0 ? DownlinkKind::kAggregate
                                                                      : DownlinkKind::kModel;
  config.tie_rule = (training.aggregate & kAggregateTieNegativeBit) != 0 ? TieRule::kNegative
                                                                         : TieRule::kPositive;
  config.batch = training.batch;
  config.participation = training.participation;
  config.rounds = welcome.rounds;
  config.seed = welcome.seed;
  if (const wire::PrivacyConfig& privacy = welcome.privacy; privacy.mode != 0) {
    config.privacy = {static_cast<PrivacyMode>(privacy.mode),
                      privacy.clip,
                      privacy.noise_multiplier,
                      privacy.delta,
                      privacy.target_quantile,
                      privacy.clip_learning_rate,
                      privacy.count_noise};
  }
  // A build without secure aggregation reads none (its decoder leaves the field empty).
  if (const wire::SecureConfig& secure = welcome.secure;
      wire::kSecureAggregationFrames && secure.threshold != 0.0f) {
    config.secure = {true, secure.threshold, secure.neighbours, secure.bound,
                     secure.signed_rounds};
  }
  if (const Status check = ValidateRunConfig(config); !check.ok()) return check;
  EDGESGD_TRY(CheckSecureCohort(config, welcome.workers));
  out = config;
  return Status::Ok();
}

}  // namespace edgesgd::protocol
