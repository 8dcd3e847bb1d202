#include "edgesgd/tcp/serial_bridge.h"

#include <algorithm>
#include <random>
#include <span>
#include <vector>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/platform/random_bytes.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/serial/session_link.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/wire/frame_decoder.h"
#include "serial_port.h"

namespace edgesgd::tcp {

using platform::Log;
using platform::LogLevel;
using protocol::kServerPeer;
using protocol::OutgoingFrame;

// The server's side of the bridge is a protocol::Session run by a SessionDriver: frames the
// device sends come out of PollFrame, frames the server sends go into OnFrame, and the link's
// retransmission timer is the session's wake-up. The serial side is a SerialPort on the same
// loop; after each of its events the driver is told the session changed.
class SerialBridge::Impl final : public protocol::Session, public internal::SerialPort::Events {
 public:
  Impl() : driver_(io_), port_(io_, *this, "bridge") {}

  HostResult<> Open(const SerialBridgeSettings& settings);
  DriverStop Run();

  // ---- protocol::Session ----
  void Start(TimeNs /*now*/) override {}
  void OnFrame(protocol::PeerId from, std::span<const std::byte> frame, TimeNs now) override;
  void OnPeerLost(protocol::PeerId peer, TimeNs now) override;
  void OnTimer(TimeNs now) override;
  bool PollFrame(OutgoingFrame& out) override;
  TimeNs NextWakeup() const override { return std::min(link_.NextWakeup(), device_retry_at_); }
  bool Finished() const override { return run_ended_ && queued_ == 0 && link_.Idle(); }

  // ---- SerialPort::Events ----
  void OnPortOpened() override;
  void OnPortBytes(std::span<const std::byte> bytes) override;
  void OnPortClosed(const std::string& why) override;
  void OnPortWritten(std::size_t bytes) override;

  SerialBridgeCounters counters_;
  serial::Link link_;
  asio::io_context io_{1};
  SessionDriver driver_;
  internal::SerialPort port_;

 private:
  void RestartLink(TimeNs now);
  // Moves queued server frames into the link and the link's bytes onto the line.
  void Pump(TimeNs now);
  // A payload the device sent: its frame for the server, or (authenticating) its hello, answered.
  // False if it failed authentication.
  bool FromDevice(std::span<const std::byte> payload);
  bool authenticating() const { return settings_.network.auth_keys != nullptr; }

  SerialBridgeSettings settings_;
  std::vector<std::byte> link_memory_;
  std::mt19937 nonces_{std::random_device{}()};
  std::uint32_t nonce_ = 0;
  bool link_started_ = false;
  std::uint64_t peer_restarts_seen_ = 0;
  // Server frames waiting for the line: a ring of reused buffers.
  std::vector<std::vector<std::byte>> queue_;
  std::size_t head_ = 0;
  std::size_t queued_ = 0;
  std::span<const std::byte> uplink_;  // a device frame for PollFrame, in the link's buffer
  bool server_heard_ = false;          // a frame arrived since the connection was last lost
  bool run_ended_ = false;             // the server's Leave was queued for the device
  // The line's authentication (with the server's keys): the device initiates, the bridge answers.
  auth::ConnectionAuth line_auth_;
  std::array<std::byte, auth::kResponderHelloBytes> hello_{};
  bool hello_due_ = false;  // the answer to the device's hello goes before any record
  // Set when the device failed authentication: until then its payloads are ignored, and then
  // the link restarts (a device with the wrong key would otherwise retry at line speed).
  TimeNs device_retry_at_ = protocol::kNever;
};

HostResult<> SerialBridge::Impl::Open(const SerialBridgeSettings& settings) {
  if (settings.device_id == 0 || settings.device_id == wire::kUnassignedDevice) {
    return HostError(Status::InvalidArgument("no device id"),
                     "the bridge needs the device's id (1 or more)");
  }
  if (settings.max_frame_bytes < wire::kMinFrameBytes || settings.queue_frames == 0) {
    return HostError(Status::InvalidArgument("bad frame or queue size"),
                     "the largest frame must be at least " + std::to_string(wire::kMinFrameBytes) +
                         " bytes, and the queue must hold a frame");
  }
  settings_ = settings;
  const std::size_t link_payload = serial::SessionLink::LinkPayloadBytes(settings.max_frame_bytes);
  link_memory_.resize(serial::Link::BufferBytes(link_payload));
  if (const Status status = link_.Init(link_memory_, link_payload, settings.link); !status.ok()) {
    return HostError(status).WithContext("the serial link");
  }
  if (authenticating()) {
    if (const Status status = line_auth_.Init(settings.max_frame_bytes); !status.ok()) {
      return HostError(status).WithContext("the serial line's authentication");
    }
  }
  queue_.resize(settings.queue_frames);
  DriverOptions& network = settings_.network;
  network.dial.assign(1, DialTarget{kServerPeer, settings.server});
  network.listen.reset();
  network.auth_device = settings.device_id;
  network.max_frame_bytes = std::min(network.max_frame_bytes, settings.max_frame_bytes);
  EDGESGD_HOST_TRY(driver_.Open(network));
  return port_.Open(settings.device);
}

DriverStop SerialBridge::Impl::Run() {
  port_.Start();
  const DriverStop stop = driver_.Run(*this);
  port_.Stop();
  // Let the line's aborted operations finish before the port goes away.
  io_.restart();
  io_.run();
  return stop;
}

void SerialBridge::Impl::OnFrame(protocol::PeerId from, std::span<const std::byte> frame,
                                 TimeNs now) {
  if (from != kServerPeer) return;
  server_heard_ = true;
  if (frame.size() > settings_.max_frame_bytes) {
    ++counters_.frames_too_large;
    return;
  }
  // The one thing the bridge reads in a frame: whether the run is over, so that it can stop.
  const Result<wire::FrameView> view = wire::DecodeFrame(frame);
  if (view.ok() && view->kind == wire::MessageKind::kLeave) run_ended_ = true;
  if (queued_ == queue_.size()) {
    head_ = (head_ + 1) % queue_.size();
    --queued_;
    ++counters_.frames_dropped;
  }
  std::vector<std::byte>& slot = queue_[(head_ + queued_) % queue_.size()];
  slot.assign(frame.begin(), frame.end());
  ++queued_;
  Pump(now);
}

void SerialBridge::Impl::OnPeerLost(protocol::PeerId peer, TimeNs now) {
  if (peer != kServerPeer || !server_heard_ || run_ended_) return;
  // The server has dropped the device with the connection: frames of the old connection are
  // stale, and a new link nonce tells the device's session to join again.
  server_heard_ = false;
  ++counters_.server_losses;
  queued_ = 0;
  Log(LogLevel::kWarning, "bridge: server connection lost: restarting the device's link");
  if (port_.is_open()) RestartLink(now);
}

void SerialBridge::Impl::OnTimer(TimeNs now) {
  if (device_retry_at_ <= now) RestartLink(now);
  link_.OnTimer(now);
  if (link_.state() == serial::LinkState::kFailed) {
    Log(LogLevel::kWarning, "bridge: the device does not answer: restarting the link");
    RestartLink(now);
  }
  Pump(now);
}

bool SerialBridge::Impl::PollFrame(OutgoingFrame& out) {
  if (uplink_.empty()) return false;
  out = OutgoingFrame{kServerPeer, uplink_, 0};
  uplink_ = {};
  return true;
}

void SerialBridge::Impl::RestartLink(TimeNs now) {
  std::uint32_t nonce = static_cast<std::uint32_t>(nonces_());
  if (nonce == nonce_) ++nonce;
  nonce_ = nonce;
  if (link_started_) ++counters_.link_restarts;
  link_started_ = true;
  line_auth_.Reset();
  hello_due_ = false;
  device_retry_at_ = protocol::kNever;
  link_.Start(now, nonce_);
  Pump(now);
}

bool SerialBridge::Impl::FromDevice(std::span<const std::byte> payload) {
  if (device_retry_at_ != protocol::kNever) return true;  // ignored until the retry
  if (!authenticating()) {
    uplink_ = payload;
    return true;
  }
  if (line_auth_.established()) {
    const Result<std::span<const std::byte>> frame = line_auth_.Open(payload);
    if (!frame.ok()) return false;
    uplink_ = *frame;
    return true;
  }
  // The device's hello: it must name this bridge's device, and the answer proves the key.
  std::array<std::byte, auth::kNonceBytes> nonce{};
  if (!platform::FillRandomBytes(nonce).ok()) return false;
  if (!line_auth_.StartResponder(*settings_.network.auth_keys, payload, nonce, hello_).ok() ||
      line_auth_.device() != settings_.device_id) {
    return false;
  }
  hello_due_ = true;
  return true;
}

void SerialBridge::Impl::Pump(TimeNs now) {
  if (hello_due_ && link_.CanSend() && link_.Send(hello_, now).ok()) hello_due_ = false;
  // Server frames wait until the device has proved its key and had the answer.
  const bool device_ready = !authenticating() || (line_auth_.established() && !hello_due_);
  while (device_ready && queued_ > 0 && link_.CanSend()) {
    if (!serial::SendFrame(link_, authenticating() ? &line_auth_ : nullptr, queue_[head_], now)) {
      break;
    }
    head_ = (head_ + 1) % queue_.size();
    --queued_;
    ++counters_.frames_to_device;
  }
  if (port_.is_open() && !port_.writing()) {
    const std::span<const std::byte> bytes = link_.Output();
    if (!bytes.empty()) port_.Write(bytes);
  }
}

void SerialBridge::Impl::OnPortOpened() {
  RestartLink(driver_.Now());
  driver_.SessionChanged();
}

void SerialBridge::Impl::OnPortBytes(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const serial::FrameDecoder::Step step = link_.Receive(bytes);
    bytes = bytes.subspan(step.consumed);
    if (link_.counters().peer_restarts != peer_restarts_seen_) {
      counters_.device_restarts += link_.counters().peer_restarts - peer_restarts_seen_;
      peer_restarts_seen_ = link_.counters().peer_restarts;
      Log(LogLevel::kInfo, "bridge: the device restarted");
      // Its next payload is a new hello.
      line_auth_.Reset();
      hello_due_ = false;
    }
    if (step.delivered) {
      const char* what = line_auth_.established() ? "record" : "hello";
      if (!FromDevice(step.frame)) {
        ++counters_.auth_rejected;
        const auth::RejectReason reason = line_auth_.last_reject();
        Log(LogLevel::kWarning,
            "bridge: the device's %s failed authentication (%s): restarting the link in a "
            "second; does the device hold device %u's key from the server's key file?",
            what, reason == auth::RejectReason::kNone ? "another device's key" :
                  auth::RejectReasonName(reason),
            static_cast<unsigned>(settings_.device_id));
        // Nothing more for this line until the retry: a hello that proved another device's key
        // leaves the authentication established, and queued frames would go out under it.
        line_auth_.Reset();
        hello_due_ = false;
        device_retry_at_ = driver_.Now() + serial::SessionLink::kAuthRetryNs;
      } else if (!uplink_.empty()) {
        ++counters_.frames_to_server;
      }
    }
    // Hands the device's frame to the server (the driver polls it now, before the next Receive
    // reuses the link's buffer) and re-arms the link's timer.
    driver_.SessionChanged();
    uplink_ = {};
  }
  Pump(driver_.Now());
  driver_.SessionChanged();
}

void SerialBridge::Impl::OnPortClosed(const std::string& /*why*/) { ++counters_.line_closures; }

void SerialBridge::Impl::OnPortWritten(std::size_t bytes) {
  link_.Written(bytes);
  Pump(driver_.Now());
  driver_.SessionChanged();
}

// ---- SerialBridge ----

SerialBridge::SerialBridge() : impl_(std::make_unique<Impl>()) {}
SerialBridge::~SerialBridge() = default;
HostResult<> SerialBridge::Open(const SerialBridgeSettings& settings) {
  return impl_->Open(settings);
}
DriverStop SerialBridge::Run() { return impl_->Run(); }
const SerialBridgeCounters& SerialBridge::counters() const { return impl_->counters_; }
const serial::Link& SerialBridge::link() const { return impl_->link_; }
const DriverCounters& SerialBridge::network_counters() const { return impl_->driver_.counters(); }
std::uint16_t SerialBridge::serial_listen_port() const { return impl_->port_.listen_port(); }

}  // namespace edgesgd::tcp
