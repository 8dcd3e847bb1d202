#pragma once

// Runs one sans-I/O protocol session (server, worker or gossip peer; see
// edgesgd/protocol/session.h) over real TCP connections — the socket twin of the simulator's
// SimNetwork. The driver owns the sockets and the clock and nothing else: it feeds received
// frames, lost links and timer ticks into the session and sends what the session hands out.
// Every protocol decision (rounds, retries, heartbeats, who is admitted) stays in the session.
//
// Connections:
//   - listening (server, gossip peer): an accepted connection is anonymous until its first
//     frame, whose envelope names the sender; it is then bound to that peer id (a newer
//     connection of the same peer replaces the older one: a restarted worker). A connection that
//     sends no valid first frame within DriverOptions::hello_timeout_ns, sends an invalid one,
//     or names an id outside 1..max_peer_id is closed and counted.
//   - dialled (worker -> server, gossip peer -> neighbours): the driver keeps connecting, with
//     exponential backoff and jitter, for as long as it runs. While a dialled peer is not
//     connected, the newest frame for it waits for the connection (older ones are dropped: the
//     sessions re-send Joins and send a model every round, so only the newest matters).
// A frame for a peer goes out on the peer's dialled connection if it has one, else on the
// newest accepted connection bound to it; with neither it is dropped (counted) — the session's
// own retries cover it.
//
// Framing: frames are size-prefixed (wire format); a prefix above DriverOptions::
// max_frame_bytes or below the minimum closes that connection (counted, logged) without reading
// further. Received frames land in 8-byte aligned buffers as DecodeFrame requires. Every
// connection has TCP_NODELAY, a write deadline, an optional idle (read) deadline and a send
// queue of at most send_queue_frames frames (a connected peer that falls that far behind is
// disconnected: a slow reader must not hold the sender's memory).
//
// Memory: buffers grow to the largest frame seen and are then reused; after warm-up a round
// allocates nothing (tests/alloc/tcp_steady_state_test.cc counts it).
//
// One thread: Run() blocks, and the session (including the worker's gradient computation) runs
// on the calling thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edgesgd/auth/key_ring.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::tcp {

using protocol::PeerId;
using protocol::TimeNs;
using protocol::kNever;

inline constexpr TimeNs kNsPerMs = 1'000'000;

// A TCP address as HOST:PORT (HOST a name or IPv4 address, or [IPv6]).
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
};

// Parses "HOST:PORT" (port 0..65535; 0 on a listen address picks a free port). Returns false
// with a one-line `error` for anything else. Does not touch the network.
bool ParseEndpoint(std::string_view text, Endpoint& out, std::string& error);
// Parses "HOST:PORT,HOST:PORT,...". Returns false with `error` naming the bad item.
bool ParseEndpointList(std::string_view text, std::vector<Endpoint>& out, std::string& error);

struct DialTarget {
  PeerId peer = protocol::kServerPeer;
  Endpoint endpoint;
};

// PEM files for TLS (DriverOptions::tls).
struct TlsFiles {
  std::string certificate;  // this node's certificate (chain)
  std::string private_key;  // its key, unencrypted
  std::string ca;           // the certificate authority that signed every node's certificate
};

// True when this build can run TLS (it found OpenSSL; native Linux builds).
bool TlsAvailable();

struct DriverOptions {
  std::optional<Endpoint> listen;  // accept connections here (server, gossip peer)
  std::vector<DialTarget> dial;    // connect to these (worker: the server; peer: neighbours)
  PeerId max_peer_id = 0xFFFFFFFEu;  // accepted connections must name a sender in 1..this
  // Largest frame (prefix included) this endpoint accepts; capped at wire::kMaxFrameBytes.
  std::size_t max_frame_bytes = wire::kMaxFrameBytes;
  std::size_t send_queue_frames = 8;  // per connection
  TimeNs hello_timeout_ns = 5'000 * kNsPerMs;  // accepted connection: first frame within this
  // Close an accepted connection that received nothing for this long (a dialled one may only
  // ever send, as gossip links do).
  TimeNs idle_timeout_ns = kNever;
  TimeNs write_timeout_ns = 10'000 * kNsPerMs;  // a frame that takes longer to write
  TimeNs reconnect_min_ns = 50 * kNsPerMs;      // first retry delay; doubles per failure
  TimeNs reconnect_max_ns = 2'000 * kNsPerMs;
  // Give up (Run returns kGaveUp) when no dialled connection has been up for this long (a
  // worker whose server is gone for good). kNever: keep trying.
  TimeNs give_up_ns = kNever;
  // Once the session finished: how long Run keeps flushing send queues before returning.
  TimeNs linger_ns = 2'000 * kNsPerMs;
  std::uint64_t seed = 0;  // jitter of reconnect delays
  bool handle_signals = true;  // SIGINT/SIGTERM make Run return kSignal
  const char* log_name = "tcp";  // prefix of log lines
  // Frame authentication (edgesgd/auth/connection_auth.h). When set, every connection opens with
  // the authentication hellos and every frame travels as an HMAC-SHA256 record; a hello or
  // record that fails is counted (auth_rejected), logged and its connection closed. Dialled
  // connections authenticate as `auth_device` (this node's peer id; its key must be in the
  // ring); an accepted connection authenticates as the device its hello names, which its first
  // frame must then name as sender. Null: plain frames. The ring must outlive the driver.
  const auth::KeyRing* auth_keys = nullptr;
  std::uint32_t auth_device = 0;
  // TLS 1.2+ on every connection, below the frames (and the authentication hellos): both sides
  // present their certificate and check the other's against `ca` — the chain only, not the
  // name, since peers are reached by address; auth_keys binds frames to devices. Adds
  // confidentiality to auth_keys' integrity. A handshake that fails, or that does not finish
  // within hello_timeout_ns, is counted (tls_failures), logged and its connection closed.
  // Open fails when the files do not load or TlsAvailable() is false. Unset: plain TCP.
  std::optional<TlsFiles> tls;
};

struct DriverCounters {
  std::uint64_t accepted = 0;            // inbound connections accepted
  std::uint64_t connected = 0;           // outbound connections established
  std::uint64_t connect_failures = 0;    // outbound attempts that failed
  std::uint64_t peers_bound = 0;         // accepted connections identified by a first frame
  std::uint64_t peers_replaced = 0;      // a newer connection of the same peer took over
  std::uint64_t disconnects = 0;         // established connections closed for any reason
  std::uint64_t oversized_frames = 0;    // length prefix above max_frame_bytes
  std::uint64_t malformed_prefixes = 0;  // length prefix below the minimum frame
  std::uint64_t unidentified = 0;        // no / invalid first frame, or an id out of range
  std::uint64_t hello_timeouts = 0;      // of those, silent for hello_timeout_ns
  std::uint64_t idle_timeouts = 0;
  std::uint64_t write_timeouts = 0;
  std::uint64_t queue_overflows = 0;     // a connected peer's queue was full: disconnected
  std::uint64_t auth_rejected = 0;       // hellos/records failing authentication: bad tag,
                                         // replay, unknown device, a sender not its device
  std::uint64_t tls_failures = 0;        // TLS handshakes that failed or timed out
  std::uint64_t frames_unroutable = 0;   // no connection to the peer, or queue full while down
  std::uint64_t frames_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t bytes_sent = 0;
};

enum class DriverStop : std::uint8_t {
  kFinished,  // the session finished and its last frames were flushed (or linger ran out)
  kSignal,    // SIGINT or SIGTERM
  kGaveUp,    // give_up_ns without any dialled connection
  kStopped,   // RequestStop()
};
const char* DriverStopName(DriverStop stop);

class SessionDriver {
 public:
  SessionDriver();
  ~SessionDriver();
  SessionDriver(const SessionDriver&) = delete;
  SessionDriver& operator=(const SessionDriver&) = delete;

  // Binds the listening socket (if any) and resolves the dial targets. Returns false with a
  // one-line `error` (bad address, port in use, name not found).
  bool Open(const DriverOptions& options, std::string& error);

  // The bound listening port (the chosen one when the listen port was 0), or 0.
  std::uint16_t listen_port() const;

  // Called after every call into the session, before its outgoing frames are taken and sent:
  // a server writes its checkpoint here, so no frame of round r+1 leaves before round r is
  // durable; metrics rows are drained here too.
  void SetAfterSessionCall(std::function<void()> hook);

  // Starts the session and runs until it finishes (and its frames are flushed), a signal, give-up
  // or RequestStop. The session must be initialized and not started.
  DriverStop Run(protocol::Session& session);

  // Makes Run return kStopped soon (from a hook or the session's callbacks).
  void RequestStop();

  // The driver's clock: steady-clock nanoseconds since Open (what the session is fed).
  TimeNs Now() const;

  const DriverCounters& counters() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edgesgd::tcp
