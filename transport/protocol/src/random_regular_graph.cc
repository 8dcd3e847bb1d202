// Random regular graphs for gossip (docs/algorithms.md): the configuration model, redrawn until the
// graph is simple and connected.
#include <algorithm>

#include "edgesgd/core/random.h"
#include "edgesgd/protocol/topology.h"

namespace edgesgd::protocol {

Status MakeRandomRegularGraph(std::uint32_t peers, std::uint32_t degree, std::uint64_t seed,
                              std::span<std::uint32_t> offsets, std::span<PeerId> neighbours,
                              std::span<std::uint32_t> scratch) {
  if (peers < 2 || peers > kMaxTopologyPeers) {
    return Status::InvalidArgument("a random regular graph needs 2..16777215 peers");
  }
  if (degree == 0 || degree >= peers || degree > kMaxNeighbours) {
    return Status::InvalidArgument("a random regular graph's degree must be in 1..min(n - 1, 32)");
  }
  const std::size_t ends = static_cast<std::size_t>(peers) * degree;
  if (ends % 2 != 0) {
    return Status::InvalidArgument("a random regular graph needs n * degree even");
  }
  if (offsets.size() != static_cast<std::size_t>(peers) + 1 || neighbours.size() != ends ||
      scratch.size() < RandomRegularScratchWords(peers, degree)) {
    return Status::InvalidArgument("random regular graph buffers have the wrong sizes");
  }
  for (std::uint32_t i = 0; i <= peers; ++i) offsets[i] = i * degree;
  const std::span<std::uint32_t> stubs = scratch.first(ends);  // free edge ends: 0-based peers
  const std::span<std::uint32_t> filled = scratch.subspan(ends, peers);
  const std::span<std::uint32_t> parent = scratch.subspan(ends + peers, peers);
  const auto adjacent = [&](std::uint32_t a, std::uint32_t b) {
    const PeerId* row = neighbours.data() + static_cast<std::size_t>(a) * degree;
    return std::find(row, row + filled[a], b + 1) != row + filled[a];
  };
  const auto suitable = [&](std::uint32_t a, std::uint32_t b) { return a != b && !adjacent(a, b); };

  constexpr std::uint32_t kAttempts = 100;
  for (std::uint32_t attempt = 0; attempt < kAttempts; ++attempt) {
    CounterRng rng(seed, attempt, 0, StreamId(RandomPurpose::kUser, 0x70706F));
    for (std::size_t e = 0; e < ends; ++e) stubs[e] = static_cast<std::uint32_t>(e / degree);
    std::fill(filled.begin(), filled.end(), 0u);
    std::size_t free_ends = ends;
    bool stuck = false;
    while (free_ends > 0 && !stuck) {
      // Random pairs of free ends until one is suitable; when many draws fail, search every
      // pair, and give the attempt up when none is left.
      std::size_t first = 0;
      std::size_t second = 0;
      bool found = false;
      for (int tries = 0; tries < 64 && !found; ++tries) {
        first = rng.NextBelow(static_cast<std::uint32_t>(free_ends));
        second = rng.NextBelow(static_cast<std::uint32_t>(free_ends - 1));
        if (second >= first) ++second;
        found = suitable(stubs[first], stubs[second]);
      }
      for (std::size_t i = 0; i < free_ends && !found; ++i) {
        for (std::size_t j = i + 1; j < free_ends && !found; ++j) {
          if (suitable(stubs[i], stubs[j])) {
            first = i;
            second = j;
            found = true;
          }
        }
      }
      if (!found) {
        stuck = true;
        break;
      }
      const std::uint32_t a = stubs[first];
      const std::uint32_t b = stubs[second];
      neighbours[static_cast<std::size_t>(a) * degree + filled[a]++] = b + 1;
      neighbours[static_cast<std::size_t>(b) * degree + filled[b]++] = a + 1;
      // Remove both ends (the larger position first, so the smaller stays valid).
      const std::size_t high = std::max(first, second);
      const std::size_t low = std::min(first, second);
      stubs[high] = stubs[--free_ends];
      stubs[low] = stubs[--free_ends];
    }
    if (stuck) continue;
    for (std::uint32_t p = 0; p < peers; ++p) {
      const std::span<PeerId> row = neighbours.subspan(offsets[p], offsets[p + 1] - offsets[p]);
      std::sort(row.begin(), row.end());
    }
    Topology graph;
    graph.kind = TopologyKind::kGraph;
    graph.peers = peers;
    graph.graph = AdjacencyView{offsets, neighbours};
    if (CheckConnected(graph, parent).ok()) return Status::Ok();
  }
  return Status::InvalidArgument(
      "no connected random regular graph of this degree was found in 100 "
      "draws (degree 1 and 2 are rarely connected: use 3 or more)");
}

}  // namespace edgesgd::protocol
