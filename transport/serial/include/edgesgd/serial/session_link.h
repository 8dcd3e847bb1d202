#pragma once

// One protocol session run over a serial link (link.h): a worker whose server is reached through
// a gateway at the other end of a UART, USB-CDC or BLE serial line. Every frame the session
// sends goes to that one peer, `remote`, and every payload the link delivers comes from it.
//
// The link holds one frame at a time, so SessionLink takes a frame from the session only when
// the link can send it: after every entry point it "pumps", polling the session while
// Link::CanSend() and sending what it polled. While the link cannot send, the session is not
// polled and its frames wait in its own buffers. The session must therefore keep what it has not
// handed out until it is polled, however long that takes — as WorkerSession does (its Join,
// Update and Heartbeat are pending flags over its own builders; a newer frame of a kind replaces
// an older one) — and then the device needs no frame buffer of its own. A session that must be
// drained after every call is not for this driver.
//
// The link's recoveries are the session's peer losses:
//   - the far end restarted (a new nonce: the gateway lost its state, or reconnected to the
//     server): the link abandons what was in flight, and the session is told OnPeerLost(remote)
//     once per restart (a WorkerSession joins again);
//   - the link failed (a frame unacknowledged max_attempts times: the line is cut): the session
//     is told OnPeerLost(remote) and the link is started again with the next nonce, handshaking
//     until the line is back.
//
// Authentication (EnableAuthentication): the line carries the TCP transport's hellos and records
// (auth/connection_auth.h), with this device as the initiator and the gateway as the responder,
// each holding the device's pre-shared key. After every link handshake the device sends its hello
// first, and the session is polled only once the gateway's hello proved the key; every frame then
// travels as a record (sealed around the session's own buffer, so no copy is kept) and every
// payload received must open as one. A payload that does not — forged, replayed, from another
// key — is counted, and kAuthRetryNs later the link restarts, which starts a new connection with
// a new nonce (the session is told its peer is lost); meanwhile the line is ignored.
//
// Sans-I/O, like the link: the caller reads the port into Receive, writes Output and reports it
// with Written, and calls OnTimer once NextWakeup has passed. Memory comes from one caller
// buffer of BufferBytes(max_frame_bytes); nothing allocates or throws, so it builds for Cortex-M.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/serial/link.h"

namespace edgesgd::serial {

// Sends `frame` on `link`: as it is when `auth` is null, else sealed as `auth`'s next record,
// the header and tag around the frame where it lies (Link::Send with parts, no copy). False if
// the link cannot take it or the record cannot be sealed. Either end of an authenticated line
// sends its frames this way.
bool SendFrame(Link& link, auth::ConnectionAuth* auth, std::span<const std::byte> frame,
               TimeNs now);

struct SessionLinkCounters {
  std::uint64_t frames_sent = 0;       // session frames handed to the link
  std::uint64_t frames_received = 0;   // link payloads handed to the session
  std::uint64_t frames_too_large = 0;  // session frames above max_frame_bytes: dropped
  std::uint64_t frames_misrouted = 0;  // session frames for a peer other than `remote`: dropped
  std::uint64_t link_restarts = 0;     // the link failed (max_attempts) and was started again
  std::uint64_t peer_restarts = 0;     // the far end restarted (new nonce)
  std::uint64_t auth_rejected = 0;     // hellos or records that failed authentication
};

class SessionLink {
 public:
  // After a failed authentication, the wait before the next connection: a device with the wrong
  // key retries once a second instead of flooding the line and its gateway's log.
  static constexpr TimeNs kAuthRetryNs = 1'000'000'000;

  // Bytes Init takes for session frames of up to `max_frame_bytes` (the largest frame either
  // end sends: for a worker, the run's broadcast or update, wire::MaxFrameBytes), with room for
  // the authentication record around each.
  static constexpr std::size_t BufferBytes(std::size_t max_frame_bytes) {
    return Link::BufferBytes(LinkPayloadBytes(max_frame_bytes));
  }
  // The largest link payload for session frames of up to `max_frame_bytes`: a record of one.
  static constexpr std::size_t LinkPayloadBytes(std::size_t max_frame_bytes) {
    return auth::RecordBytes(max_frame_bytes);
  }

  // `session` is initialised and not started, and outlives this object. Frames from the link are
  // handed to it as coming from `remote`; frames it sends must be addressed to `remote`. Takes
  // BufferBytes(max_frame_bytes) bytes of `memory` (any alignment: payloads are delivered
  // 8-byte aligned, as sessions decode them). Errors, as Link::Init: kInvalidArgument (a zero
  // max_frame_bytes, no attempts or no retransmission time), kResourceExhausted (memory too
  // small).
  Status Init(std::span<std::byte> memory, std::size_t max_frame_bytes, protocol::Session& session,
              protocol::PeerId remote, const LinkOptions& options = {});

  // Authenticates the line from now on (call after Init, before Start) as `device`, whose key
  // `keys` holds. `auth` is initialised with ConnectionAuth::Init(max_frame_bytes) or more and,
  // like `keys`, outlives this object. `boot_nonce` must never repeat between boots (a TRNG, or
  // a boot counter kept in flash): each connection's nonce is it with a connection counter
  // added. Errors: kFailedPrecondition (not initialised, or started), kNotFound (no key for
  // `device`), kInvalidArgument (auth's limit below this link's frames).
  Status EnableAuthentication(auth::ConnectionAuth& auth, const auth::KeyRing& keys,
                              std::uint32_t device,
                              std::span<const std::byte, auth::kNonceBytes> boot_nonce);

  // Starts the link with `nonce` (which must differ from this device's previous one: a boot
  // counter or a random number) and the session. The session's first frames go once the
  // handshake is done.
  void Start(TimeNs now, std::uint32_t nonce);

  // Everything read from the port, in any pieces: each payload the link delivers is handed to
  // the session (in place; it need not outlive the call).
  void Receive(std::span<const std::byte> bytes, TimeNs now);

  // Bytes to write to the port now (empty: nothing); report how many were written.
  std::span<const std::byte> Output() { return link_.Output(); }
  void Written(std::size_t bytes, TimeNs now);

  // The earlier of the link's and the session's wake-ups (kNever: nothing to time out).
  TimeNs NextWakeup() const;
  void OnTimer(TimeNs now);

  // The session finished and the link is idle: its last frames and acknowledgements are out.
  bool Finished() const;

  const Link& link() const { return link_; }
  const SessionLinkCounters& counters() const { return counters_; }

 private:
  // Hands the session's frames to the link for as long as the link takes them.
  void Pump(TimeNs now);
  // Tells the session of far-end restarts the link noticed since the last check.
  void NotePeerRestarts(TimeNs now);
  // Starts a failed link again, after telling the session its peer is lost.
  void RestartIfFailed(TimeNs now);
  // Tells the session its peer is lost and starts the link with the next nonce.
  void RestartLink(TimeNs now);
  // Hands a delivered payload to the session: as it is, or opened as a record (a hello from the
  // gateway establishes the connection). False if it failed authentication.
  bool Deliver(std::span<const std::byte> payload, TimeNs now);
  // A new connection: the next hello goes out before any frame.
  void ResetAuthentication();
  bool authenticated() const { return auth_ == nullptr || auth_->established(); }

  Link link_;
  protocol::Session* session_ = nullptr;
  protocol::PeerId remote_ = protocol::kServerPeer;
  std::size_t max_frame_bytes_ = 0;
  std::uint32_t nonce_ = 0;
  std::uint64_t peer_restarts_seen_ = 0;  // the link's peer_restarts already passed on
  SessionLinkCounters counters_;
  // Authentication, when enabled.
  auth::ConnectionAuth* auth_ = nullptr;
  const auth::KeyRing* keys_ = nullptr;
  std::uint32_t device_ = 0;
  std::array<std::byte, auth::kNonceBytes> boot_nonce_{};
  std::uint32_t connections_ = 0;  // hellos sent since boot: varies each connection's nonce
  bool hello_due_ = false;         // the link restarted: the hello goes before anything else
  TimeNs auth_retry_at_ = kNever;  // set after a failed authentication: the next connection
};

}  // namespace edgesgd::serial
