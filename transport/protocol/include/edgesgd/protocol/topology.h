#pragma once

// Gossip topologies and their mixing matrices (docs/algorithms.md §6). A topology is an undirected
// graph over peers 1..n; the mixing matrix W is symmetric and doubly stochastic by construction:
//
//   kMetropolisHastings  W_ij = 1 / (1 + max(deg_i, deg_j)) on every edge
//   kMaxDegree           W_ij = 1 / (1 + max_k deg_k) on every edge (uniform: 1/3 on a ring)
//   both                 W_ii = 1 - sum_{j != i} W_ij, W_ij = 0 between non-neighbours
//
// Off-diagonal weights depend on the unordered pair only, so W_ij == W_ji bit for bit, and each
// row's diagonal takes exactly what the row's edges leave, so rows (and, by symmetry, columns)
// sum to 1 up to one float rounding of the diagonal. On regular graphs (ring, torus, complete,
// exponential) the two rules agree: 1/3 on a ring of n >= 3, 1/n on the complete graph.
//
// Graphs are either described by a small value (kind, n, torus rows) whose neighbours are
// computed on demand, or given explicitly (kGraph: an adjacency the caller owns — read from a
// user's file, or drawn by MakeRandomRegularGraph). A peer asks for its own row (MixingRow:
// neighbour ids and weights in fixed arrays), which is all a GossipPeerSession needs. The
// whole-graph work (connectivity, the spectrum of W) runs once, before training, over caller
// scratch. No heap, no exceptions.

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
  kRing = 0,         // i ~ i-1, i+1 (mod n); n = 2 is one edge, n = 1 a lone peer
  kComplete = 1,     // every pair; n <= kMaxNeighbours + 1
  kTorus = 2,        // a rows x (n / rows) grid that wraps both ways (4 neighbours when both
                     // sides are >= 3; a side of 2 has one neighbour along it, a side of 1 none)
  kStar = 3,         // peer 1 is the hub, every other peer a leaf; n <= kMaxNeighbours + 1
  kExponential = 4,  // i ~ i +- 2^k (mod n) for every 2^k < n: log-diameter, ~2 log2 n neighbours
  kGraph = 5,        // an explicit adjacency (Topology::graph): a user's file, a random regular
                     // graph
};

enum class MixingRule : std::uint8_t {
  kMetropolisHastings = 0,
  kMaxDegree = 1,  // uniform 1 / (1 + max degree): 1/3 on a ring
};

// An explicit undirected graph in compressed rows, owned by the caller: the neighbours of peer
// i are neighbours[offsets[i - 1] .. offsets[i]), ascending; every edge is listed from both
// ends. ValidateTopology checks all of that.
struct AdjacencyView {
  std::span<const std::uint32_t> offsets;  // n + 1 entries, offsets[0] = 0
  std::span<const PeerId> neighbours;      // offsets[n] entries
};

struct Topology {
  TopologyKind kind = TopologyKind::kRing;
  std::uint32_t peers = 1;  // n; peers are 1..n
  // kTorus: rows of the grid, a divisor of n; 0 picks the largest divisor <= sqrt(n) (a prime n
  // gives 1 row: a ring).
  std::uint32_t torus_rows = 0;
  AdjacencyView graph = {};  // kGraph only
};

// Lower-case names ("ring", "metropolis_hastings"), for logs and flags; never null.
const char* TopologyKindName(TopologyKind kind);
const char* MixingRuleName(MixingRule rule);

// Checks a topology: a known kind, n in 1..kMaxTopologyPeers, torus rows dividing n, and no peer
// with more than kMaxNeighbours neighbours (complete graphs and stars up to 33 peers,
// exponential graphs up to 2^16). For kGraph also the adjacency itself: n + 1 non-decreasing
// offsets from 0 to the neighbour count, neighbour ids in 1..n, no peer its own neighbour, rows
// strictly ascending (no edge twice) and every edge listed from both ends. Connectivity needs
// scratch: see CheckConnected. Reads only `topology` (O(edges log degree) for kGraph); does not
// allocate. Errors: kInvalidArgument with a reason.
Status ValidateTopology(const Topology& topology);

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
Status ValidateMixingRow(const MixingRow& row);

// ---- Whole-graph checks and the spectrum of W (once, before training) ----

// Scratch words CheckConnected needs: one per peer.
constexpr std::size_t ConnectivityScratchWords(std::uint32_t peers) { return peers; }

// Whether every peer can reach every other one (a disconnected graph never reaches consensus:
// each component averages on its own). Union-find over the edges in `scratch`
// (ConnectivityScratchWords). Does not allocate. Errors: kInvalidArgument for an invalid
// topology, a scratch too small, or a disconnected graph (the reason says so).
Status CheckConnected(const Topology& topology, std::span<std::uint32_t> scratch);

// What the spectrum of W says about gossip on the topology.
struct MixingSpectrum {
  // max(|lambda_2(W)|, |lambda_n(W)|): the factor by which one plain gossip round shrinks the
  // worst disagreement; 0 for the complete graph and for n = 1.
  double lambda = 0.0;
  double spectral_gap = 1.0;     // 1 - lambda
  std::uint32_t iterations = 0;  // power iterations taken
  double residual = 0.0;         // ||W^2 v - mu v|| at the end (an upper bound on |mu error|)
};

// Bytes of scratch ComputeMixingSpectrum needs for `topology` (0 if it is invalid): three
// n-vectors of doubles plus W in compressed rows.
std::size_t SpectrumScratchBytes(const Topology& topology);

// Most power iterations ComputeMixingSpectrum takes (a ring of ~2000 peers converges within it).
inline constexpr std::uint32_t kMaxSpectrumIterations = 2'000'000;

// lambda of W under `rule` by power iteration with deflation: v is kept orthogonal to the
// all-ones vector (W's eigenvector of eigenvalue 1), and iterating W^2 — positive semi-definite —
// converges to lambda^2 however lambda_2 and lambda_n compare, even when they tie in magnitude.
// Stops when the residual ||W^2 v - mu v|| <= 1e-12, when mu (which only rises) stops moving
// (two eigenvalues closer than the residual), or after kMaxSpectrumIterations. Starts from a
// fixed pseudo-random vector, so the result is deterministic. Checks connectivity first.
// Writes `out`; uses `scratch` (SpectrumScratchBytes, any alignment); does not allocate.
// Errors: kInvalidArgument (invalid or disconnected topology, unknown rule — with a reason),
// kResourceExhausted (scratch too small).
Status ComputeMixingSpectrum(const Topology& topology, MixingRule rule,
                             std::span<std::byte> scratch, MixingSpectrum& out);

// Accelerated gossip's momentum for a mixing matrix with this lambda (docs/algorithms.md §6):
// eta_g = (1 - sqrt(1 - lambda^2)) / (1 + sqrt(1 - lambda^2)), in [0, 1). lambda is clamped to
// [0, 1).
float AcceleratedGossipRate(double lambda);

// DeTAG's gossip rounds per phase: R = max(1, floor(0.5 ln(n) / sqrt(1 - lambda))), capped at
// kMaxGossipSteps. Ring of 8 with weights 1/3: 2; 16: 6; 32: 15.
inline constexpr std::uint32_t kMaxGossipSteps = 4096;
std::uint32_t DetagGossipSteps(std::uint32_t peers, double lambda);

// ---- Random regular graphs ----

// Scratch words MakeRandomRegularGraph needs: the n * degree edge ends plus two per peer.
constexpr std::size_t RandomRegularScratchWords(std::uint32_t peers, std::uint32_t degree) {
  return static_cast<std::size_t>(peers) * degree + 2 * static_cast<std::size_t>(peers);
}

// Draws a connected simple graph on peers 1..n in which every peer has exactly `degree`
// neighbours, from `seed` (Philox; the same arguments give the same graph on every machine).
// Edge ends are paired at random, never into a self-loop or a repeated edge (a draw that gets
// stuck or comes out disconnected is redrawn, up to 100 times). Writes `offsets` (n + 1) and
// `neighbours` (n * degree, ascending per peer) for a Topology of kind kGraph; uses `scratch`
// (RandomRegularScratchWords). Does not allocate. Errors: kInvalidArgument (n < 2, degree 0,
// degree >= n, degree > kMaxNeighbours, n * degree odd, wrong buffer sizes, no connected graph
// found — each with a reason).
Status MakeRandomRegularGraph(std::uint32_t peers, std::uint32_t degree, std::uint64_t seed,
                              std::span<std::uint32_t> offsets, std::span<PeerId> neighbours,
                              std::span<std::uint32_t> scratch);

}  // namespace edgesgd::protocol
