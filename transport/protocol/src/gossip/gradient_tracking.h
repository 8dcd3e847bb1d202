#pragma once

// Gradient tracking (docs/algorithms.md §6): dense gossip of the model x and a tracker y of the
// network's average gradient, R exchange steps per round of accelerated gossip AG (plain gossip
// with R = 1, eta_g = 0):
//
//   x_{k+1} = AG(X) - lr * y_k ;  y_{k+1} = AG(Y) + g_k - g_{k-1}     (y_0 = g_0, g_{-1} = g_0)
//
// two dense frames per neighbour and step (GossipVector::kModel, kTracker). The mean of the y_i
// is the mean of the g_{k-1,i}, so the trackers steer every peer along the network's average
// gradient and tracking reaches the exact optimum on heterogeneous data, where D-PSGD keeps a
// bias. A failed gradient call keeps g_{k-1}, leaving the tracked mean unchanged. DeTAG
// (detag.cc) is this update with R >= 1 steps and eta_g.

#include "gossip_rule.h"

namespace edgesgd::protocol::internal {

// The update gt and DeTAG share: BeginRound and AfterMix of their rules.
void BeginTrackingRound(const GossipState& state, bool gradient_ok);
void AfterTrackingMix(const GossipState& state, std::size_t vector);

}  // namespace edgesgd::protocol::internal
