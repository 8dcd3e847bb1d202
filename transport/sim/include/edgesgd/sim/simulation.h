#pragma once

// Whole runs in virtual time, ready to embed: a parameter-server run (ServerSimulation) or a
// gossip run (GossipSimulation) of the real protocol sessions — the ones the TCP transport
// drives — set up with their memory plans on a SimNetwork (per-device links and compute speed,
// faults) from the run's configuration, the initial model and the caller's gradient. Every
// closed round reaches a callback with the model, so the caller evaluates or logs as the run
// goes; Run returns the final model, the network's counters and the memory plan. The same
// settings give the same run, byte for byte.
//
//   sim::ServerSimulation simulation;
//   if (HostResult<> init = simulation.Init(settings); !init.ok()) { /* print init.message() */ }
//   simulation.OnRound([&](const protocol::RoundEvent& round, std::span<const float> model) {});
//   const sim::SimulationResult result = simulation.Run();
//
// Host code: it allocates at Init (sessions, arenas, the network's tables) and not per round
// once the network is warm.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/secagg/ecdsa.h"
#include "edgesgd/sim/device_counters.h"
#include "edgesgd/sim/device_profile.h"
#include "edgesgd/sim/sim_config.h"
#include "edgesgd/sim/sim_network.h"

namespace edgesgd::sim {

// The loss gradient of device `device` (0-based: worker or gossip peer device + 1) at `point`
// for local step `local_step` of round `round`, written into `gradient` (as
// protocol::GradientFunction). A non-ok Status makes that device skip the round.
using DeviceGradient =
    std::function<Status(std::size_t device, std::span<const float> point, std::uint32_t round,
                         std::uint32_t local_step, std::span<float> gradient)>;

// One simulated worker or gossip peer.
struct SimDevice {
  DeviceProfile profile;  // its access link and compute speed
  // Training samples behind one gradient call: the compute time the network charges, and a
  // worker's Update.samples (WorkerOptions / GossipOptions::samples_per_step).
  std::uint32_t samples_per_step = 0;
  // A worker's most local steps per round (WorkerOptions::local_step_limit); 0: the run's H.
  std::uint32_t local_step_limit = 0;
};

// Arena bytes of the participants, as the sessions plan them.
struct SimMemoryPlan {
  std::size_t server_arena_bytes = 0;  // 0 in a gossip run
  std::size_t device_arena_bytes = 0;  // a worker's; a gossip run's largest peer's
};

// How a run ended.
struct SimulationResult {
  StopReason stop = StopReason::kRunning;
  bool finished = false;         // every round ran, and the run did not fail
  // Why the run failed: the server's (or the first failed peer's) session status, e.g.
  // kDataLoss when the model diverged in round `rounds` + 1. Ok otherwise.
  Status status;
  std::uint32_t rounds = 0;      // rounds completed (a gossip round: by every peer)
  protocol::TimeNs time_ns = 0;  // virtual time of the last event
  // The final model: the server's, or the mean of the peers' in a gossip run.
  std::vector<float> model;
  DeviceCounters network;  // every device's counters summed (faults included)
  SimMemoryPlan memory;
};

namespace internal {

// The `user` of a session's gradient callback: which device asks, and the caller's gradient.
struct DeviceBinding {
  const DeviceGradient* gradient = nullptr;
  std::size_t device = 0;
  std::uint64_t secret = 0;  // stands in for the device's entropy (secure aggregation keys)
};

// Arena storage of one participant, at a stable address (its session keeps pointers into it):
// anonymous pages mapped for it alone, zero until written, which the arena does not write. A
// device's memory is backed only where its session uses it, so devices never sampled cost next
// to nothing. (Empty when the mapping fails: the session's Init then reports the arena short.)
struct OwnedArena {
  explicit OwnedArena(std::size_t bytes);
  ~OwnedArena();
  OwnedArena(const OwnedArena&) = delete;
  OwnedArena& operator=(const OwnedArena&) = delete;
  // Gives the whole pages inside `region` (memory of an OwnedArena) back to the system; they
  // read as zeros afterwards.
  static void ReleasePages(std::span<std::byte> region);
  std::span<std::byte> storage;
  Arena arena;
};

}  // namespace internal

struct ServerSimulationSettings {
  protocol::RunConfig run;
  protocol::ServerOptions server;  // server.workers workers
  // The codecs the server and its workers can run (run.codec among them); must outlive the
  // simulation.
  const CodecRegistry* codecs = &AllCodecs();
  // The round-0 model (run.layout.dimension() finite floats). Owned, so a temporary assigned
  // to it cannot dangle.
  std::vector<float> initial_model;
  SimConfig network;                     // seed, compute cost per sample, faults, limits
  std::vector<SimDevice> workers;        // one per worker; worker w is peer w + 1
  DeviceProfile server_device;           // the server's link (default: unlimited)
  DeviceGradient gradient;
  // After each update it sends, a device gives the pages of its WorkerSession::IdleBuffers()
  // back to the system, so a fleet whose devices sit most rounds out keeps only what each
  // device carries from round to round (its residual, momentum and last update frame). The run
  // is the same either way; releasing costs page faults when the device trains again, so it
  // pays when participation is below 1.
  bool release_idle_memory = false;
};

class ServerSimulation {
 public:
  // After every closed round: its event and the server's model once the round is applied (valid
  // during the call). It may read the simulation (DeaveragedModel) but not run it.
  using RoundCallback =
      std::function<void(const protocol::RoundEvent& round, std::span<const float> model)>;
  // After every frame the server rejected.
  using RejectCallback = std::function<void(const protocol::RejectEvent& reject)>;

  ServerSimulation() = default;
  ServerSimulation(const ServerSimulation&) = delete;
  ServerSimulation& operator=(const ServerSimulation&) = delete;

  // Creates the server and worker sessions with their arenas and registers them on the
  // network. Once. Reads `settings` (keeping a copy of the gradient function). Errors, the
  // message naming the participant ("worker 3: ..."): kFailedPrecondition (initialised
  // before), kInvalidArgument (not one device per worker, no gradient) and what
  // ServerSession::Init or WorkerSession::Init refuse.
  HostResult<> Init(const ServerSimulationSettings& settings);

  void OnRound(RoundCallback callback) { on_round_ = std::move(callback); }
  void OnReject(RejectCallback callback) { on_reject_ = std::move(callback); }

  // Runs to the end (every session finished, or a limit of SimConfig). Once, after Init.
  SimulationResult Run();

  // DEF-A's read-out of the server's model, x - mean_i e_i over the workers' error-feedback
  // residuals (mean aggregation; training is unaffected), into a buffer of the simulation that
  // stays valid until the next call; the server's model when the residuals cannot be read out
  // (no error feedback yet, majority vote).
  std::span<const float> DeaveragedModel();

  const protocol::ServerSession& server() const { return server_; }
  const protocol::WorkerSession& worker(std::size_t index) const { return *workers_[index]; }

 private:
  // After every event: the server's closed rounds and rejections to the callbacks.
  // Releases worker `peer`'s idle buffers once per update it sent.
  void ReleaseIdle(protocol::PeerId peer);
  void Drain();
  // Signed secure rounds: an ECDSA key per device, drawn from the run's seed (reproducible, as
  // the rest of a simulation), and the verifier of all of them.
  HostResult<> GenerateSigningKeys(std::uint64_t seed, std::size_t devices);

  DeviceGradient gradient_;
  std::vector<internal::DeviceBinding> bindings_;
  SimMemoryPlan memory_;
  // Declared in this order: sessions point into their arenas, the network at the sessions.
  std::unique_ptr<internal::OwnedArena> server_arena_;
  std::vector<std::unique_ptr<internal::OwnedArena>> worker_arenas_;
  protocol::ServerSession server_;
  std::vector<std::unique_ptr<protocol::WorkerSession>> workers_;
  std::vector<secagg::DeviceVerifyingKey> verifying_keys_;
  std::vector<std::unique_ptr<secagg::EcdsaSigner>> signers_;
  std::unique_ptr<secagg::EcdsaVerifier> verifier_;
  // With release_idle_memory: per worker, the updates it had sent when its idle buffers were
  // last released (released again only after it has sent another).
  std::vector<std::uint64_t> released_after_;
  bool release_idle_memory_ = false;
  std::optional<SimNetwork> network_;
  RoundCallback on_round_;
  RejectCallback on_reject_;
  std::vector<std::span<const float>> residuals_;  // DeaveragedModel's scratch
  std::vector<float> readout_;
};

struct GossipSimulationSettings {
  // Peer i + 1's configuration (its mixing row names it); every peer shares layout and rounds.
  std::vector<protocol::GossipConfig> peers;
  // Every peer's round-0 model (the layout's dimension in finite floats). Owned, so a temporary
  // assigned to it cannot dangle.
  std::vector<float> initial_model;
  SimConfig network;
  std::vector<SimDevice> devices;  // one per peer
  DeviceGradient gradient;
  // The codecs CHOCO peers encode and decode with (their config.codec among them); must outlive
  // the simulation.
  const CodecRegistry* codecs = &AllCodecs();
};

// A round every peer has completed.
struct GossipRound {
  std::uint32_t round = 0;
  protocol::TimeNs time_ns = 0;  // when the last peer completed it
  // Per peer: the mean over peers of each one's cumulative bytes sent / received.
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
};

// The peers' models at one moment: their mean and the mean squared distance from it.
struct PeerAverage {
  std::span<const float> model;  // mean_i x_i
  double consensus = 0;          // mean_i ||x_i - mean x||^2
};

class GossipSimulation {
 public:
  // After every round all peers completed (in round order). A fast peer may already hold a
  // later round's model; Average() reads the peers as they are.
  using RoundCallback = std::function<void(const GossipRound& round)>;

  GossipSimulation() = default;
  GossipSimulation(const GossipSimulation&) = delete;
  GossipSimulation& operator=(const GossipSimulation&) = delete;

  // Creates the peer sessions with their arenas and registers them on the network. Once. Reads
  // `settings` (keeping a copy of the gradient function). Errors, the message naming the peer
  // ("peer 3: ..."): kFailedPrecondition (initialised before), kInvalidArgument (no peers, not
  // one device per peer, a configuration naming another peer, no gradient) and what
  // GossipPeerSession::Init refuses.
  HostResult<> Init(const GossipSimulationSettings& settings);

  void OnRound(RoundCallback callback) { on_round_ = std::move(callback); }

  // Runs to the end (every peer finished, or a limit of SimConfig). Once, after Init.
  SimulationResult Run();

  // The peers' current models averaged, into a buffer of the simulation that stays valid until
  // the next call (summed in peer order, each divided by the number of peers).
  PeerAverage Average();

  const protocol::GossipPeerSession& peer(std::size_t index) const { return *peers_[index]; }

 private:
  // After every event: counts each peer's completed rounds and reports every round all peers
  // completed, in order.
  void Drain();

  DeviceGradient gradient_;
  std::vector<internal::DeviceBinding> bindings_;
  SimMemoryPlan memory_;
  // Declared in this order: sessions point into their arenas, the network at the sessions.
  std::vector<std::unique_ptr<internal::OwnedArena>> arenas_;
  std::vector<std::unique_ptr<protocol::GossipPeerSession>> peers_;
  std::optional<SimNetwork> network_;
  RoundCallback on_round_;
  std::vector<std::uint32_t> completed_;                    // per round: peers that completed it
  std::vector<std::uint64_t> bytes_sent_, bytes_received_;  // per peer, cumulative
  std::uint32_t next_round_ = 0;                            // the next round to report
  std::vector<float> average_;
};

}  // namespace edgesgd::sim
