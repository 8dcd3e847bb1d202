#pragma once

// A gossip peer over TCP, ready to embed: a GossipPeerSession (D-PSGD, gradient tracking or
// DeTAG) with the memory it plans for itself, listening for its neighbours and dialling them
// through a SessionDriver, on the caller's event loop or its own. The caller brings the
// gradient (GossipOptions::gradient and user) and the initial model; every completed round
// reaches it with the peer's model.

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/tcp/session_driver.h"
#include "edgesgd/tcp/session_node.h"

namespace edgesgd::tcp {

struct PeerSettings {
  // This peer's configuration: config.mixing names the peer (its id), its neighbours and its row
  // of the mixing matrix.
  protocol::GossipConfig config;
  // The caller's gradient function and user pointer, samples per step and the initial model
  // (copied by Open).
  protocol::GossipOptions gossip;
  Endpoint listen;  // where neighbours connect; port 0 picks a free port (listen_port())
  // Where each neighbour listens: an entry for every neighbour id of config.mixing (entries of
  // other peers are ignored, so every peer can be given the run's whole list).
  std::vector<DialTarget> neighbours;
  // The connection policy: timeouts, send queue, frame authentication (auth_keys must hold the
  // keys of this peer and of its neighbours), TLS, signals, log name, and max_peer_id (the
  // run's largest peer id). The Peer sets listen, dial, max_frame_bytes and auth_device itself.
  DriverOptions network;
};

// Start's `on_done` runs once the peer ran its rounds (and flushed its last frames), or a signal,
// Stop or the give-up time ended it.
class Peer : public SessionNode<protocol::GossipPeerSession> {
 public:
  // After every completed round: its event and the peer's model at the start of the next one
  // (the final model after the last; the span is valid during the call). Runs inside the loop;
  // may call Stop.
  using RoundCallback =
      std::function<void(const protocol::GossipRoundEvent& round, std::span<const float> model)>;
  // After every rejected frame. Without one, each rejection is logged as a warning.
  using RejectCallback = std::function<void(const protocol::GossipRejectEvent& reject)>;

  Peer() = default;
  explicit Peer(asio::io_context& io) : SessionNode(io) {}

  // Checks that every neighbour has an address, takes the session's memory
  // (GossipPeerSession::ArenaBytes), initialises it, opens the listening socket and resolves
  // the neighbours. Once. Reads `settings` (auth_keys must outlive the Peer). Errors, the
  // message a line for people: kFailedPrecondition (opened before), kInvalidArgument (a
  // neighbour without an address, or what GossipPeerSession::Init refuses) and those of
  // SessionDriver::Open.
  HostResult<> Open(const PeerSettings& settings);

  // Install the callbacks before Start.
  void OnRound(RoundCallback callback) { on_round_ = std::move(callback); }
  void OnReject(RejectCallback callback) { on_reject_ = std::move(callback); }

 private:
  RoundCallback on_round_;
  RejectCallback on_reject_;
};

}  // namespace edgesgd::tcp
