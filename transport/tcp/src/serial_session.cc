#include "serial_session.h"

namespace edgesgd::tcp::internal {

Status SerialSession::Open(const SerialLine& line, std::size_t max_frame_bytes,
                           const serial::LinkOptions& options, std::string& detail) {
  memory_.resize(serial::SessionLink::BufferBytes(max_frame_bytes));
  if (const Status status =
          link_.Init(memory_, max_frame_bytes, session_, protocol::kServerPeer, options);
      !status.ok()) {
    detail = std::string("the serial link: ") + status.reason();
    return status;
  }
  return port_.Open(line, detail);
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
  link_.Receive(bytes, driver_.Now());
  Flush();
  driver_.SessionChanged();
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
