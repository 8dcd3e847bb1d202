#pragma once

// The flags of gossip runs (simulate --mode gossip, peer): registration, their checks, and the
// plan every peer derives from them.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/gossip_topology.h"
#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "cli/task.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/gossip_peer_session.h"

namespace edgesgd::cli {

// --gossip, --topology, --gossip-weights, --gossip-rounds, --phase-batches, --consensus-step,
// --no-public-copies.
void AddGossipFlags(CLI::App& command, RunFlags& flags);

// Ok, or a one-line reason the flags do not fit a gossip run (dense models unless CHOCO or BEER,
// plain SGD steps, no server) or the gossip flags do not work together. For CHOCO and BEER
// also the codec's own checks of its flags and whether public copies can track it
// (CheckChocoCodec).
HostResult<> CheckGossipConsistency(const RunFlags& flags);

// Everything every peer of a gossip run derives from the flags, once: the graph, its mixing rule,
// the spectrum of W, what follows from lambda (DeTAG's exchange steps R and rate eta_g) and
// CHOCO's and BEER's codec and consensus step.
struct GossipPlan {
  GossipTopology graph;
  protocol::MixingRule rule = protocol::MixingRule::kMetropolisHastings;
  protocol::MixingSpectrum spectrum;
  protocol::GossipAlgorithm algorithm = protocol::GossipAlgorithm::kDpsgd;
  std::uint32_t steps = 1;  // exchange steps per round
  float eta = 0.0f;         // accelerated gossip rate
  CodecParams codec = protocol::ModelCodec();  // what peers send (identity unless CHOCO, BEER)
  float consensus_step = 1.0f;                 // CHOCO's gamma (1 for the others)
  bool public_copies = true;                   // false: CHOCO's naive baseline
};

// The plan of the flags over `peers` peers, once CheckGossipConsistency passed. Errors: a
// one-line message (a bad --topology, a disconnected graph, ...).
HostResult<GossipPlan> BuildGossipPlan(const RunFlags& flags, std::size_t peers);

// One line on stderr naming the algorithm, graph, weights, lambda, gap, eta_g, R and B (and
// CHOCO's codec and gamma).
void PrintGossipPlan(const char* command, const RunFlags& flags, const GossipPlan& plan);

// The plan's fields (algorithm, graph, weights, lambda, gap, eta_g, R, B, max degree; CHOCO's
// codec and consensus step), written into the summary section the caller has open.
void WriteGossipPlanFields(SummaryWriter& summary, const RunFlags& flags, const GossipPlan& plan);

// The configuration of peer `id` of the plan, with --rounds, --lr, --seed and --round-deadline-s
// as the neighbour deadline.
protocol::GossipConfig BuildGossipConfig(const RunFlags& flags, const Task& task,
                                         const GossipPlan& plan, protocol::PeerId id);

}  // namespace edgesgd::cli
