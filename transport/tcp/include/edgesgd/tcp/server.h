#pragma once

// A parameter server over TCP, ready to embed: the ServerSession of a run with the memory it
// plans for itself, a SessionDriver listening for workers, and durable checkpoints — on the
// caller's event loop (Start, then run the loop) or on its own (Run blocks; see SessionNode). Every
// closed round reaches the caller with the model after it, so an application evaluates, logs or
// stops the run as it goes; the run's configuration reaches every worker in its Welcome.
//
//   tcp::Server server(io);
//   if (HostResult<> opened = server.Open(settings); !opened.ok()) { /* print opened.message() */ }
//   server.OnRound([&](const protocol::RoundEvent& round, std::span<const float> model) { ... });
//   server.Start([&](tcp::DriverStop stop) { ... });   // then io.run()

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/tcp/session_driver.h"
#include "edgesgd/tcp/session_node.h"

namespace edgesgd::tcp {

struct ServerSettings {
  protocol::RunConfig run;
  protocol::ServerOptions server;  // server.workers workers, ids 1..workers
  // The codecs the server can run (run.codec among them); must outlive the Server.
  const CodecRegistry* codecs = &AllCodecs();
  // The round-0 model (run.layout.dimension() finite floats). Owned, so a temporary assigned
  // to it cannot dangle.
  std::vector<float> initial_model;
  Endpoint listen;  // port 0 picks a free port (listen_port())
  // The connection policy: timeouts, send queue, frame authentication (auth_keys holds the
  // workers' keys), TLS, signals, log name. The Server sets listen, dial, max_peer_id (the
  // worker count), max_frame_bytes (the run's largest Update frame) and auth_device itself.
  DriverOptions network;
  // Durable checkpoints: the committed state (ServerSession::SaveState) goes to this file,
  // atomically (temporary file, fsync, rename, fsync of the directory), every checkpoint_every
  // rounds and after the last, before any frame of the next round leaves. Empty: none.
  std::string checkpoint;
  // >= 1; K > 1 may lose up to K-1 rounds on a crash, and is refused for a private run: the
  // privacy ledger travels in the checkpoint, and lost rounds re-run would spend privacy twice.
  std::uint32_t checkpoint_every = 1;
  // Continue from `checkpoint`, written by a run of the same run and server settings: the run
  // goes on at the saved round with the saved model; workers rejoin and get the model.
  bool resume = false;
};

// Start's `on_done` runs once the run ended (all rounds done and the last frames flushed), a
// signal or Stop ended it, or the Server stopped itself (status() says why).
class Server : public SessionNode<protocol::ServerSession> {
 public:
  // After every closed round: its event and the server's model once the round is applied (the
  // span is valid during the call). Runs inside the loop; may call Stop.
  using RoundCallback =
      std::function<void(const protocol::RoundEvent& round, std::span<const float> model)>;
  // After every rejected frame. Without one, each rejection is logged as a warning.
  using RejectCallback = std::function<void(const protocol::RejectEvent& reject)>;

  Server() = default;
  explicit Server(asio::io_context& io) : SessionNode(io) {}

  // Checks the settings, takes the session's memory (ServerSession::ArenaBytes), initialises it
  // with the initial model, restores the checkpoint when resuming (and logs the round), then
  // opens the listening socket. Once. Reads `settings` (auth_keys must outlive the Server).
  // Errors, the message a line for people naming the file or address and the system's
  // message: kFailedPrecondition (opened before), kInvalidArgument (resume without a checkpoint
  // file, checkpoint_every 0, or what ServerSession::Init refuses), kUnavailable (the
  // checkpoint cannot be read), those of ServerSession::RestoreState (a damaged checkpoint or
  // another run's) and of SessionDriver::Open.
  HostResult<> Open(const ServerSettings& settings);

  // Install the callbacks before Start.
  void OnRound(RoundCallback callback) { on_round_ = std::move(callback); }
  void OnReject(RejectCallback callback) { on_reject_ = std::move(callback); }

  // Ok, or why the Server stopped the run itself: a checkpoint that could not be written
  // (kUnavailable, the message naming the file and why) or encoded. The run's own outcome is
  // the session's: session().Finished(), session().status() (kDataLoss: the model diverged).
  const HostResult<>& status() const { return status_; }

  // After Open refused a checkpoint of another configuration: the first setting that differs,
  // as protocol::ForEachRunConfigField names it ("k_ratio", "workers", "model"); else empty.
  std::string_view resume_differs_in() const { return resume_differs_in_; }

 private:
  // After every call into the session: the checkpoint, then the callbacks.
  void AfterSessionCall();
  // Writes the committed state to the checkpoint file. Errors as SaveState's, or kUnavailable
  // (the file cannot be written).
  HostResult<> SaveCheckpoint();

  RoundCallback on_round_;
  RejectCallback on_reject_;
  HostResult<> status_;
  std::vector<std::byte> state_;  // SaveState's bytes
  std::string checkpoint_;
  std::uint32_t checkpoint_every_ = 1;
  std::uint32_t saved_round_ = 0;
  const char* log_name_ = "";
  std::string_view resume_differs_in_;
};

}  // namespace edgesgd::tcp
