#include "serial_session.h"

#include <array>

#include "edgesgd/platform/log.h"
#include "edgesgd/platform/random_bytes.h"

namespace edgesgd::tcp::internal {

HostResult<> SerialSession::Open(const SerialLine& line, std::size_t max_frame_bytes,
                                 const serial::LinkOptions& options, const auth::KeyRing* keys,
                                 std::uint32_t device) {
  memory_.resize(serial::SessionLink::BufferBytes(max_frame_bytes));
  Status status = link_.Init(memory_, max_frame_bytes, session_, protocol::kServerPeer, options);
  if (status.ok() && keys != nullptr) {
    std::array<std::byte, auth::kNonceBytes> boot_nonce{};
    status = auth_.Init(max_frame_bytes);
    if (status.ok()) status = platform::FillRandomBytes(boot_nonce);
    if (status.ok()) status = link_.EnableAuthentication(auth_, *keys, device, boot_nonce);
  }
  if (!status.ok()) return HostError(status).WithContext("the serial link");
  return port_.Open(line);
}

void SerialSession::Start(TimeNs /*now*/) {
  // The session starts with the link, once the line is open.
  port_.Start();
}

void SerialSession::OnPortOpened() {
  // The first opening starts the link and the session. A line opened again (a gateway that
  // came back) needs nothing: a restarted gateway announces its new nonce, and the link
  // resynchronises from the next frame.
  if (!started_) {
    link_.Start(driver_.Now(), static_cast<std::uint32_t>(nonces_()));
    started_ = true;
  }
  Flush();
  driver_.SessionChanged();
}

void SerialSession::OnTimer(TimeNs now) {
  link_.OnTimer(now);
  Flush();
}

void SerialSession::OnPortBytes(std::span<const std::byte> bytes) {
  const std::uint64_t rejected = link_.counters().auth_rejected;
  link_.Receive(bytes, driver_.Now());
  if (link_.counters().auth_rejected != rejected) {
    platform::Log(platform::LogLevel::kWarning,
                  "serial: the gateway failed authentication: restarting the link; does the "
                  "bridge hold this device's key from the same key file?");
  }
  Flush();
  driver_.SessionChanged();
}

void SerialSession::OnPortClosed(const std::string& /*why*/) {
  // A gateway closes the line once it has delivered the server's Leave; a device waiting for
  // the line to come back then would wait for ever.
  if (session_.Finished()) {
    line_closed_after_run_ = true;
    driver_.SessionChanged();
  }
}

void SerialSession::OnPortWritten(std::size_t bytes) {
  link_.Written(bytes, driver_.Now());
  Flush();
  driver_.SessionChanged();
}

void SerialSession::Flush() {
  if (!port_.is_open() || port_.writing()) return;
  const std::span<const std::byte> bytes = link_.Output();
  if (!bytes.empty()) port_.Write(bytes);
}

}  // namespace edgesgd::tcp::internal
