// Topologies and mixing matrices: neighbour lists, Metropolis-Hastings and max-degree weights,
// and the properties D-PSGD relies on (symmetric, doubly stochastic, zero off the graph).

#include "edgesgd/protocol/topology.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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

constexpr std::array<GraphCase, 14> kGraphs = {{
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
      ASSERT_TRUE(ValidateTopology(topology).ok());
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
        EXPECT_TRUE(ValidateMixingRow(r).ok()) << ValidateMixingRow(r).reason;
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
  const ConfigCheck too_dense = ValidateTopology({TopologyKind::kComplete, kMaxNeighbours + 2});
  EXPECT_EQ(too_dense.status, Status::InvalidArgument());
  EXPECT_STRNE(too_dense.reason, "ok");
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

}  // namespace
}  // namespace edgesgd::protocol
