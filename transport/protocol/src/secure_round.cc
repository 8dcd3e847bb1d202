#include "edgesgd/protocol/secure_round.h"

#include <algorithm>
#include <new>
#include <type_traits>

#include "edgesgd/secagg/lanes.h"
#include "edgesgd/secagg/qsgd_levels.h"

namespace edgesgd::protocol {
namespace {

secagg::ServerLimits LimitsOf(const RunConfig& config, std::uint32_t workers) {
  return {workers, MaxSecureNeighbours(config.secure, workers),
          static_cast<std::uint32_t>(SecureInputWords(config, workers))};
}

bool Votes(const RunConfig& config) { return config.aggregation == AggregationKind::kMajority; }

}  // namespace

std::uint8_t SecureRound::PhaseOf(wire::SecurePhase phase) {
  switch (phase) {
    case wire::SecurePhase::kKeys:
      return kKeys;
    case wire::SecurePhase::kShares:
      return kShares;
    case wire::SecurePhase::kMaskedInput:
      return kInputs;
    case wire::SecurePhase::kConsistency:
      return kConsistency;
    case wire::SecurePhase::kUnmasking:
      return kUnmasking;
    default:
      return kUnmasking + 1;
  }
}

std::size_t SecureRound::ArenaBytes(const RunConfig& config, std::uint32_t workers) {
  if (!config.secure.enabled || workers < 2 || SecureInputWords(config, workers) == 0) return 0;
  const Result<PayloadShape> shape = EncodedShape(config.codec, config.layout);
  if (!shape.ok()) return 0;
  const std::size_t stage = secagg::ServerStage::ArenaBytes(LimitsOf(config, workers));
  if (stage == 0) return 0;
  const std::size_t common = edgesgd::ArenaBytes(sizeof(secagg::ServerStage)) + stage +
                             ArenaBytesFor<std::uint8_t>(std::size_t{workers} + 1);
  // Majority vote unpacks each lane's count; qsgd's level sums decode to d values; the mean
  // decodes the sum into a payload.
  if (Votes(config)) {
    return common + ArenaBytesFor<std::uint32_t>(32 * MajorityVote::WordsFor(config.layout));
  }
  if (SecureQsgdParams(config) != nullptr) {
    return common + ArenaBytesFor<float>(config.layout.dimension());
  }
  return common + ArenaBytesFor<std::uint32_t>(shape.value().indices) +
         ArenaBytesFor<float>(shape.value().values) +
         edgesgd::ArenaBytes(CodecScratchBytes(config.codec, config.layout));
}

Status SecureRound::Init(Arena& arena, const CodecRegistry& codecs, const RunConfig& config,
                         std::uint32_t workers, const secagg::Verifier* verifier) {
  if (!config.secure.enabled) return Status::InvalidArgument("secure aggregation is off");
  if (config.secure.signed_rounds && verifier == nullptr) {
    return Status::InvalidArgument(
        "signed secure aggregation needs the devices' verifying keys on the server");
  }
  if (workers < 2) {
    return Status::InvalidArgument("secure aggregation needs at least two workers");
  }
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(config.codec, config.layout));
  static_assert(alignof(secagg::ServerStage) <= kArenaAlignment &&
                std::is_trivially_destructible_v<secagg::ServerStage>);
  EDGESGD_TRY_ASSIGN(const std::span<std::byte> storage,
                     arena.AllocateBytes(sizeof(secagg::ServerStage)));
  stage_ = ::new (static_cast<void*>(storage.data())) secagg::ServerStage();
  EDGESGD_TRY(stage_->Init(arena, LimitsOf(config, workers)));
  EDGESGD_TRY(stage_->SetVerifier(config.secure.signed_rounds ? verifier : nullptr));
  EDGESGD_TRY_ASSIGN(sent_, arena.Allocate<std::uint8_t>(std::size_t{workers} + 1));
  words_ = static_cast<std::uint32_t>(SecureInputWords(config, workers));
  if (Votes(config)) {
    lane_bits_ = SecureVoteLaneBits(workers);
    EDGESGD_TRY_ASSIGN(counts_,
                       arena.Allocate<std::uint32_t>(32 * MajorityVote::WordsFor(config.layout)));
  } else if (const QsgdParams* qsgd = SecureQsgdParams(config); qsgd != nullptr) {
    EDGESGD_TRY_ASSIGN(levels_,
                       secagg::ChooseSharedScaleLevels(qsgd->shared_scale, qsgd->levels, workers));
    EDGESGD_TRY_ASSIGN(values_, arena.Allocate<float>(config.layout.dimension()));
  } else {
    EDGESGD_TRY_ASSIGN(format_, SecureFixedPoint(config.secure, workers));
    EDGESGD_TRY_ASSIGN(indices_, arena.Allocate<std::uint32_t>(shape.indices));
    EDGESGD_TRY_ASSIGN(values_, arena.Allocate<float>(shape.values));
    EDGESGD_TRY_ASSIGN(scratch_,
                       arena.AllocateBytes(CodecScratchBytes(config.codec, config.layout)));
  }
  codecs_ = &codecs;
  config_ = &config;
  return Status::Ok();
}

Status SecureRound::Begin(std::uint32_t round, std::span<const std::uint32_t> cohort,
                          std::uint64_t graph_seed) {
  Abort();
  std::fill(sent_.begin(), sent_.end(), std::uint8_t{0});
  const auto size = static_cast<std::uint32_t>(cohort.size());
  const secagg::RoundPlan plan{round, SecureThreshold(config_->secure, size),
                               config_->secure.neighbours, graph_seed, words_};
  EDGESGD_TRY(stage_->Start(plan, cohort));
  round_ = round;
  phase_ = kKeys;
  masked_bits_ = 0;
  open_ = true;
  return Status::Ok();
}

std::optional<RejectReason> SecureRound::Add(PeerId peer, const wire::SecureView& message) {
  if (!open_) return RejectReason::kUnexpectedMessage;
  const std::uint8_t phase = PhaseOf(message.fields.phase);
  if (phase > kUnmasking) return RejectReason::kUnexpectedMessage;
  if (phase == kKeys && phase_ > kKeys) {
    // Keys of a device that already advertised other ones: it restarted and lost its secrets,
    // so it leaves rather than spoil the round with shares of keys its neighbours never saw.
    const Result<bool> left = stage_->LeaveIfRestarted(peer, message);
    if (left.ok() && left.value()) ++restarts_left_;
    return RejectReason::kLate;
  }
  if (phase < phase_) return RejectReason::kLate;
  if (phase > phase_) return RejectReason::kFuture;
  if (!stage_->server().Expects(peer)) {
    // It sent this phase already, or it is not (or no longer) in the round.
    if (peer >= sent_.size()) return RejectReason::kNotSelected;
    return sent_[peer] > phase_ ? RejectReason::kDuplicate : RejectReason::kLate;
  }
  const Status added = stage_->Add(peer, message);
  if (!added.ok()) {
    switch (added.code()) {
      case StatusCode::kNotFound:
        return RejectReason::kNotSelected;
      case StatusCode::kAlreadyExists:
        return RejectReason::kDuplicate;
      case StatusCode::kFailedPrecondition:
        return RejectReason::kUnexpectedMessage;
      default:
        return RejectReason::kBadPayload;
    }
  }
  sent_[peer] = static_cast<std::uint8_t>(phase_ + 1);
  if (phase_ == kInputs) masked_bits_ += 32 * std::uint64_t{message.masked.size()};
  return std::nullopt;
}

Result<bool> SecureRound::Close() {
  if (!open_) return Status::FailedPrecondition("no secure round is open");
  if (const Status closed = stage_->Close(); !closed.ok()) {
    open_ = false;
    return closed;
  }
  if (phase_ == kUnmasking) return true;
  ++phase_;
  if (phase_ == kConsistency && !stage_->server().signs()) ++phase_;
  return false;
}

Result<std::uint32_t> SecureRound::AddSum(Aggregation& aggregation, std::span<const float> model) {
  const secagg::Server& server = stage_->server();
  open_ = false;
  if (server.phase() != secagg::Server::Phase::kFinished) {
    return Status::FailedPrecondition("the secure round has no sum");
  }
  const auto survivors = static_cast<std::uint32_t>(server.survivor_count());
  if (!counts_.empty()) {
    // Each lane's sum is its coordinate's count of +1 votes: that, and no vote, is learnt.
    secagg::UnpackLaneSums(server.sum(), counts_.size(), lane_bits_, counts_);
    EDGESGD_TRY(aggregation.AddVoteCounts(counts_, survivors));
    return survivors;
  }
  const CodecContext context{config_->seed, round_, 0};
  if (levels_.lane_bits != 0) {
    // The levels' sum exceeds what a qsgd payload holds: it is added as d dense values.
    secagg::DecodeSharedScaleLevelSum(levels_, server.sum(), survivors, values_);
    const PayloadView sum({}, values_, {}, {});
    EDGESGD_TRY(aggregation.AddSum(IdentityParams{}, sum, context, survivors));
    return survivors;
  }
  // The shared coordinates (random_block's starts) are the round's wherever they are computed:
  // an encode of any vector writes them, and its values are then replaced by the sum's.
  const PayloadSpans spans{indices_, values_, {}, {}};
  EDGESGD_TRY(codecs_->Encode(config_->codec, config_->layout, context, model, spans, scratch_));
  secagg::DecodeFixedPointSum(format_, server.sum(), values_);
  const PayloadView payload(indices_, values_, {}, {});
  EDGESGD_TRY(aggregation.AddSum(config_->codec, payload, context, survivors));
  return survivors;
}

void SecureRound::Abort() {
  if (stage_ != nullptr) stage_->Abort();
  open_ = false;
}

}  // namespace edgesgd::protocol
