// A gossip run's configuration: the names of reject reasons, ValidateGossipConfig (with the
// algorithm's own parameters checked by its rule), the codec and consensus-step rules of the
// compressed algorithms (CHOCO, BEER), and a peer's memory.

#include <algorithm>
#include <cmath>
#include <limits>

#include "edgesgd/protocol/gossip_peer_session.h"
#include "gossip/gossip_rule.h"

namespace edgesgd::protocol {
namespace {

constexpr float kMaxFloat = std::numeric_limits<float>::max();

}  // namespace

const char* GossipRejectReasonName(GossipRejectReason reason) {
  switch (reason) {
    case GossipRejectReason::kMalformed:
      return "malformed";
    case GossipRejectReason::kUnknownSender:
      return "unknown_sender";
    case GossipRejectReason::kUnexpectedMessage:
      return "unexpected_message";
    case GossipRejectReason::kWrongExchange:
      return "wrong_exchange";
    case GossipRejectReason::kWrongCodec:
      return "wrong_codec";
    case GossipRejectReason::kBadPayload:
      return "bad_payload";
    case GossipRejectReason::kLate:
      return "late";
    case GossipRejectReason::kStale:
      return "stale";
    case GossipRejectReason::kDuplicate:
      return "duplicate";
    case GossipRejectReason::kFuture:
      return "future";
    case GossipRejectReason::kOutOfOrder:
      return "out_of_order";
  }
  return "unknown";
}

Status ValidateGossipConfig(const GossipConfig& config) {
  const internal::GossipRule* rule = internal::FindGossipRule(config.algorithm);
  if (rule == nullptr) return Status::InvalidArgument("unknown gossip algorithm");
  if (const Status row = ValidateMixingRow(config.mixing); !row.ok()) return row;
  if (config.layout.tensor_count() == 0) return Status::InvalidArgument("the model has no tensors");
  EDGESGD_TRY(rule->Validate(config));
  if (GossipPeerSession::MaxFrameBytes(config) == 0) {
    return Status::InvalidArgument("the model is too large for one frame (1 GiB limit)");
  }
  if (config.rounds < 1) return Status::InvalidArgument("rounds must be at least 1");
  // Written so that NaN fails.
  if (!(config.learning_rate >= 0.0f && config.learning_rate <= kMaxFloat)) {
    return Status::InvalidArgument("learning rate must be non-negative and finite");
  }
  if (config.phase_batches < 1 || config.phase_batches > kMaxPhaseBatches) {
    return Status::InvalidArgument("gradient calls per round must be in 1..1048576");
  }
  if (std::uint64_t{config.rounds} * config.gossip_steps > std::uint64_t{1} << 40) {
    return Status::InvalidArgument("rounds * gossip steps is too large");
  }
  if (config.neighbour_deadline_ns == 0) {
    return Status::InvalidArgument("neighbour deadline must be > 0");
  }
  return Status::Ok();
}

Status CheckChocoCodec(const CodecParams& codec) {
  if (std::holds_alternative<RegTopKParams>(codec)) {
    return Status::InvalidArgument(
        "reg_top_k scores coordinates by a server's aggregate, which gossip has none of: use "
        "top_k (the same selection without it)");
  }
  const auto* sign_params = std::get_if<SignParams>(&codec);
  const auto* stochastic_params = std::get_if<StochasticSignParams>(&codec);
  if ((sign_params != nullptr && sign_params->scale == SignScale::kUnit) ||
      (stochastic_params != nullptr && stochastic_params->scale == SignScale::kUnit)) {
    return Status::InvalidArgument(
        "signs with unit scales would add +-1 to every coordinate of a public copy: use "
        "--sign-scale mean_abs");
  }
  if (const auto* rand_k_params = std::get_if<RandKParams>(&codec);
      rand_k_params != nullptr && rand_k_params->scaling == RandKScaling::kUnbiased) {
    return Status::InvalidArgument(
        "rand_k scaled by d/k is not contractive, so public copies cannot track the models: use "
        "--rand-k-scaling none");
  }
  if (const auto* qsgd_params = std::get_if<QsgdParams>(&codec); qsgd_params != nullptr) {
    std::uint32_t fewest = qsgd_params->levels;
    if (qsgd_params->schedule == QuantScheduleKind::kDq) {
      const Result<std::uint32_t> levels = QsgdLevelsForBits(qsgd_params->bits_min);
      if (!levels.ok()) return levels.status();
      fewest = levels.value();
    }
    // min(B/s^2, sqrt(B)/s) < 1 exactly when B < s^2.
    if (std::uint64_t{qsgd_params->bucket} >= std::uint64_t{fewest} * fewest) {
      return Status::InvalidArgument(
          "qsgd with a bucket of at least s^2 coordinates (s levels) has a variance bound of at "
          "least 1, so public copies cannot track the models: use more --bits (--bits-min) or a "
          "smaller --bucket");
    }
  }
  return Status::Ok();
}

Result<float> DefaultConsensusStep(const CodecParams& codec) {
  const float step = TraitsOf(codec).consensus_step;
  if (step == 0.0f) {
    return Status::InvalidArgument(
        "no consensus step was measured for this codec: choose one (the consensus step gamma)");
  }
  return step;
}

// ---- Memory ----

bool GossipPeerSession::ResynchronisesCopies(const GossipConfig& config) {
  return CompressesGossip(config.algorithm) && config.public_copies;
}

std::size_t GossipPeerSession::MaxFrameBytes(const GossipConfig& config) {
  const std::size_t sent = wire::MaxFrameBytes(config.codec, config.layout);
  if (!ResynchronisesCopies(config)) return sent;
  const std::size_t copy = wire::MaxFrameBytes(ModelCodec(), config.layout);
  return sent == 0 || copy == 0 ? 0 : std::max(sent, copy);
}

// Mirrors TakeBuffers.
std::size_t GossipPeerSession::ModelVectors(const GossipConfig& config) {
  const internal::GossipRule* rule = internal::FindGossipRule(config.algorithm);
  if (rule == nullptr) return 0;
  const std::size_t exchanged = rule->vectors();
  const std::size_t neighbour_state =
      rule->compressed() ? std::size_t{config.mixing.degree} + 1 : std::size_t{1};
  const std::size_t previous = config.accel != 0.0f ? 1 : 0;
  std::size_t count = exchanged * (2 + previous + neighbour_state) + 1;
  if (config.phase_batches > 1) ++count;
  if (exchanged == 2) count += config.gossip_steps > 1 ? 3 : 1;
  return count;
}

std::size_t GossipPeerSession::ArenaBytes(const GossipConfig& config) {
  const std::size_t d = config.layout.dimension();
  const std::size_t builder = wire::FrameBuilderBytes(config.codec, config.layout);
  const std::size_t vectors = ModelVectors(config);
  if (d == 0 || builder == 0 || vectors == 0) return 0;
  const std::size_t exchanged = TracksGradients(config.algorithm) ? 2 : 1;
  std::size_t resync = 0;
  if (ResynchronisesCopies(config)) {
    const std::size_t copy = wire::FrameBuilderBytes(ModelCodec(), config.layout);
    if (copy == 0) return 0;
    resync =
        exchanged * (edgesgd::ArenaBytes(copy) + edgesgd::ArenaBytes(kCopyRequestBuilderBytes));
  }
  const std::size_t scratch =
      CompressesGossip(config.algorithm) ? CodecScratchBytes(config.codec, config.layout) : 0;
  return vectors * ArenaBytesFor<float>(d) + 2 * exchanged * edgesgd::ArenaBytes(builder) +
         edgesgd::ArenaBytes(scratch) + edgesgd::ArenaBytes(kControlBuilderBytes) + resync;
}

}  // namespace edgesgd::protocol
