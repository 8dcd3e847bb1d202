#pragma once

// The gossip graph of `--topology` for `edgesgd simulate --mode gossip` (and later `peer`): the
// spec names a graph family or a file, and the result owns whatever adjacency the family needs.
//
//   ring | complete | star | exponential   the families of protocol::TopologyKind
//   torus | torus:RxC                      R x C = n (plain `torus`: the most square grid)
//   random-regular:K[:SEED]                a connected K-regular graph drawn from SEED (default
//                                          the run's --seed)
//   file:PATH                              an edge list, see below
//
// Edge-list file: UTF-8/ASCII text, one undirected edge per line as two peer ids `I J` (1..n,
// separated by spaces or tabs), `#` starts a comment, blank lines are ignored. An edge may be
// written once or in both directions (repeats count once); a self-loop, an id outside 1..n, a
// malformed line or a peer with more than 32 neighbours is an error naming the line, and a
// graph that leaves some peers unreachable is rejected.

#include <cstdint>
#include <string>
#include <vector>

#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/topology.h"

namespace edgesgd::cli {

struct GossipTopology {
  protocol::TopologyKind kind = protocol::TopologyKind::kRing;
  std::uint32_t peers = 1;
  std::uint32_t torus_rows = 0;
  // The adjacency of kGraph topologies (random regular, file), in compressed rows.
  std::vector<std::uint32_t> offsets;
  std::vector<protocol::PeerId> neighbours;
  std::string description;  // e.g. "random regular graph of degree 4 (seed 7)"

  // A view for the protocol layer; valid while this object is alive and unchanged.
  protocol::Topology view() const;
};

// Parses `spec` for `peers` peers (`seed` is the default seed of random graphs) and builds the
// graph: validated and checked to be connected. Errors: a one-line message naming the flag.
HostResult<GossipTopology> MakeGossipTopology(const std::string& spec, std::uint32_t peers,
                                              std::uint64_t seed);

// Reads an edge-list file (format above) for `peers` peers into compressed rows. Errors: a
// one-line message naming the file and line.
HostResult<> ReadEdgeListFile(const std::string& path, std::uint32_t peers,
                              std::vector<std::uint32_t>& offsets,
                              std::vector<protocol::PeerId>& neighbours);

}  // namespace edgesgd::cli
