#pragma once

// Gossip topologies and their mixing matrices (ALGORITHMS.md §6). A topology is an undirected
// graph over peers 1..n; the mixing matrix W is symmetric and doubly stochastic by construction:
//
//   kMetropolisHastings  W_ij = 1 / (1 + max(deg_i, deg_j)) on every edge
//   kMaxDegree           W_ij = 1 / (1 + max_k deg_k) on every edge (uniform: 1/3 on a ring)
//   both                 W_ii = 1 - sum_{j != i} W_ij, W_ij = 0 between non-neighbours
//
// Off-diagonal weights depend on the unordered pair only, so W_ij == W_ji bit for bit, and each
// row's diagonal takes exactly what the row's edges leave, so rows (and, by symmetry, columns)
// sum to 1 up to one float rounding of the diagonal. On regular graphs (ring, complete) the two
// rules agree: 1/3 on a ring of n >= 3, 1/n on the complete graph.
//
// Nothing here stores the whole n x n matrix: graphs are described by a small value (kind, n),
// and a peer asks for its own row (MixingRow: neighbour ids and weights in fixed arrays), which
// is all a GossipPeerSession needs. No heap, no exceptions; everything is constexpr-friendly
// plain arithmetic.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/session.h"

namespace edgesgd::protocol {

// Most neighbours one gossip peer has. Sizes the fixed arrays of MixingRow and the per-neighbour
// state of a GossipPeerSession (a bit per neighbour in 64-bit masks).
inline constexpr std::size_t kMaxNeighbours = 32;

// Most peers a topology spans: device ids keep 24 bits in the random streams (StreamId).
inline constexpr std::uint32_t kMaxTopologyPeers = 0x00FFFFFFu;

enum class TopologyKind : std::uint8_t {
  kRing = 0,      // i ~ i-1, i+1 (mod n); n = 2 is one edge, n = 1 a lone peer
  kComplete = 1,  // every pair; n <= kMaxNeighbours + 1
};

enum class MixingRule : std::uint8_t {
  kMetropolisHastings = 0,
  kMaxDegree = 1,
};

struct Topology {
  TopologyKind kind = TopologyKind::kRing;
  std::uint32_t peers = 1;  // n; peers are 1..n

  friend constexpr bool operator==(const Topology&, const Topology&) = default;
};

// Lower-case names ("ring", "metropolis_hastings"), for logs and flags; never null.
const char* TopologyKindName(TopologyKind kind);
const char* MixingRuleName(MixingRule rule);

// Checks a topology: a known kind, n in 1..kMaxTopologyPeers, and no peer with more than
// kMaxNeighbours neighbours (complete graphs up to 33 peers). Reads only `topology`; does not
// allocate. Errors: kInvalidArgument with a reason.
ConfigCheck ValidateTopology(const Topology& topology);

// Number of neighbours of `peer`; 0 for an invalid topology or a peer outside 1..n. Reads only
// its arguments; does not allocate.
std::uint32_t Degree(const Topology& topology, PeerId peer);

// Largest degree of any peer (0 for an invalid topology). Does not allocate.
std::uint32_t MaxDegree(const Topology& topology);

// Whether `a` and `b` are distinct peers of the topology joined by an edge. Does not allocate.
bool AreNeighbours(const Topology& topology, PeerId a, PeerId b);

// Writes the neighbours of `peer`, ascending, to the front of `out` and returns how many.
// Reads its arguments; does not allocate. Errors: kInvalidArgument (invalid topology, peer
// outside 1..n), kResourceExhausted (`out` shorter than the degree; nothing written).
Result<std::size_t> Neighbours(const Topology& topology, PeerId peer, std::span<PeerId> out);

// W_ij of the topology under `rule` (the diagonal when i == j; 0 for non-neighbours and for peers
// or topologies that are invalid). Reads its arguments; does not allocate.
float MixingWeight(const Topology& topology, MixingRule rule, PeerId i, PeerId j);

// One peer's row of W: what a gossip peer mixes with. Neighbours are ascending; entries past
// `degree` are zero. A plain value (about 270 bytes), so configurations copy it freely.
struct MixingRow {
  PeerId peer = 0;           // this row's peer (1..n)
  std::uint32_t degree = 0;  // number of neighbours, <= kMaxNeighbours
  float self_weight = 1.0f;  // W_ii
  std::array<PeerId, kMaxNeighbours> neighbours{};
  std::array<float, kMaxNeighbours> weights{};  // W_ij, parallel to `neighbours`

  std::span<const PeerId> neighbour_ids() const {
    return std::span<const PeerId>(neighbours).first(degree <= kMaxNeighbours ? degree : 0);
  }
  std::span<const float> neighbour_weights() const {
    return std::span<const float>(weights).first(degree <= kMaxNeighbours ? degree : 0);
  }

  friend constexpr bool operator==(const MixingRow&, const MixingRow&) = default;
};

// Row `peer` of the topology's mixing matrix under `rule`. Reads its arguments; does not
// allocate. Errors: kInvalidArgument (invalid topology or rule, peer outside 1..n).
Result<MixingRow> MakeMixingRow(const Topology& topology, MixingRule rule, PeerId peer);

// Tolerance on |sum of a row - 1| that ValidateMixingRow accepts: rows computed elsewhere (a
// user-given matrix written in decimal) may be a few float roundings away from 1.
inline constexpr float kMixingRowTolerance = 1e-5f;

// Checks a row for use by a GossipPeerSession (whatever produced it): peer id not 0, degree
// <= kMaxNeighbours, neighbour ids distinct, not 0 and not the peer itself, neighbour weights
// finite and > 0, self weight finite and >= 0, and the row summing to 1 within
// kMixingRowTolerance. Symmetry across peers cannot be checked from one row; a matrix that is
// not doubly stochastic makes D-PSGD converge to a weighted, not the plain, average. Reads only
// `row`; does not allocate. Errors: kInvalidArgument with a reason.
ConfigCheck ValidateMixingRow(const MixingRow& row);

}  // namespace edgesgd::protocol
