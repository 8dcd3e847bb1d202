#pragma once

// Runs a protocol session whose only peer sits at the other end of a serial line (a worker
// whose server is reached through `edgesgd bridge`): serial::SessionLink moves the session's
// frames over the line, a SerialPort carries the bytes, and the whole is itself a
// protocol::Session for a SessionDriver without connections, which supplies the loop, the
// timer, signals and the after-call hook. Nothing goes out through the driver.

#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/core/status.h"
#include "edgesgd/serial/session_link.h"
#include "edgesgd/tcp/serial_line.h"
#include "edgesgd/tcp/session_driver.h"
#include "serial_port.h"

namespace edgesgd::tcp::internal {

class SerialSession final : public protocol::Session, public SerialPort::Events {
 public:
  SerialSession(asio::io_context& io, SessionDriver& driver, protocol::Session& session)
      : driver_(driver), session_(session), port_(io, *this, "serial") {}

  // Sizes the link for frames up to `max_frame_bytes` and checks the line. With `keys` (which
  // must hold `device`'s key and outlive this object) the line is authenticated as that device;
  // without, it carries plain frames. Errors as serial::SessionLink::Init and
  // EnableAuthentication, auth::ConnectionAuth::Init and SerialPort::Open.
  HostResult<> Open(const SerialLine& line, std::size_t max_frame_bytes,
                    const serial::LinkOptions& options, const auth::KeyRing* keys,
                    std::uint32_t device);
  // Closes the line (after the driver stopped).
  void Close() { port_.Stop(); }

  const serial::SessionLink& link() const { return link_; }

  // ---- protocol::Session: the driver's view ----
  void Start(TimeNs now) override;
  void OnFrame(protocol::PeerId, std::span<const std::byte>, TimeNs) override {}
  void OnPeerLost(protocol::PeerId, TimeNs) override {}
  void OnTimer(TimeNs now) override;
  bool PollFrame(protocol::OutgoingFrame&) override { return false; }
  TimeNs NextWakeup() const override { return link_.NextWakeup(); }
  // Also once the run is over and the gateway closed the line: what the link still holds
  // unacknowledged (a heartbeat, an update the server no longer wants) has nobody to go to.
  bool Finished() const override { return link_.Finished() || line_closed_after_run_; }

  // ---- SerialPort::Events ----
  void OnPortOpened() override;
  void OnPortBytes(std::span<const std::byte> bytes) override;
  void OnPortClosed(const std::string& why) override;
  void OnPortWritten(std::size_t bytes) override;

 private:
  void Flush();  // the link's bytes onto the line

  SessionDriver& driver_;
  protocol::Session& session_;
  SerialPort port_;
  std::vector<std::byte> memory_;
  serial::SessionLink link_;
  auth::ConnectionAuth auth_;
  std::mt19937 nonces_{std::random_device{}()};
  bool started_ = false;
  bool line_closed_after_run_ = false;  // set only once the session has finished
};

}  // namespace edgesgd::tcp::internal
