// Fuzz target: serial::SessionLink (edgesgd/serial/session_link.h) between a scripted session and
// a gateway's plain Link, driven by a script from the input — the gateway sending payloads of the
// input's bytes, garbage on the line, bytes moving (some lost or damaged), time passing, the
// session queueing frames (some too large or for another peer), the gateway restarting.
// Invariants: every payload reaches the session 8-byte aligned and from the remote; the session
// is polled only while the link can take a frame; frames too large or misrouted are counted,
// never sent; after OnTimer(now) nothing is due at `now` again; a finished SessionLink is idle;
// everything the device writes is whole, valid frames.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "edgesgd/serial/session_link.h"
#include "edgesgd/wire/wire_format.h"
#include "fuzz/fuzz_input.h"

namespace {

using edgesgd::protocol::OutgoingFrame;
using edgesgd::protocol::PeerId;
using edgesgd::serial::FrameDecoder;
using edgesgd::serial::Link;
using edgesgd::serial::SessionLink;
using edgesgd::serial::TimeNs;

constexpr std::size_t kMaxFrame = 64;
constexpr PeerId kRemote = 3;
constexpr TimeNs kMs = 1'000'000;

// Sends what the script queues and checks what it is handed.
class ScriptedSession final : public edgesgd::protocol::Session {
 public:
  void Start(TimeNs) override {}
  void OnFrame(PeerId from, std::span<const std::byte> frame, TimeNs) override {
    EDGESGD_FUZZ_CHECK(from == kRemote, "payloads come from the remote");
    EDGESGD_FUZZ_CHECK(
        reinterpret_cast<std::uintptr_t>(frame.data()) % edgesgd::wire::kFrameAlignment == 0,
        "payloads are aligned for the wire decoder");
    EDGESGD_FUZZ_CHECK(frame.size() <= kMaxFrame, "payloads fit the maximum");
  }
  void OnPeerLost(PeerId peer, TimeNs) override {
    EDGESGD_FUZZ_CHECK(peer == kRemote, "only the remote is lost");
  }
  void OnTimer(TimeNs now) override {
    if (wakeup_ <= now) wakeup_ = edgesgd::protocol::kNever;
  }
  bool PollFrame(OutgoingFrame& out) override {
    EDGESGD_FUZZ_CHECK(link->link().CanSend(), "the session is polled only when the link can send");
    if (queued_.empty()) return false;
    frame_.assign(queued_.front().size, std::byte{0x5a});
    out = OutgoingFrame{queued_.front().to, frame_, 0};
    queued_.pop_front();
    return true;
  }
  TimeNs NextWakeup() const override { return wakeup_; }
  bool Finished() const override { return finished; }

  void Queue(PeerId to, std::size_t size) { queued_.push_back({to, size}); }
  void WakeAt(TimeNs at) { wakeup_ = at; }

  const SessionLink* link = nullptr;
  bool finished = false;

 private:
  struct Pending {
    PeerId to;
    std::size_t size;
  };
  std::deque<Pending> queued_;
  std::vector<std::byte> frame_;
  TimeNs wakeup_ = edgesgd::protocol::kNever;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::FuzzInput input(data, size);
  const edgesgd::serial::LinkOptions options{.retransmit_ns = 5 * kMs, .max_attempts = 4};
  ScriptedSession session;
  SessionLink device;
  session.link = &device;
  std::vector<std::byte> device_memory(SessionLink::BufferBytes(kMaxFrame) + 1);
  // One byte off: the link must align its payloads whatever its memory's alignment.
  EDGESGD_FUZZ_CHECK(device.Init(std::span(device_memory).subspan(1), kMaxFrame, session, kRemote,
                                 options)
                         .ok(),
                     "the session link initialises");
  std::vector<std::byte> gateway_memory(Link::BufferBytes(kMaxFrame));
  Link gateway;
  EDGESGD_FUZZ_CHECK(gateway.Init(gateway_memory, kMaxFrame, options).ok(),
                     "the gateway's link initialises");
  std::vector<std::byte> check_buffer(edgesgd::serial::MaxEncodedBytes(kMaxFrame + 1));
  FrameDecoder written_frames(check_buffer);
  TimeNs now = 0;
  device.Start(now, input.U32());
  gateway.Start(now, input.U32());
  std::vector<std::byte> line;  // bytes from the gateway on their way to the device
  std::uint64_t misrouted = 0;
  std::uint64_t too_large = 0;
  while (input.remaining() > 0) {
    switch (input.U8() % 6) {
      case 0: {  // the gateway sends a payload of the input's bytes
        const std::span<const std::byte> payload = input.Bytes(input.U8() % (kMaxFrame + 1));
        if (gateway.CanSend()) (void)gateway.Send(payload, now);
        break;
      }
      case 1: {  // garbage on the line
        const std::span<const std::byte> garbage = input.Bytes(input.U8());
        line.insert(line.end(), garbage.begin(), garbage.end());
        break;
      }
      case 2: {  // bytes move both ways; `damage` picks one byte of each chunk to lose
        const std::size_t chunk = input.U8();
        const std::uint8_t damage = input.U8();
        const std::span<const std::byte> out = device.Output();
        const std::size_t n = std::min(out.size(), chunk);
        std::span<const std::byte> taken = out.first(n);
        for (std::size_t i = 0; i < taken.size(); ++i) {
          if (damage != 0 && i == damage % taken.size()) continue;
          (void)gateway.Receive(taken.subspan(i, 1));
        }
        while (!taken.empty()) {
          taken = taken.subspan(written_frames.Push(taken).consumed);
        }
        device.Written(n, now);
        const std::span<const std::byte> back = gateway.Output();
        const std::size_t m = std::min(back.size(), chunk);
        line.insert(line.end(), back.begin(), back.begin() + static_cast<std::ptrdiff_t>(m));
        gateway.Written(m);
        device.Receive(line, now);
        line.clear();
        break;
      }
      case 3:  // time passes
        now += input.U8() * kMs;
        if (device.NextWakeup() <= now) device.OnTimer(now);
        if (gateway.NextWakeup() <= now) gateway.OnTimer(now);
        EDGESGD_FUZZ_CHECK(device.NextWakeup() > now, "a timer served is not due again at once");
        break;
      case 4: {  // the session has a frame to send, or a wake-up
        const std::uint8_t what = input.U8();
        const std::size_t frame_size = input.U8() % (kMaxFrame + 8);
        const PeerId to = (what & 1) != 0 ? kRemote + 1 : kRemote;
        if (to != kRemote) {
          ++misrouted;
        } else if (frame_size > kMaxFrame) {
          ++too_large;
        }
        session.Queue(to, frame_size);
        session.WakeAt(now + (what >> 1) * kMs);
        break;
      }
      default:  // the gateway restarts, or the session finishes
        if ((input.U8() & 1) != 0) {
          gateway.Start(now, input.U32());
        } else {
          session.finished = true;
        }
        break;
    }
    EDGESGD_FUZZ_CHECK(!device.Finished() || device.link().Idle(), "finished means idle");
  }
  const edgesgd::serial::SessionLinkCounters& counters = device.counters();
  EDGESGD_FUZZ_CHECK(counters.frames_misrouted <= misrouted && counters.frames_too_large <= too_large,
                     "only frames too large or misrouted are dropped as such");
  EDGESGD_FUZZ_CHECK(written_frames.counters().rejected() == 0,
                     "everything the device writes is a valid frame");
  return 0;
}
