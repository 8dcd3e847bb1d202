#pragma once

// The sans-I/O contract every protocol session (server, worker, gossip peer) implements. A
// session is a state machine fed with received frames and the current time; it answers with
// frames to send and the time it next wants to be woken. It never touches a socket, a thread or
// a clock, so the same session runs in the deterministic simulator (virtual time), over TCP
// (transport/tcp) and on a microcontroller over any link.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace edgesgd::protocol {

// Who a frame comes from or goes to. The server is peer 0; workers and gossip peers are
// 1..n (their device ids). Drivers map peer ids to connections.
using PeerId = std::uint32_t;
inline constexpr PeerId kServerPeer = 0;

// Monotonic time in nanoseconds, from the driver (virtual in the simulator, steady clock over
// TCP). Sessions only compare and add durations.
using TimeNs = std::uint64_t;
inline constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();

// A frame the session wants sent. `bytes` stays valid until the next call into the session
// other than PollFrame, so drivers copy or send it before feeding the session again.
// `work_samples` is the number of training samples whose gradients the session computed to
// produce this frame (0 for control frames): the simulator turns it into compute time on a
// device of a given speed; real drivers ignore it.
struct OutgoingFrame {
  PeerId to = kServerPeer;
  std::span<const std::byte> bytes;
  std::uint64_t work_samples = 0;
};

class Session {
 public:
  virtual ~Session() = default;

  // Begins the protocol (a worker sends Join, a server starts waiting for workers).
  virtual void Start(TimeNs now) = 0;

  // A complete size-prefixed frame received from `from`. Bad frames (malformed, late,
  // duplicate, unauthenticated, ...) are counted and dropped; they never stop the session.
  // `frame` must start at a wire::kFrameAlignment (8-byte) aligned address, as DecodeFrame
  // requires (receive into wire::ReceiveBuffer, arena memory or std::uint64_t storage); a
  // misaligned frame is counted as malformed. It need only stay valid during the call.
  virtual void OnFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) = 0;

  // The link to `peer` is gone (connection closed, peer declared dead by the driver).
  virtual void OnPeerLost(PeerId peer, TimeNs now) = 0;

  // Time has reached at least NextWakeup(): run deadlines and retries.
  virtual void OnTimer(TimeNs now) = 0;

  // Takes the next frame to send, if any. Call until it returns false after every other call.
  virtual bool PollFrame(OutgoingFrame& out) = 0;

  // When OnTimer should next be called (kNever if nothing is pending).
  virtual TimeNs NextWakeup() const = 0;

  // The session has completed its run (all rounds done, or it left).
  virtual bool Finished() const = 0;
};

// Session's calls as inline forwarders to Derived's DoStart, DoFrame, DoPeerLost, DoTimer,
// DoPollFrame and DoNextWakeup (Derived befriends this class and overrides Finished). A class
// whose virtual functions are all inline has its vtable (and with it the deleting destructor,
// which references the global operator delete) emitted only where an object is created: in the
// driver, never in the heap-free library.
template <typename Derived>
class InlineSession : public Session {
 public:
  void Start(TimeNs now) override { self().DoStart(now); }
  void OnFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) override {
    self().DoFrame(from, frame, now);
  }
  void OnPeerLost(PeerId peer, TimeNs now) override { self().DoPeerLost(peer, now); }
  void OnTimer(TimeNs now) override { self().DoTimer(now); }
  bool PollFrame(OutgoingFrame& out) override { return self().DoPollFrame(out); }
  TimeNs NextWakeup() const override { return self().DoNextWakeup(); }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace edgesgd::protocol
