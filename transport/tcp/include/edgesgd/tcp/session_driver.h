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
// allocates nothing (tests/alloc/tcp_steady_state_test.cc counts it). A connection's receive
// buffer goes back to its initial size when the connection closes. Before its first frame an
// accepted connection holds at most max_first_frame_bytes, and at most
// max_unidentified_connections such connections are open; when the process runs out of
// descriptors, accepting pauses (and the oldest unidentified connection is closed) instead of
// retrying at once.
//
// Event loop: a driver runs on an Asio io_context — its own (Run() blocks until the driver is
// done) or the caller's (Start() returns at once; the caller runs the loop, with its own work
// beside the driver's, and learns the end from the completion callback). The session, its hooks
// and callbacks (including a worker's gradient computation) run inside the loop's handlers, on
// whichever thread runs the loop; call the driver from that thread only. The driver never polls:
// its timers are armed for the next deadline that exists (the session's wake-up, a connection's
// hello, idle or write deadline, a reconnect, the give-up and linger times), so an idle driver
// leaves the loop idle. It installs signal handlers only when DriverOptions::handle_signals asks.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edgesgd/auth/key_ring.h"
#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/wire/wire_format.h"

// Asio's event loop, declared so that this header stays free of Asio; code that creates one
// includes edgesgd/tcp/asio.h.
namespace asio {
class io_context;
}  // namespace asio

namespace edgesgd::tcp {

using protocol::kNever;
using protocol::PeerId;
using protocol::TimeNs;

inline constexpr TimeNs kNsPerMs = 1'000'000;
// DriverOptions' socket byte counts are capped here (socket options are ints).
inline constexpr std::size_t kMaxSocketOptionBytes = std::size_t{1} << 30;
inline constexpr std::size_t kDefaultReceiveLowWatermarkBytes = std::size_t{256} << 10;

// A TCP address as HOST:PORT (HOST a name or IPv4 address, or [IPv6]).
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
};

// Parses "HOST:PORT" (port 0..65535; 0 on a listen address picks a free port). Does not touch
// the network. Errors: kInvalidArgument, the message quoting the text.
HostResult<Endpoint> ParseEndpoint(std::string_view text);
// Parses "HOST:PORT,HOST:PORT,...". Errors: kInvalidArgument (an empty list, or an item
// ParseEndpoint refuses), the message naming the bad item.
HostResult<std::vector<Endpoint>> ParseEndpointList(std::string_view text);

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
  // An accepted connection's first frame may be at most this long (and at most max_frame_bytes):
  // until then its peer has proved nothing (no record verified, or under plain frames no valid
  // frame), so it cannot make this endpoint size a buffer beyond this. With authentication a
  // dialler's first record is an empty key confirmation, so any endpoint may set the
  // control-frame bound: a server does (workers open with a Join), and so does a gossip peer
  // with keys. A plain gossip peer keeps the default: its neighbours open with a model.
  std::size_t max_first_frame_bytes = wire::kMaxFrameBytes;
  // Accepted connections still waiting for their first frame (TLS and authentication hellos
  // included): one more than this closes the oldest of them. Identified connections are at
  // most one per peer (a newer one replaces the older), so with this all connections are
  // bounded.
  std::size_t max_unidentified_connections = 64;
  std::size_t send_queue_frames = 8;  // per connection
  // SO_SNDBUF of every connection (capped at kMaxSocketOptionBytes; the kernel doubles it
  // and caps it at net.core.wmem_max); 0 keeps the kernel's auto-tuning. A small buffer keeps a
  // large frame's bytes in cache on their way through the kernel: on loopback, 256 KiB on both
  // ends made a dense d = 1e6 round about 10 % faster (docs/cli.md); on a long, fast link it
  // caps throughput near 2 x buffer / round-trip time.
  std::size_t socket_send_buffer_bytes = 0;
  // While a frame's body is read, the reader is woken once this many of its bytes (or all the
  // rest of it) have arrived, not on every segment: on loopback, 256 KiB made a dense d = 1e6
  // round about 10 % faster (docs/cli.md). Bytes held back this way still count as a sign of
  // life for idle_timeout_ns. Capped at kMaxSocketOptionBytes; 0 or 1: wake on every
  // arrival. Not applied under TLS.
  std::size_t receive_low_watermark_bytes = kDefaultReceiveLowWatermarkBytes;
  TimeNs hello_timeout_ns = 5'000 * kNsPerMs;  // accepted connection: first frame within this
  // Close an accepted connection that received nothing for this long (a dialled one may only
  // ever send, as gossip links do).
  TimeNs idle_timeout_ns = kNever;
  TimeNs write_timeout_ns = 10'000 * kNsPerMs;  // a frame that takes longer to write
  TimeNs reconnect_min_ns = 50 * kNsPerMs;      // first retry delay; doubles per failure
  TimeNs reconnect_max_ns = 2'000 * kNsPerMs;
  // Give up (kGaveUp) when no dialled connection has been up — TCP, TLS and authentication
  // hellos done — for this long (a worker whose server is gone for good, or refuses it).
  // kNever: keep trying.
  TimeNs give_up_ns = kNever;
  // Once the session finished: how long Run keeps flushing send queues before returning.
  TimeNs linger_ns = 2'000 * kNsPerMs;
  std::uint64_t seed = 0;  // jitter of reconnect delays
  // SIGINT/SIGTERM stop the driver (kSignal). Off by default: a library must not take the
  // process's signals; a program that owns them (the edgesgd command) asks for it.
  bool handle_signals = false;
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
  std::uint64_t unidentified_evicted = 0;  // of those, closed for max_unidentified_connections
  std::uint64_t accept_backoffs = 0;     // accepts that failed for lack of descriptors: paused
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
  // Called once the driver stopped and no operation of it is pending any more, with the reason
  // it stopped; from then on the driver may be destroyed (from inside the callback too).
  using DoneCallback = std::function<void(DriverStop stop)>;

  // A driver with an event loop of its own, for Run().
  SessionDriver();
  // A driver on the caller's event loop `io`, which must outlive it.
  explicit SessionDriver(asio::io_context& io);
  // Destroy a started driver only after its DoneCallback ran (or once its loop is stopped for
  // good): Asio handlers still pending refer to it.
  ~SessionDriver();
  SessionDriver(const SessionDriver&) = delete;
  SessionDriver& operator=(const SessionDriver&) = delete;

  // Reads `options` (kept), loads the TLS files, binds the listening socket (if any) and resolves
  // the dial targets. Errors, the message naming the address or file and the system's message:
  // kNotFound (a host that does not resolve), kUnavailable (cannot listen: port in use, no such
  // interface), kFailedPrecondition (the TLS files do not load, or this build has no TLS).
  HostResult<> Open(const DriverOptions& options);

  // The bound listening port (the chosen one when the listen port was 0), or 0.
  std::uint16_t listen_port() const;

  // Called after every call into the session, before its outgoing frames are taken and sent:
  // a server writes its checkpoint here, so no frame of round r+1 leaves before round r is
  // durable; metrics rows are drained here too.
  void SetAfterSessionCall(std::function<void()> hook);

  // Starts `session` (initialized, not started; it must outlive the driver) on the driver's loop
  // and returns: connections, timers and the session then advance as the loop runs, until the
  // session finishes (and its frames are flushed), a signal, give-up or RequestStop; then
  // `on_done` runs on the loop. Call once, after a successful Open, from the loop's thread.
  void Start(protocol::Session& session, DoneCallback on_done);

  // Start, then runs the loop on the calling thread until this driver is done, and returns why
  // it stopped. A caller's loop runs its other work meanwhile and is left stopped (restart() it
  // to carry on with the rest).
  DriverStop Run(protocol::Session& session);

  // Makes the driver stop soon (kStopped): closes its connections and timers and calls the
  // DoneCallback once their handlers ran. From a hook, a callback or the loop's thread; no-op
  // before Start or once stopping.
  void RequestStop();

  // The caller fed the session from outside the driver (an event of its own on the loop's
  // thread, such as bytes from a serial line): takes the session's frames and re-arms its timer,
  // as after any call the driver makes. No-op before Start or once stopping.
  void SessionChanged();

  // The largest frame accepted from now on (capped at wire::kMaxFrameBytes): a worker accepts
  // control frames only until the Welcome tells it the run's largest broadcast. A frame whose
  // length was already read keeps the limit it was read under.
  void SetMaxFrameBytes(std::size_t bytes);

  // The loop the driver runs on (its own, or the caller's).
  asio::io_context& io();

  // The driver's clock: steady-clock nanoseconds since Open (what the session is fed).
  TimeNs Now() const;

  const DriverCounters& counters() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edgesgd::tcp
