#pragma once

// A gateway for a device on a serial line: relays frames between the device's serial link
// (edgesgd/serial/link.h over a tty, or a TCP port an emulator exposes as the UART) and the
// server over TCP, so that the server sees the device as an ordinary worker. One bridge per
// device. The bridge makes no protocol decisions: the device's own WorkerSession joins, trains
// and leaves; the bridge moves whole frames, one in flight on the line at a time.
//
// Authentication, with the device's pre-shared key (DriverOptions::auth_keys, which must hold
// device_id's key), on both sides: the serial line carries the TCP transport's hellos and records
// (serial/session_link.h: the device initiates, the bridge answers and opens each record), and
// the server connection is authenticated as any worker's. A device that fails (another device's
// key, a forged or replayed record) is counted, ignored for a second and its link restarted;
// nothing of it reaches the server.
// Without keys (auth_keys null) both carry plain frames.
//
// Either side may go away:
//   - the server connection drops: the bridge reconnects (with the driver's backoff) and
//     restarts the serial link with a new nonce, which tells the device's session that its
//     server link was lost, so it joins again;
//   - the device resets, or the line is cut and comes back: the link resynchronises (the device
//     announces a new nonce) and the device's new Join reaches the server over the same
//     connection; the tty is reopened, or the emulator's port reconnected, every retry_ns.
// Garbage on the line (bytes lost, damaged or repeated) is counted by the link's decoder and
// skipped; the link retransmits what was lost.
//
// The bridge finishes once the server has ended the run (its Leave reached the device), or on a
// signal, or after DriverOptions::give_up_ns without a server connection.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/serial/link.h"
#include "edgesgd/tcp/serial_line.h"
#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::tcp {

struct SerialBridgeSettings {
  SerialLine device;
  Endpoint server;
  // The device's peer id (1..n), which its frames carry and whose key authenticates the
  // connection.
  std::uint32_t device_id = 0;
  // Largest frame relayed either way, prefix included; the link's buffers are sized by it.
  std::size_t max_frame_bytes = std::size_t{4} << 20;
  // Frames from the server waiting for the line; when full the oldest is dropped (counted): the
  // sessions resend what matters.
  std::size_t queue_frames = 8;
  serial::LinkOptions link;
  // Timeouts, backoff, give-up time, authentication, signals and log name of the server
  // connection; the bridge sets dial and auth_device itself.
  DriverOptions network;
};

struct SerialBridgeCounters {
  std::uint64_t frames_to_device = 0;  // handed to the serial link
  std::uint64_t frames_to_server = 0;  // received from the device and handed to the driver
  std::uint64_t frames_dropped = 0;    // server frames dropped from a full queue
  std::uint64_t frames_too_large = 0;  // server frames above max_frame_bytes
  std::uint64_t server_losses = 0;     // the server connection dropped
  std::uint64_t link_restarts = 0;     // the link was started again (line reopened, server
                                       // lost, or max_attempts without an acknowledgement)
  std::uint64_t device_restarts = 0;   // the device announced a new nonce
  std::uint64_t line_closures = 0;     // the serial line hung up or failed
  std::uint64_t auth_rejected = 0;     // device hellos or records that failed authentication
};

class SerialBridge {
 public:
  SerialBridge();
  ~SerialBridge();
  SerialBridge(const SerialBridge&) = delete;
  SerialBridge& operator=(const SerialBridge&) = delete;

  // Sizes the link, opens the server connection's driver and the serial line (see
  // SessionDriver::Open and SerialLine). Once. Errors, the message for people:
  // kInvalidArgument (no device id, a max_frame_bytes below the smallest frame, no queue,
  // what serial::Link::Init refuses), and those of SessionDriver::Open and the line.
  HostResult<> Open(const SerialBridgeSettings& settings);
  // Relays until the run ends (kFinished), a signal, or the give-up time.
  DriverStop Run();

  const SerialBridgeCounters& counters() const;
  const serial::Link& link() const;
  const DriverCounters& network_counters() const;
  // The port a kListen line listens on (0 for the other kinds).
  std::uint16_t serial_listen_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edgesgd::tcp
