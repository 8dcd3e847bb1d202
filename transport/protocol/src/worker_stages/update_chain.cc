#include "update_stage.h"

namespace edgesgd::protocol::internal {
namespace {

constexpr LocalSteps kLocalSteps;
constexpr ProximalTerm kProximalTerm;
constexpr ControlVariates kControlVariates;
constexpr Compression kCompression;
constexpr PrivacyNoise kPrivacyNoise;
constexpr SignumVote kSignumVote;
constexpr Masking kMasking;
constexpr VoteMasking kVoteMasking;

}  // namespace

std::size_t BuildUpdateChain(const RunConfig& config,
                             std::span<const UpdateStage*, kMaxUpdateStages> chain) {
  std::size_t count = 0;
  const bool secure = wire::kSecureAggregationFrames && config.secure.enabled;
  if (config.aggregation == AggregationKind::kMajority) {
    chain[count++] = &kSignumVote;
    if (secure) chain[count++] = &kVoteMasking;
    return count;
  }
  chain[count++] = &kLocalSteps;
  if (config.feedback.prox_mu != 0.0f) chain[count++] = &kProximalTerm;
  if (kScaffold && config.scaffold) chain[count++] = &kControlVariates;
  chain[count++] = &kCompression;
  if (IsPrivate(config.privacy)) chain[count++] = &kPrivacyNoise;
  if (secure) chain[count++] = &kMasking;
  return count;
}

}  // namespace edgesgd::protocol::internal
