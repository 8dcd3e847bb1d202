// Topologies and mixing matrices: neighbour lists, Metropolis-Hastings and max-degree weights,
// the properties D-PSGD relies on (symmetric, doubly stochastic, zero off the graph), explicit
// and random regular graphs, connectivity, and the spectrum of W (lambda against a dense
// eigen-solve and the known ring values of docs/algorithms.md §6).

#include "edgesgd/protocol/topology.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Dense>

namespace edgesgd::protocol {
namespace {

struct GraphCase {
  TopologyKind kind;
  std::uint32_t peers;
};

std::string CaseName(const GraphCase& graph, MixingRule rule) {
  return std::string(TopologyKindName(graph.kind)) + "/" + std::to_string(graph.peers) + "/" +
         MixingRuleName(rule);
}

constexpr std::array<GraphCase, 24> kGraphs = {{
    {TopologyKind::kRing, 1},
    {TopologyKind::kRing, 2},
    {TopologyKind::kRing, 3},
    {TopologyKind::kRing, 4},
    {TopologyKind::kRing, 5},
    {TopologyKind::kRing, 8},
    {TopologyKind::kRing, 16},
    {TopologyKind::kRing, 61},
    {TopologyKind::kComplete, 1},
    {TopologyKind::kComplete, 2},
    {TopologyKind::kComplete, 3},
    {TopologyKind::kComplete, 6},
    {TopologyKind::kComplete, 17},
    {TopologyKind::kComplete, 33},
    {TopologyKind::kTorus, 16},
    {TopologyKind::kTorus, 12},
    {TopologyKind::kTorus, 6},  // 2 x 3: a side of 2 has one neighbour along it
    {TopologyKind::kTorus, 7},  // prime: 1 x 7, a ring
    {TopologyKind::kStar, 2},
    {TopologyKind::kStar, 9},
    {TopologyKind::kStar, 33},
    {TopologyKind::kExponential, 2},
    {TopologyKind::kExponential, 16},
    {TopologyKind::kExponential, 23},
}};

constexpr std::array<MixingRule, 2> kRules = {MixingRule::kMetropolisHastings,
                                              MixingRule::kMaxDegree};

// The full n x n matrix, row i - 1 for peer i.
std::vector<std::vector<float>> FullMatrix(const Topology& topology, MixingRule rule) {
  const std::uint32_t n = topology.peers;
  std::vector<std::vector<float>> w(n, std::vector<float>(n));
  for (PeerId i = 1; i <= n; ++i) {
    for (PeerId j = 1; j <= n; ++j) w[i - 1][j - 1] = MixingWeight(topology, rule, i, j);
  }
  return w;
}

TEST(TopologyTest, WeightsAreSymmetricAndDoublyStochastic) {
  for (const GraphCase& graph : kGraphs) {
    for (const MixingRule rule : kRules) {
      SCOPED_TRACE(CaseName(graph, rule));
      const Topology topology{graph.kind, graph.peers};
      ASSERT_TRUE(ValidateTopology(topology).ok()) << ValidateTopology(topology).reason();
      const std::vector<std::vector<float>> w = FullMatrix(topology, rule);
      const std::uint32_t n = graph.peers;
      for (std::uint32_t i = 0; i < n; ++i) {
        double row = 0.0;
        double column = 0.0;
        for (std::uint32_t j = 0; j < n; ++j) {
          // Bit-identical, not just close: both directions come from the same expression.
          EXPECT_EQ(w[i][j], w[j][i]) << i + 1 << "," << j + 1;
          EXPECT_GE(w[i][j], 0.0f);
          const bool edge = AreNeighbours(topology, i + 1, j + 1);
          if (i != j) {
            EXPECT_EQ(w[i][j] > 0.0f, edge) << i + 1 << "," << j + 1;
          }
          row += static_cast<double>(w[i][j]);
          column += static_cast<double>(w[j][i]);
        }
        EXPECT_GT(w[i][i], 0.0f);
        EXPECT_NEAR(row, 1.0, 1e-6);
        EXPECT_NEAR(column, 1.0, 1e-6);
      }
    }
  }
}

TEST(TopologyTest, RowsAgreeWithTheMatrixAndValidate) {
  for (const GraphCase& graph : kGraphs) {
    for (const MixingRule rule : kRules) {
      SCOPED_TRACE(CaseName(graph, rule));
      const Topology topology{graph.kind, graph.peers};
      for (PeerId i = 1; i <= graph.peers; ++i) {
        const Result<MixingRow> row = MakeMixingRow(topology, rule, i);
        ASSERT_TRUE(row.ok());
        const MixingRow& r = row.value();
        EXPECT_EQ(r.peer, i);
        EXPECT_EQ(r.degree, Degree(topology, i));
        EXPECT_TRUE(ValidateMixingRow(r).ok()) << ValidateMixingRow(r).reason();
        EXPECT_EQ(r.self_weight, MixingWeight(topology, rule, i, i));
        for (std::uint32_t k = 0; k < r.degree; ++k) {
          if (k > 0) {
            EXPECT_LT(r.neighbours[k - 1], r.neighbours[k]);
          }
          EXPECT_TRUE(AreNeighbours(topology, i, r.neighbours[k]));
          EXPECT_EQ(r.weights[k], MixingWeight(topology, rule, i, r.neighbours[k]));
        }
        for (std::size_t k = r.degree; k < kMaxNeighbours; ++k) {
          EXPECT_EQ(r.neighbours[k], 0u);
          EXPECT_EQ(r.weights[k], 0.0f);
        }
      }
    }
  }
}

TEST(TopologyTest, RingHasUniformThirdsAndCompleteHasOneOverN) {
  for (const std::uint32_t n : {3u, 4u, 8u, 16u, 100u}) {
    for (const MixingRule rule : kRules) {
      const Topology ring{TopologyKind::kRing, n};
      const MixingRow row = MakeMixingRow(ring, rule, 1).value();
      ASSERT_EQ(row.degree, 2u);
      EXPECT_EQ(row.neighbours[0], 2u);
      EXPECT_EQ(row.neighbours[1], n);
      EXPECT_EQ(row.weights[0], 1.0f / 3.0f);
      EXPECT_EQ(row.weights[1], 1.0f / 3.0f);
      EXPECT_NEAR(row.self_weight, 1.0f / 3.0f, 1e-7f);
    }
  }
  for (const std::uint32_t n : {2u, 5u, 33u}) {
    const Topology complete{TopologyKind::kComplete, n};
    const MixingRow row = MakeMixingRow(complete, MixingRule::kMetropolisHastings, n).value();
    ASSERT_EQ(row.degree, n - 1);
    for (std::uint32_t k = 0; k < row.degree; ++k) {
      EXPECT_EQ(row.neighbours[k], k + 1);
      EXPECT_EQ(row.weights[k], 1.0f / static_cast<float>(n));
    }
    EXPECT_NEAR(row.self_weight, 1.0f / static_cast<float>(n), 1e-6f);
  }
}

TEST(TopologyTest, SmallRingsDegenerateGracefully) {
  const Topology lone{TopologyKind::kRing, 1};
  const MixingRow alone = MakeMixingRow(lone, MixingRule::kMetropolisHastings, 1).value();
  EXPECT_EQ(alone.degree, 0u);
  EXPECT_EQ(alone.self_weight, 1.0f);

  const Topology pair{TopologyKind::kRing, 2};
  EXPECT_EQ(Degree(pair, 1), 1u);
  EXPECT_TRUE(AreNeighbours(pair, 1, 2));
  const MixingRow row = MakeMixingRow(pair, MixingRule::kMetropolisHastings, 2).value();
  ASSERT_EQ(row.degree, 1u);
  EXPECT_EQ(row.neighbours[0], 1u);
  EXPECT_EQ(row.weights[0], 0.5f);
  EXPECT_EQ(row.self_weight, 0.5f);
}

TEST(TopologyTest, NeighboursOfRingWrapAround) {
  const Topology ring{TopologyKind::kRing, 8};
  std::array<PeerId, 4> out{};
  const Result<std::size_t> first = Neighbours(ring, 1, out);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first.value(), 2u);
  EXPECT_EQ(out[0], 2u);
  EXPECT_EQ(out[1], 8u);
  const Result<std::size_t> last = Neighbours(ring, 8, out);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(out[0], 1u);
  EXPECT_EQ(out[1], 7u);
  EXPECT_FALSE(AreNeighbours(ring, 1, 3));
  EXPECT_FALSE(AreNeighbours(ring, 4, 4));
  EXPECT_FALSE(AreNeighbours(ring, 0, 1));
  EXPECT_FALSE(AreNeighbours(ring, 8, 9));
  EXPECT_EQ(MaxDegree(ring), 2u);
}

TEST(TopologyTest, RejectsInvalidTopologiesAndArguments) {
  EXPECT_FALSE(ValidateTopology({TopologyKind::kRing, 0}).ok());
  EXPECT_FALSE(ValidateTopology({TopologyKind::kRing, kMaxTopologyPeers + 1}).ok());
  EXPECT_TRUE(ValidateTopology({TopologyKind::kRing, kMaxTopologyPeers}).ok());
  EXPECT_TRUE(ValidateTopology({TopologyKind::kComplete, kMaxNeighbours + 1}).ok());
  const Status too_dense = ValidateTopology({TopologyKind::kComplete, kMaxNeighbours + 2});
  EXPECT_EQ(too_dense, Status::InvalidArgument());
  EXPECT_STRNE(too_dense.reason(), "ok");
  EXPECT_FALSE(ValidateTopology({static_cast<TopologyKind>(9), 4}).ok());

  const Topology ring{TopologyKind::kRing, 5};
  std::array<PeerId, 1> small{};
  EXPECT_EQ(Neighbours(ring, 1, small).status(), Status::ResourceExhausted());
  std::array<PeerId, 2> enough{};
  EXPECT_EQ(Neighbours(ring, 0, enough).status(), Status::InvalidArgument());
  EXPECT_EQ(Neighbours(ring, 6, enough).status(), Status::InvalidArgument());
  EXPECT_EQ(MakeMixingRow(ring, static_cast<MixingRule>(7), 1).status(), Status::InvalidArgument());
  EXPECT_EQ(MakeMixingRow({TopologyKind::kComplete, 40}, MixingRule::kMaxDegree, 1).status(),
            Status::InvalidArgument());
  EXPECT_EQ(Degree(ring, 6), 0u);
  EXPECT_EQ(MixingWeight(ring, MixingRule::kMetropolisHastings, 1, 3), 0.0f);
  EXPECT_EQ(MixingWeight(ring, MixingRule::kMetropolisHastings, 0, 0), 0.0f);
}

TEST(TopologyTest, ValidateMixingRowRejectsBadRows) {
  const MixingRow good =
      MakeMixingRow({TopologyKind::kRing, 6}, MixingRule::kMetropolisHastings, 3).value();
  ASSERT_TRUE(ValidateMixingRow(good).ok());

  MixingRow row = good;
  row.peer = 0;
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.neighbours[1] = row.neighbours[0];
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.neighbours[0] = 3;  // itself
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.neighbours[0] = 0;
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.weights[0] = 0.0f;
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.weights[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.self_weight = 0.5f;  // row sums to 7/6
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.self_weight = -0.0001f;
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  row = good;
  row.degree = kMaxNeighbours + 1;
  EXPECT_FALSE(ValidateMixingRow(row).ok());
  // A row written by hand in decimal is a few roundings from 1 and still accepted.
  row = good;
  row.weights = {};
  row.weights[0] = 0.3333333f;
  row.weights[1] = 0.3333333f;
  row.self_weight = 0.3333334f;
  EXPECT_TRUE(ValidateMixingRow(row).ok());
}

TEST(TopologyTest, ImplicitGraphsHaveTheirShapes) {
  // Torus 3 x 4: peer 6 (row 1, column 1) has left 5, right 7, up 2, down 10.
  const Topology torus{TopologyKind::kTorus, 12};
  std::array<PeerId, kMaxNeighbours> out{};
  ASSERT_EQ(Neighbours(torus, 6, out).value(), 4u);
  EXPECT_EQ((std::vector<PeerId>(out.begin(), out.begin() + 4)), (std::vector<PeerId>{2, 5, 7, 10}));
  const Topology wide{TopologyKind::kTorus, 12, 2};  // 2 x 6: one neighbour up/down
  EXPECT_EQ(Degree(wide, 1), 3u);
  EXPECT_FALSE(ValidateTopology({TopologyKind::kTorus, 12, 5}).ok());

  const Topology star{TopologyKind::kStar, 9};
  EXPECT_EQ(Degree(star, 1), 8u);
  EXPECT_EQ(Degree(star, 5), 1u);
  EXPECT_TRUE(AreNeighbours(star, 5, 1));
  EXPECT_FALSE(AreNeighbours(star, 5, 6));
  // Metropolis-Hastings: 1/9 on every spoke; a leaf keeps 8/9, the hub 1/9.
  EXPECT_EQ(MixingWeight(star, MixingRule::kMetropolisHastings, 1, 4), 1.0f / 9.0f);
  EXPECT_NEAR(MixingWeight(star, MixingRule::kMetropolisHastings, 4, 4), 8.0f / 9.0f, 1e-6f);
  EXPECT_NEAR(MixingWeight(star, MixingRule::kMetropolisHastings, 1, 1), 1.0f / 9.0f, 1e-6f);
  EXPECT_FALSE(ValidateTopology({TopologyKind::kStar, 34}).ok());

  // Exponential on 16: +-1, +-2, +-4 and 8 (its own inverse).
  const Topology exponential{TopologyKind::kExponential, 16};
  ASSERT_EQ(Neighbours(exponential, 1, out).value(), 7u);
  EXPECT_EQ((std::vector<PeerId>(out.begin(), out.begin() + 7)),
            (std::vector<PeerId>{2, 3, 5, 9, 13, 15, 16}));
  EXPECT_TRUE(ValidateTopology({TopologyKind::kExponential, 1u << 16}).ok());
  EXPECT_FALSE(ValidateTopology({TopologyKind::kExponential, (1u << 16) + 1}).ok());
}

// ---- Explicit graphs ----

// An adjacency in compressed rows from an edge list (both directions added, rows sorted).
struct OwnedGraph {
  std::vector<std::uint32_t> offsets;
  std::vector<PeerId> neighbours;
  Topology topology() const {
    Topology t;
    t.kind = TopologyKind::kGraph;
    t.peers = static_cast<std::uint32_t>(offsets.size() - 1);
    t.graph = AdjacencyView{offsets, neighbours};
    return t;
  }
};

OwnedGraph FromEdges(std::uint32_t n, const std::vector<std::pair<PeerId, PeerId>>& edges) {
  std::vector<std::vector<PeerId>> rows(n + 1);
  for (const auto& [a, b] : edges) {
    rows[a].push_back(b);
    rows[b].push_back(a);
  }
  OwnedGraph graph;
  graph.offsets.push_back(0);
  for (PeerId i = 1; i <= n; ++i) {
    std::sort(rows[i].begin(), rows[i].end());
    graph.neighbours.insert(graph.neighbours.end(), rows[i].begin(), rows[i].end());
    graph.offsets.push_back(static_cast<std::uint32_t>(graph.neighbours.size()));
  }
  return graph;
}

TEST(TopologyTest, ExplicitGraphIsMixedLikeAnyOther) {
  // A path 1-2-3-4 with a chord 2-4.
  const OwnedGraph graph = FromEdges(4, {{1, 2}, {2, 3}, {3, 4}, {2, 4}});
  const Topology topology = graph.topology();
  ASSERT_TRUE(ValidateTopology(topology).ok()) << ValidateTopology(topology).reason();
  EXPECT_EQ(Degree(topology, 2), 3u);
  EXPECT_EQ(MaxDegree(topology), 3u);
  EXPECT_TRUE(AreNeighbours(topology, 4, 2));
  EXPECT_FALSE(AreNeighbours(topology, 1, 3));
  // Metropolis-Hastings: 1/(1 + max(deg)) per edge.
  EXPECT_EQ(MixingWeight(topology, MixingRule::kMetropolisHastings, 1, 2), 0.25f);
  EXPECT_EQ(MixingWeight(topology, MixingRule::kMetropolisHastings, 3, 4), 1.0f / 3.0f);
  for (const MixingRule rule : kRules) {
    for (PeerId i = 1; i <= 4; ++i) {
      double row = 0.0;
      for (PeerId j = 1; j <= 4; ++j) {
        EXPECT_EQ(MixingWeight(topology, rule, i, j), MixingWeight(topology, rule, j, i));
        row += static_cast<double>(MixingWeight(topology, rule, i, j));
      }
      EXPECT_NEAR(row, 1.0, 1e-6);
      EXPECT_TRUE(ValidateMixingRow(MakeMixingRow(topology, rule, i).value()).ok());
    }
  }
}

TEST(TopologyTest, MalformedExplicitGraphsAreRejectedWithAReason) {
  const auto reason = [](const OwnedGraph& graph) {
    return std::string(ValidateTopology(graph.topology()).reason());
  };
  OwnedGraph graph = FromEdges(4, {{1, 2}, {2, 3}, {3, 4}});
  ASSERT_EQ(reason(graph), "ok");
  OwnedGraph one_way = graph;
  one_way.neighbours = {2, 3, 2, 4, 3};
  one_way.offsets = {0, 1, 2, 4, 5};  // 1 -> 2 but 2 does not list 1
  EXPECT_NE(reason(one_way).find("one way"), std::string::npos) << reason(one_way);
  OwnedGraph self_loop = graph;
  self_loop.neighbours[0] = 1;
  EXPECT_NE(reason(self_loop).find("own neighbour"), std::string::npos) << reason(self_loop);
  OwnedGraph outside = graph;
  outside.neighbours.back() = 9;
  EXPECT_NE(reason(outside).find("outside"), std::string::npos) << reason(outside);
  OwnedGraph twice = FromEdges(3, {{1, 2}, {1, 2}});
  EXPECT_NE(reason(twice).find("each edge once"), std::string::npos) << reason(twice);
  OwnedGraph short_offsets = graph;
  short_offsets.offsets.pop_back();
  short_offsets.offsets.push_back(99);
  EXPECT_FALSE(ValidateTopology(short_offsets.topology()).ok());
  // 34 peers all joined to peer 1: 33 neighbours.
  std::vector<std::pair<PeerId, PeerId>> spokes;
  for (PeerId leaf = 2; leaf <= 34; ++leaf) spokes.emplace_back(1, leaf);
  EXPECT_NE(reason(FromEdges(34, spokes)).find("32 neighbours"), std::string::npos);
}

TEST(TopologyTest, DisconnectedGraphIsRejected) {
  // Two triangles.
  const OwnedGraph graph = FromEdges(6, {{1, 2}, {2, 3}, {1, 3}, {4, 5}, {5, 6}, {4, 6}});
  const Topology topology = graph.topology();
  ASSERT_TRUE(ValidateTopology(topology).ok());
  std::vector<std::uint32_t> words(ConnectivityScratchWords(6));
  const Status connected = CheckConnected(topology, words);
  EXPECT_FALSE(connected.ok());
  EXPECT_NE(std::string(connected.reason()).find("disconnected"), std::string::npos);
  std::vector<std::byte> scratch(SpectrumScratchBytes(topology));
  MixingSpectrum spectrum;
  const Status check =
      ComputeMixingSpectrum(topology, MixingRule::kMetropolisHastings, scratch, spectrum);
  EXPECT_EQ(check, Status::InvalidArgument());
  EXPECT_NE(std::string(check.reason()).find("disconnected"), std::string::npos);
  // Join them and it passes.
  const OwnedGraph joined =
      FromEdges(6, {{1, 2}, {2, 3}, {1, 3}, {4, 5}, {5, 6}, {4, 6}, {3, 4}});
  EXPECT_TRUE(CheckConnected(joined.topology(), words).ok());
  // Too little scratch is an error, not a crash.
  EXPECT_FALSE(CheckConnected(joined.topology(), std::span<std::uint32_t>(words).first(3)).ok());
  std::vector<std::byte> small(16);
  EXPECT_EQ(ComputeMixingSpectrum(joined.topology(), MixingRule::kMetropolisHastings, small,
                                  spectrum),
            Status::ResourceExhausted());
}

// ---- Random regular graphs ----

// A drawn graph, and what drawing it returned.
struct RandomRegular : OwnedGraph {
  Status check;
};

RandomRegular Draw(std::uint32_t n, std::uint32_t degree, std::uint64_t seed) {
  RandomRegular graph;
  graph.offsets.resize(n + 1);
  graph.neighbours.resize(static_cast<std::size_t>(n) * degree);
  std::vector<std::uint32_t> scratch(RandomRegularScratchWords(n, degree));
  graph.check = MakeRandomRegularGraph(n, degree, seed, graph.offsets, graph.neighbours, scratch);
  return graph;
}

TEST(TopologyTest, RandomRegularGraphsAreRegularConnectedAndSeeded) {
  for (const auto& [n, degree] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{
           {8, 3}, {16, 4}, {50, 3}, {33, 32}, {200, 5}, {12, 2}}) {
    SCOPED_TRACE(std::to_string(n) + "/" + std::to_string(degree));
    const RandomRegular graph = Draw(n, degree, 7);
    ASSERT_TRUE(graph.check.ok()) << graph.check.reason();
    const Topology topology = graph.topology();
    ASSERT_TRUE(ValidateTopology(topology).ok()) << ValidateTopology(topology).reason();
    for (PeerId peer = 1; peer <= n; ++peer) EXPECT_EQ(Degree(topology, peer), degree);
    std::vector<std::uint32_t> words(n);
    EXPECT_TRUE(CheckConnected(topology, words).ok());
    EXPECT_EQ(Draw(n, degree, 7).neighbours, graph.neighbours);
  }
  EXPECT_NE(Draw(50, 3, 7).neighbours, Draw(50, 3, 8).neighbours);
  EXPECT_FALSE(Draw(7, 3, 1).check.ok());   // n * degree odd
  EXPECT_FALSE(Draw(5, 5, 1).check.ok());   // degree >= n
  EXPECT_FALSE(Draw(40, 33, 1).check.ok()); // more than 32 neighbours
  EXPECT_FALSE(Draw(1, 1, 1).check.ok());
  // Degree 1 is a perfect matching: never connected beyond two peers.
  const RandomRegular matching = Draw(8, 1, 1);
  EXPECT_FALSE(matching.check.ok());
  EXPECT_NE(std::string(matching.check.reason()).find("connected"), std::string::npos);
}

// ---- The spectrum of W ----

// lambda from a dense symmetric eigen-solve of the full matrix.
double DenseLambda(const Topology& topology, MixingRule rule) {
  const auto n = static_cast<Eigen::Index>(topology.peers);
  if (n == 1) return 0.0;
  Eigen::MatrixXd w(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      w(i, j) = static_cast<double>(MixingWeight(topology, rule, static_cast<PeerId>(i + 1),
                                                 static_cast<PeerId>(j + 1)));
    }
  }
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(w);
  const Eigen::VectorXd& values = solver.eigenvalues();  // ascending; the last is 1
  return std::max(std::fabs(values[0]), std::fabs(values[n - 2]));
}

MixingSpectrum Spectrum(const Topology& topology, MixingRule rule) {
  std::vector<std::byte> scratch(SpectrumScratchBytes(topology) + 3);
  MixingSpectrum spectrum;
  // An odd offset: the function aligns for itself.
  const Status check = ComputeMixingSpectrum(
      topology, rule, std::span<std::byte>(scratch).subspan(3), spectrum);
  EXPECT_TRUE(check.ok()) << check.reason();
  return spectrum;
}

TEST(TopologyTest, RingLambdasMatchTheDocumentedValues) {
  // docs/algorithms.md §6, ring with weights 1/3: lambda, eta_g, R.
  struct Known {
    std::uint32_t n;
    double lambda;
    double eta;
    std::uint32_t steps;
  };
  for (const Known known : {Known{8, 0.805, 0.255, 2}, Known{16, 0.949, 0.522, 6},
                            Known{32, 0.987, 0.725, 15}}) {
    SCOPED_TRACE(known.n);
    const Topology ring{TopologyKind::kRing, known.n};
    const MixingSpectrum spectrum = Spectrum(ring, MixingRule::kMaxDegree);
    const double exact = (1.0 + 2.0 * std::cos(2.0 * 3.14159265358979323846 / known.n)) / 3.0;
    EXPECT_NEAR(spectrum.lambda, exact, 1e-6);
    EXPECT_NEAR(spectrum.lambda, known.lambda, 5e-4);
    EXPECT_NEAR(spectrum.spectral_gap, 1.0 - spectrum.lambda, 1e-12);
    // The document rounds n = 16's eta_g (0.52148) up to 0.522: 1e-3.
    EXPECT_NEAR(AcceleratedGossipRate(spectrum.lambda), known.eta, 1e-3);
    EXPECT_EQ(DetagGossipSteps(known.n, spectrum.lambda), known.steps);
  }
  EXPECT_EQ(AcceleratedGossipRate(0.0), 0.0f);
  EXPECT_EQ(DetagGossipSteps(16, 0.0), 1u);
  EXPECT_EQ(DetagGossipSteps(1, 0.5), 1u);
}

TEST(TopologyTest, LambdaAgreesWithADenseEigenSolve) {
  std::vector<GraphCase> cases(kGraphs.begin(), kGraphs.end());
  cases.push_back({TopologyKind::kExponential, 64});
  cases.push_back({TopologyKind::kTorus, 64});
  for (const GraphCase& graph : cases) {
    for (const MixingRule rule : kRules) {
      SCOPED_TRACE(CaseName(graph, rule));
      const Topology topology{graph.kind, graph.peers};
      EXPECT_NEAR(Spectrum(topology, rule).lambda, DenseLambda(topology, rule), 1e-6);
    }
  }
  // Closed forms: complete 0, star 1 - 1/n (MH), 4 x 4 torus 0.6 (lambda_2 = -lambda_n: a tie
  // that iterating W^2 handles).
  EXPECT_NEAR(Spectrum({TopologyKind::kComplete, 10}, MixingRule::kMetropolisHastings).lambda, 0.0,
              1e-6);
  EXPECT_NEAR(Spectrum({TopologyKind::kStar, 10}, MixingRule::kMetropolisHastings).lambda, 0.9,
              1e-6);
  EXPECT_NEAR(Spectrum({TopologyKind::kTorus, 16}, MixingRule::kMetropolisHastings).lambda, 0.6,
              1e-6);
  const RandomRegular random = Draw(40, 4, 3);
  ASSERT_TRUE(random.check.ok());
  const OwnedGraph path = FromEdges(5, {{1, 2}, {2, 3}, {3, 4}, {4, 5}});
  for (const MixingRule rule : kRules) {
    EXPECT_NEAR(Spectrum(random.topology(), rule).lambda, DenseLambda(random.topology(), rule),
                1e-6);
    EXPECT_NEAR(Spectrum(path.topology(), rule).lambda, DenseLambda(path.topology(), rule), 1e-6);
  }
  // Sparser graphs mix slower: the ring's gap is the smallest.
  const double ring = Spectrum({TopologyKind::kRing, 16}, MixingRule::kMetropolisHastings).lambda;
  const double torus = Spectrum({TopologyKind::kTorus, 16}, MixingRule::kMetropolisHastings).lambda;
  const double exponential =
      Spectrum({TopologyKind::kExponential, 16}, MixingRule::kMetropolisHastings).lambda;
  EXPECT_GT(ring, torus);
  EXPECT_GT(torus, exponential);
}

}  // namespace
}  // namespace edgesgd::protocol
