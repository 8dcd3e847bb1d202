#pragma once

// Small protocol::Session implementations that exercise the simulator without the real
// protocol: a scripted session (the test decides what it sends and when it wakes), an
// allocation-free ping-pong pair and a sender that retries until it hears back.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "edgesgd/protocol/session.h"

namespace edgesgd::sim::testing {

using protocol::kNever;
using protocol::OutgoingFrame;
using protocol::PeerId;
using protocol::TimeNs;

// Frame contents used by the tests: byte i of a frame tagged `tag` is (tag + i) mod 256, so a
// receiver can tell frames apart and detect flipped bits.
inline std::vector<std::byte> TaggedBytes(std::size_t size, std::uint8_t tag) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<std::byte>((tag + i) & 0xFFu);
  }
  return bytes;
}

// Records everything it is told and sends what the test queues. Hooks run inside the session
// calls, so frames they queue are emitted in reply (drained by the driver after the call).
class ScriptedSession : public protocol::Session {
 public:
  struct Received {
    TimeNs time;
    PeerId from;
    std::vector<std::byte> bytes;
  };

  // Queues a frame for the next PollFrame drain (use before the run for frames sent at Start,
  // or from a hook).
  void Send(PeerId to, std::vector<std::byte> bytes, std::uint64_t work_samples = 0) {
    outbox_.push_back({to, std::move(bytes), work_samples});
  }
  void Send(PeerId to, std::size_t size, std::uint8_t tag = 0, std::uint64_t work_samples = 0) {
    Send(to, TaggedBytes(size, tag), work_samples);
  }

  void Start(TimeNs now) override {
    BeginCall();
    start_time = now;
    if (on_start) on_start(*this, now);
  }
  void OnFrame(PeerId from, std::span<const std::byte> frame, TimeNs now) override {
    BeginCall();
    received.push_back({now, from, {frame.begin(), frame.end()}});
    if (on_frame) on_frame(*this, from, frame, now);
  }
  void OnPeerLost(PeerId peer, TimeNs now) override {
    BeginCall();
    lost_peers.emplace_back(peer, now);
  }
  void OnTimer(TimeNs now) override {
    BeginCall();
    timer_times.push_back(now);
    wake = kNever;
    if (on_timer) on_timer(*this, now);
  }
  bool PollFrame(OutgoingFrame& out) override {
    if (next_ >= outbox_.size()) return false;
    const Outgoing& frame = outbox_[next_++];
    out.to = frame.to;
    out.bytes = frame.bytes;
    out.work_samples = frame.work_samples;
    return true;
  }
  TimeNs NextWakeup() const override { return wake; }
  bool Finished() const override { return finished; }

  // Public state, set and read by the tests.
  TimeNs wake = kNever;
  bool finished = false;
  TimeNs start_time = kNever;
  std::vector<Received> received;
  std::vector<TimeNs> timer_times;
  std::vector<std::pair<PeerId, TimeNs>> lost_peers;
  std::function<void(ScriptedSession&, TimeNs)> on_start;
  std::function<void(ScriptedSession&, PeerId, std::span<const std::byte>, TimeNs)> on_frame;
  std::function<void(ScriptedSession&, TimeNs)> on_timer;

 private:
  struct Outgoing {
    PeerId to;
    std::vector<std::byte> bytes;
    std::uint64_t work_samples;
  };

  // Frames already polled are released at the next call, as the Session contract allows.
  void BeginCall() {
    if (next_ == outbox_.size()) {
      outbox_.clear();
      next_ = 0;
    }
  }

  std::vector<Outgoing> outbox_;
  std::size_t next_ = 0;
};

// One side of a ping-pong exchange that allocates nothing after construction: the initiator
// sends a ping at Start and another each time a pong comes back; the responder answers every
// ping. Each side finishes after receiving `rounds` frames.
class PingPongSession : public protocol::Session {
 public:
  PingPongSession(PeerId peer, bool initiator, std::uint64_t rounds, std::size_t frame_bytes,
                  std::uint64_t work_samples = 0)
      : peer_(peer),
        initiator_(initiator),
        rounds_(rounds),
        work_samples_(work_samples),
        frame_(TaggedBytes(frame_bytes, initiator ? 1 : 2)) {}

  void Start(TimeNs) override { pending_ = initiator_; }
  void OnFrame(PeerId, std::span<const std::byte>, TimeNs now) override {
    ++received_;
    last_receive_ = now;
    pending_ = initiator_ ? received_ < rounds_ : true;
  }
  void OnPeerLost(PeerId, TimeNs) override {}
  void OnTimer(TimeNs) override {}
  bool PollFrame(OutgoingFrame& out) override {
    if (!pending_) return false;
    pending_ = false;
    out.to = peer_;
    out.bytes = frame_;
    out.work_samples = work_samples_;
    return true;
  }
  TimeNs NextWakeup() const override { return kNever; }
  bool Finished() const override { return received_ >= rounds_; }

  std::uint64_t received() const { return received_; }
  TimeNs last_receive() const { return last_receive_; }

 private:
  PeerId peer_;
  bool initiator_;
  std::uint64_t rounds_;
  std::uint64_t work_samples_;
  std::vector<std::byte> frame_;
  std::uint64_t received_ = 0;
  TimeNs last_receive_ = 0;
  bool pending_ = false;
};

// Sends a frame to `to` every `period` until it receives any frame, then finishes: what a
// session with retries does when the network eats everything.
class RetrySession : public protocol::Session {
 public:
  RetrySession(PeerId to, TimeNs period) : to_(to), period_(period), frame_(TaggedBytes(16, 7)) {}

  void Start(TimeNs now) override { Send(now); }
  void OnFrame(PeerId, std::span<const std::byte>, TimeNs) override { done_ = true; }
  void OnPeerLost(PeerId, TimeNs) override {}
  void OnTimer(TimeNs now) override {
    if (!done_) Send(now);
  }
  bool PollFrame(OutgoingFrame& out) override {
    if (!pending_) return false;
    pending_ = false;
    out.to = to_;
    out.bytes = frame_;
    out.work_samples = 0;
    return true;
  }
  TimeNs NextWakeup() const override { return done_ ? kNever : next_send_; }
  bool Finished() const override { return done_; }

  std::uint64_t attempts() const { return attempts_; }

 private:
  void Send(TimeNs now) {
    pending_ = true;
    ++attempts_;
    next_send_ = now + period_;
  }

  PeerId to_;
  TimeNs period_;
  std::vector<std::byte> frame_;
  TimeNs next_send_ = kNever;
  std::uint64_t attempts_ = 0;
  bool pending_ = false;
  bool done_ = false;
};

// Answers every frame with an identical copy to its sender; never finishes on its own.
class EchoSession : public ScriptedSession {
 public:
  EchoSession() {
    on_frame = [](ScriptedSession& self, PeerId from, std::span<const std::byte> frame, TimeNs) {
      self.Send(from, std::vector<std::byte>(frame.begin(), frame.end()));
    };
  }
};

}  // namespace edgesgd::sim::testing
