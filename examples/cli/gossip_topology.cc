#include "cli/gossip_topology.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/flag_error.h"

namespace edgesgd::cli {
namespace {

// A whole-string unsigned decimal number in [1, limit]; false otherwise.
bool ParseCount(const std::string& text, std::uint64_t limit, std::uint64_t& out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 19) {
    return false;
  }
  out = std::strtoull(text.c_str(), nullptr, 10);
  return out >= 1 && out <= limit;
}

}  // namespace

protocol::Topology GossipTopology::view() const {
  protocol::Topology topology;
  topology.kind = kind;
  topology.peers = peers;
  topology.torus_rows = torus_rows;
  if (kind == protocol::TopologyKind::kGraph) {
    topology.graph = protocol::AdjacencyView{offsets, neighbours};
  }
  return topology;
}

HostResult<> ReadEdgeListFile(const std::string& path, std::uint32_t peers,
                              std::vector<std::uint32_t>& offsets,
                              std::vector<protocol::PeerId>& neighbours) {
  std::ifstream file(path);
  if (!file) {
    return FlagError("cannot read topology file " + path + ": " + std::strerror(errno));
  }
  std::vector<std::vector<protocol::PeerId>> rows(static_cast<std::size_t>(peers) + 1);
  std::string line;
  std::size_t number = 0;
  while (std::getline(file, line)) {
    ++number;
    const auto where = [&] { return "topology file " + path + " line " + std::to_string(number); };
    const std::string content = line.substr(0, line.find('#'));
    std::istringstream words(content);
    std::vector<std::string> fields;
    std::string word;
    while (words >> word) fields.push_back(word);
    if (fields.empty()) continue;
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    if (fields.size() != 2 || !ParseCount(fields[0], UINT32_MAX, a) ||
        !ParseCount(fields[1], UINT32_MAX, b)) {
      return FlagError(where() + ": expected an edge as two peer ids `I J`");
    }
    if (a > peers || b > peers) {
      return FlagError(where() + ": peer id outside 1.." + std::to_string(peers) + " (--workers)");
    }
    if (a == b) {
      return FlagError(where() + ": a peer cannot be its own neighbour");
    }
    rows[static_cast<std::size_t>(a)].push_back(static_cast<protocol::PeerId>(b));
    rows[static_cast<std::size_t>(b)].push_back(static_cast<protocol::PeerId>(a));
  }
  if (file.bad()) {
    return FlagError("cannot read topology file " + path);
  }
  offsets.assign(1, 0);
  neighbours.clear();
  for (std::uint32_t peer = 1; peer <= peers; ++peer) {
    std::vector<protocol::PeerId>& row = rows[peer];
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());  // an edge listed both ways
    if (row.size() > protocol::kMaxNeighbours) {
      return FlagError("topology file " + path + ": peer " + std::to_string(peer) + " has " +
                       std::to_string(row.size()) + " neighbours (at most 32)");
    }
    neighbours.insert(neighbours.end(), row.begin(), row.end());
    offsets.push_back(static_cast<std::uint32_t>(neighbours.size()));
  }
  return {};
}

HostResult<GossipTopology> MakeGossipTopology(const std::string& spec, std::uint32_t peers,
                                              std::uint64_t seed) {
  GossipTopology out;
  out.peers = peers;
  const auto fail = [&](const std::string& why) {
    return FlagError("--topology " + spec + ": " + why);
  };
  const std::string family = spec.substr(0, spec.find(':'));
  const std::string argument =
      spec.find(':') == std::string::npos ? std::string() : spec.substr(spec.find(':') + 1);
  const bool has_argument = spec.find(':') != std::string::npos;
  const std::string n_text = std::to_string(peers);
  if (family == "ring" || family == "complete" || family == "star" || family == "exponential") {
    if (has_argument) return fail("takes no parameter");
    out.kind = family == "ring"         ? protocol::TopologyKind::kRing
               : family == "complete"   ? protocol::TopologyKind::kComplete
               : family == "star"       ? protocol::TopologyKind::kStar
                                        : protocol::TopologyKind::kExponential;
    const char* noun = family == "complete"      ? "complete graph"
                       : family == "exponential" ? "exponential graph"
                                                 : family.c_str();
    out.description = std::string(noun) + " of " + n_text + " peers";
  } else if (family == "torus") {
    out.kind = protocol::TopologyKind::kTorus;
    if (has_argument) {
      const std::size_t x = argument.find('x');
      std::uint64_t rows = 0;
      std::uint64_t columns = 0;
      if (x == std::string::npos || !ParseCount(argument.substr(0, x), UINT32_MAX, rows) ||
          !ParseCount(argument.substr(x + 1), UINT32_MAX, columns)) {
        return fail("expected torus:RxC, e.g. torus:4x4");
      }
      if (rows * columns != peers) {
        return fail("R x C must equal --workers (" + n_text + ")");
      }
      out.torus_rows = static_cast<std::uint32_t>(rows);
    }
    std::uint32_t rows = out.torus_rows;
    if (rows == 0) {  // the default the protocol picks, for the description
      for (std::uint32_t r = 1; static_cast<std::uint64_t>(r) * r <= peers; ++r) {
        if (peers % r == 0) rows = r;
      }
    }
    out.description = "torus of " + std::to_string(rows) + " x " + std::to_string(peers / rows) +
                      " peers";
  } else if (family == "random-regular") {
    out.kind = protocol::TopologyKind::kGraph;
    const std::size_t colon = argument.find(':');
    std::uint64_t degree = 0;
    std::uint64_t graph_seed = seed;
    if (!has_argument || !ParseCount(argument.substr(0, colon), 32, degree)) {
      return fail("expected random-regular:K[:SEED] with degree K in 1..32");
    }
    if (colon != std::string::npos) {
      const std::string seed_text = argument.substr(colon + 1);
      if (seed_text.empty() || seed_text.find_first_not_of("0123456789") != std::string::npos ||
          seed_text.size() > 19) {
        return fail("the seed of random-regular:K:SEED must be a number");
      }
      graph_seed = std::strtoull(seed_text.c_str(), nullptr, 10);
    }
    const auto k = static_cast<std::uint32_t>(degree);
    out.offsets.resize(static_cast<std::size_t>(peers) + 1);
    out.neighbours.resize(static_cast<std::size_t>(peers) * k);
    std::vector<std::uint32_t> scratch(protocol::RandomRegularScratchWords(peers, k));
    const Status check = protocol::MakeRandomRegularGraph(
        peers, k, graph_seed, out.offsets, out.neighbours, scratch);
    if (!check.ok()) return fail(check.reason());
    out.description = "random regular graph of degree " + std::to_string(k) + " on " + n_text +
                      " peers (seed " + std::to_string(graph_seed) + ")";
  } else if (family == "file") {
    out.kind = protocol::TopologyKind::kGraph;
    if (argument.empty()) return fail("expected file:PATH");
    EDGESGD_HOST_TRY(ReadEdgeListFile(argument, peers, out.offsets, out.neighbours));
    out.description = "graph of " + argument + " on " + n_text + " peers";
  } else {
    return fail(
        "expected ring, torus, torus:RxC, complete, star, exponential, random-regular:K[:SEED] "
        "or file:PATH");
  }
  const protocol::Topology view = out.view();
  if (const Status check = protocol::ValidateTopology(view); !check.ok()) {
    return fail(check.reason());
  }
  std::vector<std::uint32_t> words(protocol::ConnectivityScratchWords(peers));
  if (const Status check = protocol::CheckConnected(view, words); !check.ok()) {
    return fail(check.reason());
  }
  return out;
}

}  // namespace edgesgd::cli
