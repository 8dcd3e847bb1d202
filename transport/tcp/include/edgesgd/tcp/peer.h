#pragma once

// A gossip peer over TCP, ready to embed: a GossipPeerSession (D-PSGD, gradient tracking or
// DeTAG) with the memory it plans for itself, listening for its neighbours and dialling them
// through a SessionDriver, on the caller's event loop or its own. The caller brings the
// gradient (GossipOptions::gradient and user) and the initial model; every completed round
// reaches it with the peer's model.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/core/status.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/tcp/session_driver.h"

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

class Peer {
 public:
  // After every completed round: its event and the peer's model at the start of the next one
  // (the final model after the last; the span is valid during the call). Runs inside the loop;
  // may call Stop.
  using RoundCallback =
      std::function<void(const protocol::GossipRoundEvent& round, std::span<const float> model)>;
  // After every rejected frame. Without one, each rejection is logged as a warning.
  using RejectCallback = std::function<void(const protocol::GossipRejectEvent& reject)>;

  // On an event loop of its own (Run).
  Peer();
  // On the caller's loop `io`, which must outlive the Peer (see SessionDriver for when a started
  // one may be destroyed).
  explicit Peer(asio::io_context& io);
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Checks that every neighbour has an address, takes the session's memory
  // (GossipPeerSession::ArenaBytes), initialises it, opens the listening socket and resolves
  // the neighbours. Once. Reads `settings` (auth_keys must outlive the Peer). Errors, with
  // `detail` a line for people: kFailedPrecondition (opened before), kInvalidArgument (a
  // neighbour without an address, or what GossipPeerSession::Init refuses) and those of
  // SessionDriver::Open.
  Status Open(const PeerSettings& settings, std::string& detail);

  // Install the callbacks before Start.
  void OnRound(RoundCallback callback);
  void OnReject(RejectCallback callback);

  // Starts the rounds on the loop after a successful Open; `on_done` runs once the peer ran its
  // rounds (and flushed its last frames), or a signal, Stop or the give-up time ended it. Call
  // once, from the loop's thread.
  void Start(SessionDriver::DoneCallback on_done);
  // Start, then runs the loop until the Peer is done (see SessionDriver::Run).
  DriverStop Run();
  // Ends the run soon (kStopped), from a callback or the loop's thread.
  void Stop();

  // The bound listening port, once open.
  std::uint16_t listen_port() const;

  // The session (model, round, counters, status) and the connections' counters.
  const protocol::GossipPeerSession& session() const;
  const DriverCounters& network_counters() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edgesgd::tcp
