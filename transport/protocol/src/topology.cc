#include "edgesgd/protocol/topology.h"

#include <cmath>

namespace edgesgd::protocol {
namespace {

bool IsPeer(const Topology& topology, PeerId peer) { return peer >= 1 && peer <= topology.peers; }

bool KnownRule(MixingRule rule) {
  return rule == MixingRule::kMetropolisHastings || rule == MixingRule::kMaxDegree;
}

// Degree without validation (callers have validated the topology and the peer).
std::uint32_t RawDegree(const Topology& topology) {
  switch (topology.kind) {
    case TopologyKind::kRing:
      return topology.peers >= 3 ? 2u : topology.peers - 1;
    case TopologyKind::kComplete:
      return topology.peers - 1;
  }
  return 0;
}

// Ring and complete graphs are regular, so every peer's degree is the graph's (the peer argument
// of Degree only matters for validation). Irregular graphs (star, user adjacency) will make this
// per-peer.
std::uint32_t PeerDegree(const Topology& topology, PeerId /*peer*/) { return RawDegree(topology); }

// W_ij of an edge. Computed from the unordered pair's degrees only, in one expression, so
// W_ij and W_ji are the same float.
float EdgeWeight(const Topology& topology, MixingRule rule, PeerId i, PeerId j) {
  std::uint32_t degree = 0;
  if (rule == MixingRule::kMetropolisHastings) {
    const std::uint32_t degree_i = PeerDegree(topology, i);
    const std::uint32_t degree_j = PeerDegree(topology, j);
    degree = degree_i > degree_j ? degree_i : degree_j;
  } else {
    degree = RawDegree(topology);
  }
  return 1.0f / static_cast<float>(1u + degree);
}

// W_ii: what the row's edges leave, summed in double (in ascending neighbour order) and rounded
// once, so the row sums to 1 within half a float ulp of the diagonal.
float DiagonalWeight(std::span<const float> edge_weights) {
  double sum = 0.0;
  for (const float weight : edge_weights) sum += static_cast<double>(weight);
  const double diagonal = 1.0 - sum;
  return diagonal > 0.0 ? static_cast<float>(diagonal) : 0.0f;
}

}  // namespace

const char* TopologyKindName(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kRing:
      return "ring";
    case TopologyKind::kComplete:
      return "complete";
  }
  return "unknown";
}

const char* MixingRuleName(MixingRule rule) {
  switch (rule) {
    case MixingRule::kMetropolisHastings:
      return "metropolis_hastings";
    case MixingRule::kMaxDegree:
      return "max_degree";
  }
  return "unknown";
}

ConfigCheck ValidateTopology(const Topology& topology) {
  if (topology.kind != TopologyKind::kRing && topology.kind != TopologyKind::kComplete) {
    return ConfigCheck::Invalid("unknown topology");
  }
  if (topology.peers < 1 || topology.peers > kMaxTopologyPeers) {
    return ConfigCheck::Invalid("a topology needs 1..16777215 peers");
  }
  if (RawDegree(topology) > kMaxNeighbours) {
    return ConfigCheck::Invalid("a peer would have more than 32 neighbours (complete graph > 33)");
  }
  return ConfigCheck::Ok();
}

std::uint32_t Degree(const Topology& topology, PeerId peer) {
  if (!ValidateTopology(topology).ok() || !IsPeer(topology, peer)) return 0;
  return PeerDegree(topology, peer);
}

std::uint32_t MaxDegree(const Topology& topology) {
  return ValidateTopology(topology).ok() ? RawDegree(topology) : 0;
}

bool AreNeighbours(const Topology& topology, PeerId a, PeerId b) {
  if (!ValidateTopology(topology).ok() || !IsPeer(topology, a) || !IsPeer(topology, b) || a == b) {
    return false;
  }
  switch (topology.kind) {
    case TopologyKind::kRing: {
      // Distance around the ring is 1 either way (n = 2: the one edge).
      const std::uint32_t n = topology.peers;
      const std::uint32_t forward = (b + n - a) % n;
      return forward == 1 || forward == n - 1;
    }
    case TopologyKind::kComplete:
      return true;
  }
  return false;
}

Result<std::size_t> Neighbours(const Topology& topology, PeerId peer, std::span<PeerId> out) {
  if (!ValidateTopology(topology).ok() || !IsPeer(topology, peer)) {
    return Status::InvalidArgument();
  }
  const std::uint32_t degree = PeerDegree(topology, peer);
  if (out.size() < degree) return Status::ResourceExhausted();
  std::size_t count = 0;
  switch (topology.kind) {
    case TopologyKind::kRing: {
      if (degree == 0) break;
      const std::uint32_t n = topology.peers;
      const PeerId previous = peer == 1 ? n : peer - 1;
      const PeerId next = peer == n ? 1 : peer + 1;
      if (previous == next) {  // n = 2
        out[count++] = previous;
      } else {
        out[count++] = previous < next ? previous : next;
        out[count++] = previous < next ? next : previous;
      }
      break;
    }
    case TopologyKind::kComplete:
      for (PeerId other = 1; other <= topology.peers; ++other) {
        if (other != peer) out[count++] = other;
      }
      break;
  }
  return count;
}

float MixingWeight(const Topology& topology, MixingRule rule, PeerId i, PeerId j) {
  if (i == j) {
    const Result<MixingRow> row = MakeMixingRow(topology, rule, i);
    return row.ok() ? row.value().self_weight : 0.0f;
  }
  if (!KnownRule(rule) || !AreNeighbours(topology, i, j)) return 0.0f;
  return EdgeWeight(topology, rule, i, j);
}

Result<MixingRow> MakeMixingRow(const Topology& topology, MixingRule rule, PeerId peer) {
  if (!KnownRule(rule)) return Status::InvalidArgument();
  MixingRow row;
  EDGESGD_TRY_ASSIGN(const std::size_t degree, Neighbours(topology, peer, row.neighbours));
  row.peer = peer;
  row.degree = static_cast<std::uint32_t>(degree);
  for (std::size_t k = 0; k < degree; ++k) {
    row.weights[k] = EdgeWeight(topology, rule, peer, row.neighbours[k]);
  }
  row.self_weight = DiagonalWeight(row.neighbour_weights());
  return row;
}

ConfigCheck ValidateMixingRow(const MixingRow& row) {
  if (row.peer == 0) return ConfigCheck::Invalid("a gossip peer id must not be 0");
  if (row.degree > kMaxNeighbours) {
    return ConfigCheck::Invalid("a mixing row has more than 32 neighbours");
  }
  const std::span<const PeerId> ids = row.neighbour_ids();
  const std::span<const float> weights = row.neighbour_weights();
  double sum = 0.0;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] == 0 || ids[k] == row.peer) {
      return ConfigCheck::Invalid("a neighbour id is 0 or the peer itself");
    }
    for (std::size_t m = 0; m < k; ++m) {
      if (ids[m] == ids[k]) return ConfigCheck::Invalid("a neighbour appears twice");
    }
    if (!(std::isfinite(weights[k]) && weights[k] > 0.0f)) {
      return ConfigCheck::Invalid("neighbour weights must be positive and finite");
    }
    sum += static_cast<double>(weights[k]);
  }
  if (!(std::isfinite(row.self_weight) && row.self_weight >= 0.0f)) {
    return ConfigCheck::Invalid("the self weight must be non-negative and finite");
  }
  sum += static_cast<double>(row.self_weight);
  if (!(std::fabs(sum - 1.0) <= static_cast<double>(kMixingRowTolerance))) {
    return ConfigCheck::Invalid("a mixing row must sum to 1");
  }
  return ConfigCheck::Ok();
}

}  // namespace edgesgd::protocol
