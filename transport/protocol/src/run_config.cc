#include "edgesgd/protocol/run_config.h"

#include <limits>

#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/downlink_feedback.h"

namespace edgesgd::protocol {
namespace {

constexpr float kMaxFloat = std::numeric_limits<float>::max();

// NaN fails every comparison, so each range test is written to be false for NaN.
constexpr bool PositiveFinite(float value) { return value > 0.0f && value <= kMaxFloat; }
constexpr bool NonNegativeFinite(float value) { return value >= 0.0f && value <= kMaxFloat; }
constexpr bool UnitInterval(float value) { return value >= 0.0f && value < 1.0f; }

Status CheckCodec(const CodecParams& codec, const TensorLayout& layout) {
  switch (codec.kind) {
    case CodecKind::kIdentity:
      break;
    case CodecKind::kTopK:
    case CodecKind::kRandK:
      if (!(codec.k_ratio > 0.0f && codec.k_ratio <= 1.0f)) {
        return Status::InvalidArgument("k ratio must be in (0, 1]");
      }
      if (codec.kind == CodecKind::kRandK && codec.rand_k_scaling != RandKScaling::kNone &&
          codec.rand_k_scaling != RandKScaling::kUnbiased) {
        return Status::InvalidArgument("unknown rand_k scaling");
      }
      break;
    case CodecKind::kRegTopK:
      if (!(codec.k_ratio > 0.0f && codec.k_ratio <= 1.0f)) {
        return Status::InvalidArgument("k ratio must be in (0, 1]");
      }
      if (!ValidRegTopKMu(codec.reg_top_k_mu)) {
        return Status::InvalidArgument("reg_top_k mu must be positive and finite");
      }
      if (!ValidRegTopKQ(codec.reg_top_k_q)) {
        return Status::InvalidArgument("reg_top_k Q must be positive and finite");
      }
      break;
    case CodecKind::kRandomBlock:
      if (codec.block_ratio < 1) return Status::InvalidArgument("block ratio must be at least 1");
      break;
    case CodecKind::kSign:
      if (codec.sign_scale != SignScale::kMeanAbs && codec.sign_scale != SignScale::kUnit) {
        return Status::InvalidArgument("unknown sign scale");
      }
      break;
    case CodecKind::kQsgd:
      if (codec.qsgd_levels < 1 || codec.qsgd_levels > kMaxQsgdLevels) {
        return Status::InvalidArgument("qsgd levels must be in 1..32767 (2..16 bits)");
      }
      if (codec.qsgd_bucket < 1) return Status::InvalidArgument("qsgd bucket must be at least 1");
      break;
    default:
      return Status::InvalidArgument("unknown codec");
  }
  // Anything the per-field checks above missed (the codec's own Shape is the authority).
  if (!EncodedShape(codec, layout).ok()) return Status::InvalidArgument("invalid codec parameters");
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
  if (!UnitInterval(feedback.momentum)) return Status::InvalidArgument("momentum must be in [0, 1)");
  if (!NonNegativeFinite(feedback.weight_decay)) {
    return Status::InvalidArgument("weight decay must be non-negative and finite");
  }
  if (feedback.local_steps < 1) return Status::InvalidArgument("local steps H must be at least 1");
  // Belt and braces: core's own validation must agree with the field checks above.
  if (!ValidateFeedbackParams(feedback).ok()) {
    return Status::InvalidArgument("invalid feedback parameters");
  }
  return Status::Ok();
}

Status CheckQuantSchedule(const RunConfig& config) {
  const QuantScheduleParams& schedule = config.quant_schedule;
  switch (schedule.kind) {
    case QuantScheduleKind::kFixed:
      return Status::Ok();
    case QuantScheduleKind::kDq:
      break;
    default:
      return Status::InvalidArgument("unknown quantization schedule");
  }
  if (config.codec.kind != CodecKind::kQsgd) {
    return Status::InvalidArgument("a dynamic quantization schedule needs the qsgd codec");
  }
  if (config.aggregation != AggregationKind::kMean) {
    return Status::InvalidArgument("a dynamic quantization schedule needs mean aggregation");
  }
  if (schedule.bits_min < kMinQsgdBits || schedule.bits_max > kMaxQsgdBits ||
      schedule.bits_min > schedule.bits_max) {
    return Status::InvalidArgument("quantization bits must satisfy 2 <= min <= max <= 16");
  }
  if (!PositiveFinite(schedule.dq_k)) {
    return Status::InvalidArgument("the DQ-SGD constant K must be positive and finite");
  }
  if (!(schedule.dq_rho > 0.0f && schedule.dq_rho <= 1.0f)) {
    return Status::InvalidArgument("the DQ-SGD contraction rho must be in (0, 1]");
  }
  if (!ValidateQuantScheduleParams(schedule).ok()) {
    return Status::InvalidArgument("invalid quantization schedule parameters");
  }
  if (config.codec.qsgd_levels != QsgdLevelsForBits(schedule.bits_max).value()) {
    return Status::InvalidArgument(
        "with a dynamic quantization schedule the codec's qsgd levels must be those of the "
        "maximum bits (frames are sized for it)");
  }
  return Status::Ok();
}

Status CheckMajority(const RunConfig& config) {
  if (config.codec.kind != CodecKind::kSign) {
    return Status::InvalidArgument("majority vote needs the sign codec");
  }
  if (config.codec.sign_scale != SignScale::kUnit) {
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
    return Status::InvalidArgument("majority vote takes one gradient per round (local steps H = 1)");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateRunConfig(const RunConfig& config) {
  if (config.layout.tensor_count() == 0) return Status::InvalidArgument("the model has no tensors");
  if (wire::MaxFrameBytes(ModelCodec(), config.layout) == 0) {
    return Status::InvalidArgument("the model is too large for one frame (1 GiB limit)");
  }
  if (const Status codec = CheckCodec(config.codec, config.layout); !codec.ok()) {
    return codec;
  }
  if (config.rounds < 1) return Status::InvalidArgument("rounds must be at least 1");
  if (const Status schedule = CheckQuantSchedule(config); !schedule.ok()) return schedule;
  if (config.batch < 1) return Status::InvalidArgument("batch size must be at least 1");
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
      if (config.downlink == DownlinkKind::kAggregate && !SupportsPayloadSum(config.codec.kind) &&
          !SupportsDownlinkFeedback(config.codec.kind)) {
        return Status::InvalidArgument(
            "downlink aggregate needs a codec whose payloads sum (identity, rand_k, "
            "random_block), one the server can re-compress with (top_k, sign, qsgd), or "
            "majority vote");
      }
      return Status::Ok();
    case AggregationKind::kMajority:
      return CheckMajority(config);
  }
  return Status::InvalidArgument("unknown aggregation");
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
  if (config.quant_schedule.kind == QuantScheduleKind::kFixed) {
    out.quant_schedule = QuantScheduleParams{};
  }
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
  training.batch = config.batch;
  std::uint8_t aggregate = 0;
  if (majority) aggregate |= kAggregateMajorityBit;
  if (config.downlink == DownlinkKind::kAggregate) aggregate |= kAggregateDownlinkBit;
  if (config.tie_rule == TieRule::kNegative) aggregate |= kAggregateTieNegativeBit;
  training.aggregate = aggregate;
  training.participation = config.participation;
  const QuantScheduleParams& schedule = config.quant_schedule;
  training.quant_schedule = static_cast<std::uint8_t>(schedule.kind);
  if (schedule.kind != QuantScheduleKind::kFixed) {
    // Valid schedules keep the bit widths within 2..16.
    training.quant_bits_min = static_cast<std::uint8_t>(schedule.bits_min);
    training.quant_bits_max = static_cast<std::uint8_t>(schedule.bits_max);
    training.quant_k = schedule.dq_k;
    training.quant_rho = schedule.dq_rho;
  }
  training.mode = kServerMode;
  training.gossip = 0;
  training.topology = 0;
  training.gossip_rounds = 0;
  return welcome;
}

Status FromWelcomeInfo(const wire::WelcomeInfo& welcome, RunConfig& out) {
  const wire::TrainingConfig& training = welcome.training;
  if (training.mode != kServerMode) {
    return Status::InvalidArgument("the Welcome describes a run that is not a parameter-server run");
  }
  if (training.quant_schedule >= kQuantScheduleCount) {
    return Status::InvalidArgument("unknown quantization schedule");
  }
  const bool fixed_schedule =
      training.quant_schedule == static_cast<std::uint8_t>(QuantScheduleKind::kFixed);
  if (fixed_schedule && (training.quant_bits_min != 0 || training.quant_bits_max != 0 ||
                         training.quant_k != 0.0f || training.quant_rho != 0.0f)) {
    return Status::InvalidArgument("quantization-schedule parameters are set beside a fixed schedule");
  }
  if (training.gossip != 0 || training.topology != 0 || training.gossip_rounds != 0) {
    return Status::InvalidArgument("gossip fields are set in a parameter-server Welcome");
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
  if (!fixed_schedule) {
    config.quant_schedule.kind = static_cast<QuantScheduleKind>(training.quant_schedule);
    config.quant_schedule.bits_min = training.quant_bits_min;
    config.quant_schedule.bits_max = training.quant_bits_max;
    config.quant_schedule.dq_k = training.quant_k;
    config.quant_schedule.dq_rho = training.quant_rho;
  }
  config.feedback.kind = static_cast<FeedbackKind>(training.feedback);
  config.feedback.detach = training.detach;
  config.feedback.learning_rate = training.learning_rate;
  config.feedback.momentum = training.momentum;
  config.feedback.weight_decay = training.weight_decay;
  config.feedback.local_steps = training.local_steps;
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
  if (const Status check = ValidateRunConfig(config); !check.ok()) return check;
  out = config;
  return Status::Ok();
}

}  // namespace edgesgd::protocol
