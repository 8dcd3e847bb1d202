// A gossip run's configuration: the names of algorithms and reject reasons, ValidateGossipConfig,
// and the codec and consensus-step rules of the compressed algorithms (CHOCO, BEER).

#include <cmath>
#include <limits>

#include "edgesgd/protocol/gossip_peer_session.h"

namespace edgesgd::protocol {
namespace {

constexpr float kMaxFloat = std::numeric_limits<float>::max();

}  // namespace

const char* GossipAlgorithmName(GossipAlgorithm algorithm) {
  switch (algorithm) {
    case GossipAlgorithm::kDpsgd:
      return "dpsgd";
    case GossipAlgorithm::kGradientTracking:
      return "gt";
    case GossipAlgorithm::kDetag:
      return "detag";
    case GossipAlgorithm::kChoco:
      return "choco";
    case GossipAlgorithm::kBeer:
      return "beer";
  }
  return "unknown";
}

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
  const GossipAlgorithm algorithm = config.algorithm;
  if (algorithm != GossipAlgorithm::kDpsgd && algorithm != GossipAlgorithm::kGradientTracking &&
      algorithm != GossipAlgorithm::kDetag && algorithm != GossipAlgorithm::kChoco &&
      algorithm != GossipAlgorithm::kBeer) {
    return Status::InvalidArgument("unknown gossip algorithm");
  }
  if (const Status row = ValidateMixingRow(config.mixing); !row.ok()) return row;
  if (config.layout.tensor_count() == 0) return Status::InvalidArgument("the model has no tensors");
  if (CompressesGossip(algorithm)) {
    EDGESGD_TRY(ValidateCodecParams(config.codec));
    EDGESGD_TRY(CheckChocoCodec(config.codec));
    if (!(config.consensus_step > 0.0f && config.consensus_step <= 1.0f)) {
      return Status::InvalidArgument("the consensus step gamma must be in (0, 1]");
    }
  } else {
    if (config.codec != ModelCodec()) {
      return Status::InvalidArgument(
          "D-PSGD, gradient tracking and DeTAG exchange dense models: the codec must be "
          "identity (CHOCO and BEER compress)");
    }
    if (config.consensus_step != 1.0f) {
      return Status::InvalidArgument(
          "the consensus step gamma is CHOCO's and BEER's: it must be 1 here");
    }
  }
  if (!config.public_copies && algorithm != GossipAlgorithm::kChoco) {
    return Status::InvalidArgument("only CHOCO can run without public copies (its naive baseline)");
  }
  if (GossipPeerSession::MaxFrameBytes(config) == 0) {
    return Status::InvalidArgument("the model is too large for one frame (1 GiB limit)");
  }
  if (config.rounds < 1) return Status::InvalidArgument("rounds must be at least 1");
  // Written so that NaN fails.
  if (!(config.learning_rate >= 0.0f && config.learning_rate <= kMaxFloat)) {
    return Status::InvalidArgument("learning rate must be non-negative and finite");
  }
  if (algorithm == GossipAlgorithm::kDetag) {
    if (config.gossip_steps < 1 || config.gossip_steps > kMaxGossipSteps) {
      return Status::InvalidArgument("DeTAG's gossip steps per round must be in 1..4096");
    }
    if (!(config.accel >= 0.0f && config.accel < 1.0f)) {
      return Status::InvalidArgument("accelerated gossip's eta_g must be in [0, 1)");
    }
  } else if (config.gossip_steps != 1 || config.accel != 0.0f) {
    return Status::InvalidArgument(
        "D-PSGD, gradient tracking, CHOCO and BEER take one plain gossip step per round (R = 1, "
        "eta_g = 0)");
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
  if (const auto* sign_params = std::get_if<SignParams>(&codec);
      sign_params != nullptr && sign_params->scale == SignScale::kUnit) {
    return Status::InvalidArgument(
        "sign with unit scales would add +-1 to every coordinate of a public copy: use "
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

}  // namespace edgesgd::protocol
