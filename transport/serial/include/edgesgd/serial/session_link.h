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
// Sans-I/O, like the link: the caller reads the port into Receive, writes Output and reports it
// with Written, and calls OnTimer once NextWakeup has passed. Memory comes from one caller
// buffer of BufferBytes(max_frame_bytes); nothing allocates or throws, so it builds for Cortex-M.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/status.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/serial/link.h"

namespace edgesgd::serial {

struct SessionLinkCounters {
  std::uint64_t frames_sent = 0;       // session frames handed to the link
  std::uint64_t frames_received = 0;   // link payloads handed to the session
  std::uint64_t frames_too_large = 0;  // session frames above max_frame_bytes: dropped
  std::uint64_t frames_misrouted = 0;  // session frames for a peer other than `remote`: dropped
  std::uint64_t link_restarts = 0;     // the link failed (max_attempts) and was started again
  std::uint64_t peer_restarts = 0;     // the far end restarted (new nonce)
};

class SessionLink {
 public:
  // Bytes Init takes for session frames of up to `max_frame_bytes` (the largest frame either
  // end sends: for a worker, the run's broadcast or update, wire::MaxFrameBytes).
  static constexpr std::size_t BufferBytes(std::size_t max_frame_bytes) {
    return Link::BufferBytes(max_frame_bytes);
  }

  // `session` is initialised and not started, and outlives this object. Frames from the link are
  // handed to it as coming from `remote`; frames it sends must be addressed to `remote`. Takes
  // BufferBytes(max_frame_bytes) bytes of `memory` (any alignment: payloads are delivered
  // 8-byte aligned, as sessions decode them). Errors, as Link::Init: kInvalidArgument (a zero
  // max_frame_bytes, no attempts or no retransmission time), kResourceExhausted (memory too
  // small).
  Status Init(std::span<std::byte> memory, std::size_t max_frame_bytes, protocol::Session& session,
              protocol::PeerId remote, const LinkOptions& options = {});

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

  Link link_;
  protocol::Session* session_ = nullptr;
  protocol::PeerId remote_ = protocol::kServerPeer;
  std::size_t max_frame_bytes_ = 0;
  std::uint32_t nonce_ = 0;
  std::uint64_t peer_restarts_seen_ = 0;  // the link's peer_restarts already passed on
  SessionLinkCounters counters_;
};

}  // namespace edgesgd::serial
