#include "edgesgd/protocol/run_config.h"

#include <limits>

#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/downlink_feedback.h"
#include "edgesgd/core/scaffold.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/server_types.h"

namespace edgesgd::protocol {
namespace {

constexpr float kMaxFloat = std::numeric_limits<float>::max();
static_assert(kMaxLocalSteps == 4096 && kMaxBatch == 1048576 && kMaxSamplesPerRound == 16777216 &&
                  kMaxWorkers == 16384,
              "the refusal reasons below spell out the bounds");

// NaN fails every comparison, so each range test is written to be false for NaN.
constexpr bool PositiveFinite(float value) { return value > 0.0f && value <= kMaxFloat; }
constexpr bool NonNegativeFinite(float value) { return value >= 0.0f && value <= kMaxFloat; }
constexpr bool UnitInterval(float value) { return value >= 0.0f && value < 1.0f; }

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

Status CheckFeedback(const FeedbackParams& feedback) {
  switch (feedback.kind) {
    case FeedbackKind::kNone:
    case FeedbackKind::kEf:
    case FeedbackKind::kSaef:
      break;
    case FeedbackKind::kDef:
      if (!(feedback.detach >= 0.0f && feedback.detach <= 1.0f)) {
        return Status::InvalidArgument("detach coefficient must be in [0, 1]");
      }
      break;
    default:
      return Status::InvalidArgument("unknown feedback kind");
  }
  if (!PositiveFinite(feedback.learning_rate)) {
    return Status::InvalidArgument("learning rate must be positive and finite");
  }
  if (!UnitInterval(feedback.momentum))
    return Status::InvalidArgument("momentum must be in [0, 1)");
  if (!NonNegativeFinite(feedback.weight_decay)) {
    return Status::InvalidArgument("weight decay must be non-negative and finite");
  }
  if (feedback.local_steps < 1 || feedback.local_steps > kMaxLocalSteps) {
    return Status::InvalidArgument("local steps H must be in 1..4096");
  }
  if (!NonNegativeFinite(feedback.prox_mu)) {
    return Status::InvalidArgument("the proximal coefficient mu must be non-negative and finite");
  }
  // Belt and braces: core's own validation must agree with the field checks above.
  if (!ValidateFeedbackParams(feedback).ok()) {
    return Status::InvalidArgument("invalid feedback parameters");
  }
  return Status::Ok();
}

Status CheckMajority(const RunConfig& config) {
  EDGESGD_TRY_ASSIGN(const CodecParams votes, VoteForm(config.codec));
  if (!(votes == config.codec)) {
    return Status::InvalidArgument("majority vote needs plain signs (sign codec with unit scale)");
  }
  if (config.tie_rule != TieRule::kPositive && config.tie_rule != TieRule::kNegative) {
    return Status::InvalidArgument("unknown tie rule");
  }
  const OptimizerParams& optimizer = config.optimizer;
  if (optimizer.kind != OptimizerKind::kSignum) {
    return Status::InvalidArgument("majority vote runs the Signum optimizer");
  }
  if (!PositiveFinite(optimizer.learning_rate)) {
    return Status::InvalidArgument("Signum learning rate must be positive and finite");
  }
  if (!UnitInterval(optimizer.momentum)) {
    return Status::InvalidArgument("Signum momentum (beta) must be in [0, 1)");
  }
  if (!NonNegativeFinite(optimizer.weight_decay)) {
    return Status::InvalidArgument("Signum weight decay must be non-negative and finite");
  }
  if (config.feedback.local_steps != 1) {
    return Status::InvalidArgument(
        "majority vote takes one gradient per round (local steps H = 1)");
  }
  if (config.feedback.prox_mu != 0.0f) {
    return Status::InvalidArgument("majority vote takes one gradient per round: no proximal term");
  }
  return Status::Ok();
}

Status CheckPrivacy(const RunConfig& config) {
  const PrivacyParams& privacy = config.privacy;
  if (privacy.mode == PrivacyMode::kOff) return Status::Ok();
  if (!kDifferentialPrivacy) {
    return Status::InvalidArgument("this build leaves differential privacy out");
  }
  EDGESGD_TRY(ValidatePrivacyParams(privacy));
  if (config.aggregation != AggregationKind::kMean) {
    return Status::InvalidArgument(
        "differential privacy bounds and noises a mean of updates; majority vote is not one");
  }
  if (!KeepsNormBound(config.codec)) {
    return Status::InvalidArgument(
        "differential privacy needs a codec that never lengthens the clipped update; this one "
        "rounds stochastically or rescales (see docs/privacy.md for the codecs that qualify)");
  }
  if (privacy.mode == PrivacyMode::kCentral) {
    if (!KnownAggregations::AddsCentralNoise(config)) {
      return Status::InvalidArgument(
          "central noise needs the model downlink, or the aggregate downlink with a codec whose "
          "payloads sum: a re-compressed aggregate would keep unnoised sums in the server's "
          "residual");
    }
  }
  if (privacy.mode == PrivacyMode::kDistributed && !TraitsOf(config.codec).payload_sum) {
    return Status::InvalidArgument(
        "distributed noise needs every device to send the same coordinates (identity, rand_k "
        "or random_block), so that the shares of noise add up on each of them");
  }
  return Status::Ok();
}

Status CheckRobust(const RunConfig& config) {
  if (config.robust.rule == RobustRule::kNone) return Status::Ok();
  EDGESGD_TRY(ValidateRobustParams(config.robust));
  if (config.aggregation != AggregationKind::kMean) {
    return Status::InvalidArgument(
        "robust aggregation replaces the mean of updates; majority vote is not one");
  }
  if (config.downlink != DownlinkKind::kModel) {
    return Status::InvalidArgument(
        "robust aggregation broadcasts the model: use the model downlink");
  }
  if (config.privacy.mode != PrivacyMode::kOff) {
    return Status::InvalidArgument(
        "differential privacy calibrates its noise to a mean of clipped updates; a robust rule "
        "is not one");
  }
  if (config.scaffold) {
    return Status::InvalidArgument(
        "SCAFFOLD keeps its control variate the mean of the devices' changes; a robust rule "
        "would drop some of them");
  }
  if (config.secure.enabled) {
    return Status::InvalidArgument(
        "a robust rule compares the devices' updates; secure aggregation shows the server only "
        "their sum");
  }
  return Status::Ok();
}

Status CheckServerOptimizer(const RunConfig& config) {
  EDGESGD_TRY(ValidateServerOptimizerParams(config.server_optimizer));
  if (!ChangesFedAvg(config.server_optimizer)) return Status::Ok();
  if (config.aggregation != AggregationKind::kMean) {
    return Status::InvalidArgument(
        "a server optimizer moves the model by the mean update; majority vote moves it by the "
        "vote with Signum's learning rate");
  }
  if (config.downlink != DownlinkKind::kModel) {
    return Status::InvalidArgument(
        "with the aggregate downlink every worker applies the aggregate itself: a server "
        "optimizer needs the model downlink");
  }
  return Status::Ok();
}

Status CheckAsync(const RunConfig& config) {
  EDGESGD_TRY(ValidateAsyncParams(config.async));
  if (!IsAsynchronous(config.async)) return Status::Ok();
  if (config.aggregation != AggregationKind::kMean) {
    return Status::InvalidArgument(
        "buffered asynchronous aggregation weighs each update by its staleness; majority vote "
        "counts votes of one round");
  }
  if (config.downlink != DownlinkKind::kModel) {
    return Status::InvalidArgument(
        "asynchronous workers hold different model versions, so an aggregate downlink fits "
        "none of them: use the model downlink");
  }
  if (config.robust.rule != RobustRule::kNone) {
    return Status::InvalidArgument(
        "a robust rule compares the updates of one round; asynchronous aggregation has none");
  }
  if (config.privacy.mode != PrivacyMode::kOff) {
    return Status::InvalidArgument(
        "differential privacy's accounting assumes synchronous rounds of sampled devices");
  }
  if (config.scaffold) {
    return Status::InvalidArgument(
        "SCAFFOLD's corrections assume every update starts from the round's model and control "
        "variate; asynchronous workers train on older ones");
  }
  if (config.secure.enabled) {
    return Status::InvalidArgument(
        "secure aggregation masks the updates of one round's cohort; asynchronous aggregation "
        "takes updates one at a time");
  }
  return Status::Ok();
}

Status CheckScaffold(const RunConfig& config) {
  if (!config.scaffold) return Status::Ok();
  if (!kScaffold) return Status::InvalidArgument("this build leaves SCAFFOLD out");
  if (config.aggregation != AggregationKind::kMean) {
    return Status::InvalidArgument(
        "SCAFFOLD corrects local steps of error feedback; majority vote takes one gradient");
  }
  if (config.downlink != DownlinkKind::kModel) {
    return Status::InvalidArgument(
        "SCAFFOLD's control variate travels with the model: use the model downlink");
  }
  if (config.feedback.local_steps < 2) {
    return Status::InvalidArgument(
        "SCAFFOLD corrects the drift of several local steps: set local steps H to 2 or more");
  }
  if (SelectorStateFloats(config.codec, config.layout) != 0) {
    return Status::InvalidArgument(
        "SCAFFOLD's control changes cannot be compressed by a codec that selects from its own "
        "past updates (reg_top_k)");
  }
  if (config.privacy.mode != PrivacyMode::kOff) {
    return Status::InvalidArgument(
        "differential privacy bounds the model update alone; SCAFFOLD's control change would "
        "leave it unclipped");
  }
  if (FrameWithControlBytes(config, config.codec) == 0 ||
      FrameWithControlBytes(config, ModelCodec()) == 0) {
    return Status::InvalidArgument("the model and its control variate exceed one frame (1 GiB)");
  }
  return Status::Ok();
}

// qsgd's levels are summed in lanes, which needs every device to quantize with the same scale
// and level count.
Status CheckSecureQsgd(const QsgdParams& qsgd) {
  if (qsgd.shared_scale == 0.0f) {
    return Status::InvalidArgument(
        "secure aggregation sums qsgd's levels, which mean the same on every device only with one "
        "scale for all: set --shared-scale (the magnitude of the top level, e.g. the clipping "
        "bound of the updates)");
  }
  if (qsgd.schedule != QuantScheduleKind::kFixed) {
    return Status::InvalidArgument(
        "secure aggregation sums qsgd's levels, so every device must use the same level count: "
        "use --quant-schedule fixed");
  }
  return Status::Ok();
}

Status CheckSecure(const RunConfig& config) {
  const SecureAggregationParams& secure = config.secure;
  if (!secure.enabled) return Status::Ok();
  if (!wire::kSecureAggregationFrames) {
    return Status::InvalidArgument("this build leaves secure aggregation out");
  }
  EDGESGD_TRY(ValidateSecureParams(secure));
  // Majority vote masks its signs as 0/1 counts in lanes: any vote form, either downlink.
  if (config.aggregation == AggregationKind::kMajority) return Status::Ok();
  if (config.downlink != DownlinkKind::kModel) {
    return Status::InvalidArgument(
        "secure aggregation's sum is unmasked on the server, which broadcasts the model: use "
        "the model downlink");
  }
  if (const QsgdParams* qsgd = SecureQsgdParams(config); qsgd != nullptr) {
    EDGESGD_TRY(CheckSecureQsgd(*qsgd));
  } else if (const Result<PayloadShape> shape = EncodedShape(config.codec, config.layout);
             !TraitsOf(config.codec).payload_sum || !shape.ok() || shape.value().words != 0 ||
             shape.value().scales != 0) {
    return Status::InvalidArgument(
        "secure aggregation masks the same coordinates on every device, as plain values: use "
        "identity, random_block, rand_k or qsgd with a shared scale (top_k selects different "
        "coordinates on each device, so the masks could not cancel)");
  }
  if (config.scaffold) {
    return Status::InvalidArgument(
        "SCAFFOLD's control changes would travel unmasked beside the masked update");
  }
  if (AdaptsClipping(config.privacy)) {
    return Status::InvalidArgument(
        "adaptive clipping counts the devices that needed no clipping, one indicator each; "
        "secure aggregation does not carry them: use a fixed --dp-clip");
  }
  return Status::Ok();
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
  switch (config.aggregation) {
    case AggregationKind::kMean:
      if (const Status feedback = CheckFeedback(config.feedback); !feedback.ok()) {
        return feedback;
      }
      if (std::uint64_t{config.feedback.local_steps} * config.batch > kMaxSamplesPerRound) {
        return Status::InvalidArgument(
            "local steps H times the batch must be at most 16777216 samples per round");
      }
      if (config.downlink == DownlinkKind::kAggregate && !TraitsOf(config.codec).payload_sum &&
          !TraitsOf(config.codec).downlink_recompress) {
        return Status::InvalidArgument(
            "downlink aggregate needs a codec whose payloads sum or that the server can "
            "re-compress with; this one is neither (reg_top_k selects with each worker's "
            "posterior): use the model downlink");
      }
      EDGESGD_TRY(CheckScaffold(config));
      EDGESGD_TRY(CheckPrivacy(config));
      return CheckSecure(config);
    case AggregationKind::kMajority:
      EDGESGD_TRY(CheckMajority(config));
      EDGESGD_TRY(CheckScaffold(config));
      EDGESGD_TRY(CheckPrivacy(config));
      return CheckSecure(config);
  }
  return Status::InvalidArgument("unknown aggregation");
}

Status ValidateServerChoices(const RunConfig& config) {
  EDGESGD_TRY(CheckRobust(config));
  EDGESGD_TRY(CheckServerOptimizer(config));
  return CheckAsync(config);
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
    welcome.secure = {config.secure.threshold, config.secure.neighbours, config.secure.bound};
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
    config.secure = {true, secure.threshold, secure.neighbours, secure.bound};
  }
  if (const Status check = ValidateRunConfig(config); !check.ok()) return check;
  EDGESGD_TRY(CheckSecureCohort(config, welcome.workers));
  out = config;
  return Status::Ok();
}

}  // namespace edgesgd::protocol
