#include "edgesgd/protocol/topology.h"

#include <algorithm>
#include <cmath>
#include <cstring>


namespace edgesgd::protocol {
namespace {

// Candidate neighbours before de-duplication: exponential graphs list +-2^k for up to 24 values
// of k (n < 2^24), tori 4, rings 2; complete graphs and stars list at most kMaxNeighbours
// (validation caps them first).
constexpr std::size_t kMaxCandidates = 2 * 24 + kMaxNeighbours;

bool IsPeer(const Topology& topology, PeerId peer) { return peer >= 1 && peer <= topology.peers; }

bool KnownRule(MixingRule rule) {
  return rule == MixingRule::kMetropolisHastings || rule == MixingRule::kMaxDegree;
}

bool KnownKind(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kRing:
    case TopologyKind::kComplete:
    case TopologyKind::kTorus:
    case TopologyKind::kStar:
    case TopologyKind::kExponential:
    case TopologyKind::kGraph:
      return true;
  }
  return false;
}

// The torus's rows: the configured divisor, or the largest divisor <= sqrt(n).
std::uint32_t TorusRows(const Topology& topology) {
  if (topology.torus_rows != 0) return topology.torus_rows;
  std::uint32_t rows = 1;
  for (std::uint32_t r = 1; static_cast<std::uint64_t>(r) * r <= topology.peers; ++r) {
    if (topology.peers % r == 0) rows = r;
  }
  return rows;
}

// Writes the candidate neighbours of `peer` of an implicit (not kGraph) topology, possibly with
// repeats and the peer itself; returns how many. The caller sorts and de-duplicates.
std::size_t ImplicitCandidates(const Topology& topology, PeerId peer,
                               std::array<PeerId, kMaxCandidates>& out) {
  const std::uint32_t n = topology.peers;
  const std::uint32_t index = peer - 1;  // 0-based
  std::size_t count = 0;
  // Peer at 0-based offset +-step around a cycle of `length` starting at `base`.
  const auto around = [&](std::uint32_t base, std::uint32_t position, std::uint32_t length,
                          std::uint32_t step) {
    const std::uint32_t shift = step % length;
    out[count++] = base + (position + shift) % length + 1;
    out[count++] = base + (position + length - shift) % length + 1;
  };
  switch (topology.kind) {
    case TopologyKind::kRing:
      around(0, index, n, 1);
      break;
    case TopologyKind::kComplete:
      for (PeerId other = 1; other <= n && count < kMaxCandidates; ++other) out[count++] = other;
      break;
    case TopologyKind::kTorus: {
      const std::uint32_t rows = TorusRows(topology);
      const std::uint32_t columns = n / rows;
      const std::uint32_t row = index / columns;
      const std::uint32_t column = index % columns;
      around(row * columns, column, columns, 1);  // left and right in the row
      // Up and down in the column: rows are `columns` apart.
      out[count++] = ((row + 1) % rows) * columns + column + 1;
      out[count++] = ((row + rows - 1) % rows) * columns + column + 1;
      break;
    }
    case TopologyKind::kStar:
      if (peer == 1) {
        for (PeerId other = 2; other <= n && count < kMaxCandidates; ++other) out[count++] = other;
      } else {
        out[count++] = 1;
      }
      break;
    case TopologyKind::kExponential:
      for (std::uint64_t step = 1; step < n && count + 2 <= kMaxCandidates; step *= 2) {
        around(0, index, n, static_cast<std::uint32_t>(step));
      }
      break;
    case TopologyKind::kGraph:
      break;
  }
  return count;
}

// The neighbours of `peer`, ascending, into `out`; returns how many (no validation: callers
// have validated the topology and the peer). kGraph rows are copied; implicit rows are sorted
// and de-duplicated. Returns kMaxCandidates + 1 if `out` is too small.
std::size_t RawNeighbours(const Topology& topology, PeerId peer, std::span<PeerId> out) {
  if (topology.kind == TopologyKind::kGraph) {
    const std::uint32_t begin = topology.graph.offsets[peer - 1];
    const std::uint32_t end = topology.graph.offsets[peer];
    if (end - begin > out.size()) return kMaxCandidates + 1;
    const std::span<const PeerId> row = topology.graph.neighbours.subspan(begin, end - begin);
    std::copy(row.begin(), row.end(), out.begin());
    return end - begin;
  }
  std::array<PeerId, kMaxCandidates> candidates{};
  const std::size_t count = ImplicitCandidates(topology, peer, candidates);
  std::sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(count));
  std::size_t unique = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const PeerId other = candidates[k];
    if (other == peer || (k > 0 && other == candidates[k - 1])) continue;
    if (unique == out.size()) return kMaxCandidates + 1;
    out[unique++] = other;
  }
  return unique;
}

// Degree without validation. Regular kinds have one degree; the rest are computed per peer.
std::uint32_t PeerDegree(const Topology& topology, PeerId peer) {
  switch (topology.kind) {
    case TopologyKind::kComplete:
      return topology.peers - 1;
    case TopologyKind::kStar:
      return peer == 1 ? topology.peers - 1 : (topology.peers > 1 ? 1 : 0);
    case TopologyKind::kGraph:
      return topology.graph.offsets[peer] - topology.graph.offsets[peer - 1];
    case TopologyKind::kRing:
    case TopologyKind::kTorus:
    case TopologyKind::kExponential: {
      std::array<PeerId, kMaxCandidates> row{};
      return static_cast<std::uint32_t>(RawNeighbours(topology, peer, row));
    }
  }
  return 0;
}

// Largest degree without validation (O(n) for kGraph).
std::uint32_t RawMaxDegree(const Topology& topology) {
  switch (topology.kind) {
    case TopologyKind::kComplete:
    case TopologyKind::kStar:
      return topology.peers - 1;
    case TopologyKind::kRing:
    case TopologyKind::kTorus:
    case TopologyKind::kExponential:
      return PeerDegree(topology, 1);  // vertex-transitive: every peer looks the same
    case TopologyKind::kGraph: {
      std::uint32_t largest = 0;
      for (PeerId peer = 1; peer <= topology.peers; ++peer) {
        largest = std::max(largest, PeerDegree(topology, peer));
      }
      return largest;
    }
  }
  return 0;
}

// W_ij of an edge, given the degree the max-degree rule uses. Computed from the unordered pair's
// degrees only, in one expression, so W_ij and W_ji are the same float.
float EdgeWeight(const Topology& topology, MixingRule rule, std::uint32_t max_degree, PeerId i,
                 PeerId j) {
  std::uint32_t degree = max_degree;
  if (rule == MixingRule::kMetropolisHastings) {
    degree = std::max(PeerDegree(topology, i), PeerDegree(topology, j));
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

Status ValidateGraph(const Topology& topology) {
  const std::uint32_t n = topology.peers;
  const AdjacencyView& graph = topology.graph;
  if (graph.offsets.size() != static_cast<std::size_t>(n) + 1 || graph.offsets[0] != 0 ||
      graph.offsets[n] != graph.neighbours.size()) {
    return Status::InvalidArgument(
        "an adjacency needs n + 1 offsets from 0 to its neighbour count");
  }
  for (PeerId peer = 1; peer <= n; ++peer) {
    const std::uint32_t begin = graph.offsets[peer - 1];
    const std::uint32_t end = graph.offsets[peer];
    if (end < begin) return Status::InvalidArgument("adjacency offsets must not decrease");
    if (end - begin > kMaxNeighbours) {
      return Status::InvalidArgument("a peer of the graph has more than 32 neighbours");
    }
    for (std::uint32_t k = begin; k < end; ++k) {
      const PeerId other = graph.neighbours[k];
      if (other < 1 || other > n) {
        return Status::InvalidArgument("a neighbour id is outside 1..n");
      }
      if (other == peer) return Status::InvalidArgument("a peer cannot be its own neighbour");
      if (k > begin && other <= graph.neighbours[k - 1]) {
        return Status::InvalidArgument("a peer's neighbours must be ascending, each edge once");
      }
    }
  }
  // Symmetry: every i -> j has j -> i (rows are sorted: binary search).
  for (PeerId peer = 1; peer <= n; ++peer) {
    for (std::uint32_t k = graph.offsets[peer - 1]; k < graph.offsets[peer]; ++k) {
      const PeerId other = graph.neighbours[k];
      const std::span<const PeerId> row = graph.neighbours.subspan(
          graph.offsets[other - 1], graph.offsets[other] - graph.offsets[other - 1]);
      if (!std::binary_search(row.begin(), row.end(), peer)) {
        return Status::InvalidArgument(
            "the graph is not undirected: an edge is listed one way only");
      }
    }
  }
  return Status::Ok();
}

// Union-find root with path halving.
std::uint32_t Root(std::span<std::uint32_t> parent, std::uint32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

// Whether the validated topology is connected, over `parent` (n words).
bool Connected(const Topology& topology, std::span<std::uint32_t> parent) {
  const std::uint32_t n = topology.peers;
  for (std::uint32_t i = 0; i < n; ++i) parent[i] = i;
  std::uint32_t components = n;
  std::array<PeerId, kMaxNeighbours> row{};
  for (PeerId peer = 1; peer <= n; ++peer) {
    const std::size_t degree = RawNeighbours(topology, peer, row);
    for (std::size_t k = 0; k < degree; ++k) {
      const std::uint32_t a = Root(parent, peer - 1);
      const std::uint32_t b = Root(parent, row[k] - 1);
      if (a != b) {
        parent[std::max(a, b)] = std::min(a, b);
        --components;
      }
    }
  }
  return components == 1;
}

}  // namespace

const char* TopologyKindName(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kRing:
      return "ring";
    case TopologyKind::kComplete:
      return "complete";
    case TopologyKind::kTorus:
      return "torus";
    case TopologyKind::kStar:
      return "star";
    case TopologyKind::kExponential:
      return "exponential";
    case TopologyKind::kGraph:
      return "graph";
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

Status ValidateTopology(const Topology& topology) {
  if (!KnownKind(topology.kind)) return Status::InvalidArgument("unknown topology");
  const std::uint32_t n = topology.peers;
  if (n < 1 || n > kMaxTopologyPeers) {
    return Status::InvalidArgument("a topology needs 1..16777215 peers");
  }
  switch (topology.kind) {
    case TopologyKind::kComplete:
    case TopologyKind::kStar:
      if (n - 1 > kMaxNeighbours) {
        return Status::InvalidArgument(
            "a peer would have more than 32 neighbours (complete graphs and stars: n <= 33)");
      }
      break;
    case TopologyKind::kTorus:
      if (topology.torus_rows != 0 && n % topology.torus_rows != 0) {
        return Status::InvalidArgument("the torus's rows must divide the number of peers");
      }
      break;
    case TopologyKind::kExponential:
      // Degree ~ 2 log2 n: more than 32 neighbours past 2^16 peers.
      if (n > (1u << 16)) {
        return Status::InvalidArgument(
            "an exponential graph of more than 65536 peers would give "
            "a peer more than 32 neighbours");
      }
      break;
    case TopologyKind::kGraph:
      return ValidateGraph(topology);
    case TopologyKind::kRing:
      break;
  }
  return Status::Ok();
}

std::uint32_t Degree(const Topology& topology, PeerId peer) {
  if (!ValidateTopology(topology).ok() || !IsPeer(topology, peer)) return 0;
  return PeerDegree(topology, peer);
}

std::uint32_t MaxDegree(const Topology& topology) {
  return ValidateTopology(topology).ok() ? RawMaxDegree(topology) : 0;
}

bool AreNeighbours(const Topology& topology, PeerId a, PeerId b) {
  if (!ValidateTopology(topology).ok() || !IsPeer(topology, a) || !IsPeer(topology, b) || a == b) {
    return false;
  }
  std::array<PeerId, kMaxCandidates> row{};
  const std::size_t degree = RawNeighbours(topology, a, row);
  return std::binary_search(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(degree), b);
}

Result<std::size_t> Neighbours(const Topology& topology, PeerId peer, std::span<PeerId> out) {
  if (!ValidateTopology(topology).ok() || !IsPeer(topology, peer)) {
    return Status::InvalidArgument("the topology is invalid or has no such peer");
  }
  std::array<PeerId, kMaxCandidates> row{};
  const std::size_t degree = RawNeighbours(topology, peer, row);
  if (out.size() < degree) {
    return Status::ResourceExhausted("the output holds fewer ids than the peer has neighbours");
  }
  std::copy(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(degree), out.begin());
  return degree;
}

float MixingWeight(const Topology& topology, MixingRule rule, PeerId i, PeerId j) {
  if (i == j) {
    const Result<MixingRow> row = MakeMixingRow(topology, rule, i);
    return row.ok() ? row.value().self_weight : 0.0f;
  }
  if (!KnownRule(rule) || !AreNeighbours(topology, i, j)) return 0.0f;
  return EdgeWeight(topology, rule, RawMaxDegree(topology), i, j);
}

Result<MixingRow> MakeMixingRow(const Topology& topology, MixingRule rule, PeerId peer) {
  if (!KnownRule(rule)) return Status::InvalidArgument("unknown mixing rule");
  MixingRow row;
  EDGESGD_TRY_ASSIGN(const std::size_t degree, Neighbours(topology, peer, row.neighbours));
  const std::uint32_t max_degree =
      rule == MixingRule::kMaxDegree ? RawMaxDegree(topology) : std::uint32_t{0};
  row.peer = peer;
  row.degree = static_cast<std::uint32_t>(degree);
  for (std::size_t k = 0; k < degree; ++k) {
    row.weights[k] = EdgeWeight(topology, rule, max_degree, peer, row.neighbours[k]);
  }
  row.self_weight = DiagonalWeight(row.neighbour_weights());
  return row;
}

Status ValidateMixingRow(const MixingRow& row) {
  if (row.peer == 0) return Status::InvalidArgument("a gossip peer id must not be 0");
  if (row.degree > kMaxNeighbours) {
    return Status::InvalidArgument("a mixing row has more than 32 neighbours");
  }
  const std::span<const PeerId> ids = row.neighbour_ids();
  const std::span<const float> weights = row.neighbour_weights();
  double sum = 0.0;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] == 0 || ids[k] == row.peer) {
      return Status::InvalidArgument("a neighbour id is 0 or the peer itself");
    }
    for (std::size_t m = 0; m < k; ++m) {
      if (ids[m] == ids[k]) return Status::InvalidArgument("a neighbour appears twice");
    }
    if (!(std::isfinite(weights[k]) && weights[k] > 0.0f)) {
      return Status::InvalidArgument("neighbour weights must be positive and finite");
    }
    sum += static_cast<double>(weights[k]);
  }
  if (!(std::isfinite(row.self_weight) && row.self_weight >= 0.0f)) {
    return Status::InvalidArgument("the self weight must be non-negative and finite");
  }
  sum += static_cast<double>(row.self_weight);
  if (!(std::fabs(sum - 1.0) <= static_cast<double>(kMixingRowTolerance))) {
    return Status::InvalidArgument("a mixing row must sum to 1");
  }
  return Status::Ok();
}

// ---- Whole-graph checks and the spectrum ----

Status CheckConnected(const Topology& topology, std::span<std::uint32_t> scratch) {
  if (const Status check = ValidateTopology(topology); !check.ok()) return check;
  if (scratch.size() < ConnectivityScratchWords(topology.peers)) {
    return Status::InvalidArgument("connectivity scratch is smaller than one word per peer");
  }
  if (!Connected(topology, scratch)) {
    return Status::InvalidArgument(
        "the graph is disconnected: some peers can never reach the others, so they cannot "
        "agree on a model");
  }
  return Status::Ok();
}

namespace {

// Layout of ComputeMixingSpectrum's scratch: v, u, w (n doubles each), then W's rows: n self
// weights (double), n + 1 offsets, and per edge a neighbour index and a weight.
struct SpectrumLayout {
  std::size_t edges = 0;
  std::size_t vectors = 0;  // byte offset of each part
  std::size_t self = 0;
  std::size_t offsets = 0;
  std::size_t ids = 0;
  std::size_t weights = 0;
  std::size_t total = 0;
};

SpectrumLayout LayoutFor(const Topology& topology) {
  SpectrumLayout layout;
  const std::size_t n = topology.peers;
  for (PeerId peer = 1; peer <= topology.peers; ++peer) layout.edges += PeerDegree(topology, peer);
  layout.vectors = 0;
  layout.self = 3 * n * sizeof(double);
  layout.weights = layout.self + n * sizeof(double);
  layout.offsets = layout.weights + layout.edges * sizeof(double);
  layout.ids = layout.offsets + (n + 1) * sizeof(std::uint32_t);
  layout.total = layout.ids + layout.edges * sizeof(std::uint32_t);
  return layout;
}

// out = W in, with W in compressed rows.
void MultiplyW(std::span<const double> self, std::span<const std::uint32_t> offsets,
               std::span<const std::uint32_t> ids, std::span<const double> weights,
               std::span<const double> in, std::span<double> out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    double sum = self[i] * in[i];
    for (std::uint32_t k = offsets[i]; k < offsets[i + 1]; ++k) sum += weights[k] * in[ids[k]];
    out[i] = sum;
  }
}

// Removes the mean (the component along the all-ones vector) and returns the norm.
double Deflate(std::span<double> v) {
  double mean = 0.0;
  for (const double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double norm = 0.0;
  for (double& x : v) {
    x -= mean;
    norm += x * x;
  }
  return std::sqrt(norm);
}

}  // namespace

std::size_t SpectrumScratchBytes(const Topology& topology) {
  if (!ValidateTopology(topology).ok()) return 0;
  // Room for the connectivity words inside the vectors, and for aligning the doubles.
  return LayoutFor(topology).total + alignof(double);
}

Status ComputeMixingSpectrum(const Topology& topology, MixingRule rule,
                             std::span<std::byte> scratch, MixingSpectrum& out) {
  if (!KnownRule(rule)) return Status::InvalidArgument("unknown mixing rule");
  if (const Status check = ValidateTopology(topology); !check.ok()) return check;
  const std::size_t needed = SpectrumScratchBytes(topology);
  if (scratch.size() < needed) {
    return Status::ResourceExhausted("spectrum scratch is too small");
  }
  // Align the start for doubles (the caller's bytes may start anywhere).
  const auto address = reinterpret_cast<std::uintptr_t>(scratch.data());
  const std::size_t skip = (alignof(double) - address % alignof(double)) % alignof(double);
  std::byte* base = scratch.data() + skip;
  const SpectrumLayout layout = LayoutFor(topology);
  const std::size_t n = topology.peers;
  // Through void*: every part starts at a multiple of its alignment from the aligned base (see
  // LayoutFor), which -Wcast-align cannot see on strict-alignment targets.
  const auto doubles = [&](std::size_t offset, std::size_t count) {
    return std::span<double>(static_cast<double*>(static_cast<void*>(base + offset)), count);
  };
  const auto words = [&](std::size_t offset, std::size_t count) {
    return std::span<std::uint32_t>(static_cast<std::uint32_t*>(static_cast<void*>(base + offset)),
                                    count);
  };
  // Connectivity first, in the (not yet used) vector space: 3n doubles hold n words.
  if (!Connected(topology, words(layout.vectors, n))) {
    return Status::InvalidArgument(
        "the graph is disconnected: some peers can never reach the others, so they cannot "
        "agree on a model");
  }
  out = MixingSpectrum{};
  if (n == 1) return Status::Ok();

  // W in compressed rows, from the same rows the peers use (float weights, as applied).
  const std::span<double> self = doubles(layout.self, n);
  const std::span<double> weights = doubles(layout.weights, layout.edges);
  const std::span<std::uint32_t> offsets = words(layout.offsets, n + 1);
  const std::span<std::uint32_t> ids = words(layout.ids, layout.edges);
  const std::uint32_t max_degree = RawMaxDegree(topology);
  std::size_t edge = 0;
  std::array<PeerId, kMaxCandidates> row{};
  std::array<float, kMaxCandidates> row_weights{};
  for (PeerId peer = 1; peer <= topology.peers; ++peer) {
    offsets[peer - 1] = static_cast<std::uint32_t>(edge);
    const std::size_t degree = RawNeighbours(topology, peer, row);
    for (std::size_t k = 0; k < degree; ++k) {
      row_weights[k] = EdgeWeight(topology, rule, max_degree, peer, row[k]);
      weights[edge] = static_cast<double>(row_weights[k]);
      ids[edge] = row[k] - 1;
      ++edge;
    }
    self[peer - 1] =
        static_cast<double>(DiagonalWeight(std::span<const float>(row_weights).first(degree)));
  }
  offsets[n] = static_cast<std::uint32_t>(edge);

  const std::span<double> v = doubles(layout.vectors, n);
  const std::span<double> u = doubles(layout.vectors + n * sizeof(double), n);
  const std::span<double> w = doubles(layout.vectors + 2 * n * sizeof(double), n);
  // A fixed pseudo-random start (SplitMix64): it has a component along every eigenvector but
  // the all-ones one, which Deflate removes.
  std::uint64_t state = 0x5EED5EEDull;
  for (double& x : v) x = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53 - 0.5;
  double norm = Deflate(v);
  for (double& x : v) x /= norm;
  double mu = 0.0;
  double residual = 0.0;
  std::uint32_t iteration = 0;
  while (iteration < kMaxSpectrumIterations) {
    ++iteration;
    const double previous_mu = mu;
    MultiplyW(self, offsets, ids, weights, v, u);
    MultiplyW(self, offsets, ids, weights, u, w);
    norm = Deflate(w);  // also removes rounding drift along the all-ones vector
    mu = 0.0;
    for (std::size_t i = 0; i < n; ++i) mu += v[i] * w[i];
    residual = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double r = w[i] - mu * v[i];
      residual += r * r;
    }
    residual = std::sqrt(residual);
    // Converged, or stalled: two eigenvalues of W^2 closer than the residual (lambda_2 and
    // -lambda_n of a bipartite-like graph differ only by float rounding of the weights) leave
    // the residual at their distance while mu, which rises monotonically, stops moving.
    const bool stalled = iteration > 1 && mu - previous_mu <= 1e-13 * mu;
    if (residual <= 1e-12 || norm <= 1e-300 || stalled) break;
    for (std::size_t i = 0; i < n; ++i) v[i] = w[i] / norm;
  }
  out.lambda = std::sqrt(std::max(mu, 0.0));
  out.spectral_gap = 1.0 - out.lambda;
  out.iterations = iteration;
  out.residual = residual;
  return Status::Ok();
}

float AcceleratedGossipRate(double lambda) {
  const double clamped = std::clamp(lambda, 0.0, 1.0 - 1e-12);
  const double root = std::sqrt(1.0 - clamped * clamped);
  return static_cast<float>((1.0 - root) / (1.0 + root));
}

std::uint32_t DetagGossipSteps(std::uint32_t peers, double lambda) {
  const double clamped = std::clamp(lambda, 0.0, 1.0 - 1e-12);
  const double steps =
      std::floor(0.5 * std::log(static_cast<double>(std::max<std::uint32_t>(peers, 1))) /
                 std::sqrt(1.0 - clamped));
  if (!(steps >= 1.0)) return 1;
  return steps >= kMaxGossipSteps ? kMaxGossipSteps : static_cast<std::uint32_t>(steps);
}

}  // namespace edgesgd::protocol
