#pragma once

// One decentralized algorithm as a gossip peer runs it (not part of the public API). The session
// owns frames, mixing, deadlines and the exchange bookkeeping; a rule holds what differs between
// the algorithms of docs/algorithms.md §6: how many vectors travel and how (dense, or deltas
// against public copies), which parameters it accepts, and its update of x (and y) at a round's
// start and after each step's mixing. Each algorithm is its own file, registered once in
// registry.cc.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/status.h"
#include "edgesgd/protocol/gossip_peer_session.h"

namespace edgesgd::protocol::internal {

// Indices of the exchanged vectors.
inline constexpr std::size_t kModelVector = 0;
inline constexpr std::size_t kTrackerVector = 1;

// The session's vectors as a rule updates them: the working x and y (y empty without a tracker),
// their step's mix (dense: already applied to them; with public copies: the consensus sum
// sum_{j heard} W_ij (ẑ_j - ẑ_i)), y_k at the round's start, and g_k and g_{k-1}.
struct GossipState {
  const GossipConfig& config;
  std::uint32_t round = 0;
  bool last_step = false;  // the closing step is the round's last (always with R = 1)
  std::span<float> model;
  std::span<float> tracker;
  std::span<const float> model_mix;
  std::span<const float> tracker_mix;
  std::span<const float> tracker_start;
  std::span<float> gradient;
  std::span<float> previous_gradient;  // empty without a tracker
};

class GossipRule {
 public:
  GossipRule(const GossipRule&) = delete;
  GossipRule& operator=(const GossipRule&) = delete;

  // Lower-case name, as GossipAlgorithmName returns it.
  const char* name() const { return name_; }
  // Vectors exchanged each step: 1 (the model) or 2 (the model and a tracker).
  std::size_t vectors() const { return vectors_; }
  // Whether it sends config.codec's deltas against public copies rather than dense vectors.
  bool compressed() const { return compressed_; }

  // The rule's own parameters of `config` (codec, gamma, public copies, R, eta_g); kOk or
  // kInvalidArgument with the reason. Does not allocate.
  virtual Status Validate(const GossipConfig& config) const = 0;
  // A round's start, g_k computed at x_k (`gradient_ok` false: the calls failed and g_k holds
  // nothing usable), before the round's frames are built.
  virtual void BeginRound(const GossipState& state, bool gradient_ok) const = 0;
  // With public copies: the encoder's input z - ẑ_i for vector `z` of this round, whose public
  // copy is `own_copy`. Sends the vector itself unless a rule says otherwise.
  virtual void DeltaInput(const GossipState& state, std::span<const float> z,
                          std::span<const float> own_copy, std::span<float> input) const;
  // Vector `vector` of the closing step has been mixed (the model first, then the tracker).
  virtual void AfterMix(const GossipState& state, std::size_t vector) const = 0;

 protected:
  constexpr GossipRule(const char* name, std::size_t vectors, bool compressed)
      : name_(name), vectors_(vectors), compressed_(compressed) {}
  // Rules are constant objects, never destroyed through this interface (no deleting destructor,
  // so the heap-free library references no operator delete).
  ~GossipRule() = default;

 private:
  const char* name_;
  std::size_t vectors_;
  bool compressed_;
};

// The rule of `algorithm`, or nullptr for a value that names none.
const GossipRule* FindGossipRule(GossipAlgorithm algorithm);

// Each algorithm's rule (gossip/<name>.cc).
const GossipRule& DpsgdRule();
const GossipRule& GradientTrackingRule();
const GossipRule& DetagRule();
const GossipRule& ChocoRule();
const GossipRule& BeerRule();

// Parameter checks the rules' Validate share (errors: kInvalidArgument with the reason).
// The identity codec and gamma = 1: the algorithm exchanges dense vectors.
Status CheckDenseExchange(const GossipConfig& config);
// A codec CheckChocoCodec accepts and gamma in (0, 1].
Status CheckCompressedExchange(const GossipConfig& config);
// public_copies = true.
Status CheckPublicCopies(const GossipConfig& config);
// R = 1 and eta_g = 0.
Status CheckOnePlainStep(const GossipConfig& config);

// Update pieces the rules share.
// A failed gradient: g_k = 0, no gradient step this round.
void DropGradient(const GossipState& state);
// A failed gradient of a tracker: g_k = g_{k-1}, which leaves the tracked mean unchanged (0 in
// round 0, which has no g_{k-1}).
void ReuseGradient(const GossipState& state);
// Round 0 of a tracker: y_0 = g_0 and g_{-1} = g_0.
void StartTracker(const GossipState& state);
// g_{k-1} = g_k.
void KeepGradient(const GossipState& state);

}  // namespace edgesgd::protocol::internal
