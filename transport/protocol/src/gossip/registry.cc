// The gossip algorithms, one rule each: a new algorithm is its own file and one line here.

#include <array>

#include "gossip_rule.h"

namespace edgesgd::protocol {
namespace {

struct Registration {
  GossipAlgorithm algorithm;
  const internal::GossipRule& (*rule)();
};

constexpr std::array kRegistrations{
    Registration{GossipAlgorithm::kDpsgd, &internal::DpsgdRule},
    Registration{GossipAlgorithm::kGradientTracking, &internal::GradientTrackingRule},
    Registration{GossipAlgorithm::kDetag, &internal::DetagRule},
    Registration{GossipAlgorithm::kChoco, &internal::ChocoRule},
    Registration{GossipAlgorithm::kBeer, &internal::BeerRule},
};

}  // namespace

namespace internal {

const GossipRule* FindGossipRule(GossipAlgorithm algorithm) {
  for (const Registration& registration : kRegistrations) {
    if (registration.algorithm == algorithm) return &registration.rule();
  }
  return nullptr;
}

}  // namespace internal

const char* GossipAlgorithmName(GossipAlgorithm algorithm) {
  const internal::GossipRule* rule = internal::FindGossipRule(algorithm);
  return rule == nullptr ? "unknown" : rule->name();
}

bool TracksGradients(GossipAlgorithm algorithm) {
  const internal::GossipRule* rule = internal::FindGossipRule(algorithm);
  return rule != nullptr && rule->vectors() == 2;
}

bool CompressesGossip(GossipAlgorithm algorithm) {
  const internal::GossipRule* rule = internal::FindGossipRule(algorithm);
  return rule != nullptr && rule->compressed();
}

}  // namespace edgesgd::protocol
