#pragma once

// Where a serial line is, for the Linux side of a serial link (edgesgd/serial): a tty (a board's
// UART through a USB adapter, USB-CDC, a Bluetooth serial port), or a TCP socket standing in for
// one — an emulator exposes a microcontroller's UART as a TCP port, and a test can stand between
// the two ends to damage the bytes.

#include <cstdint>
#include <string>

#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::tcp {

struct SerialLine {
  enum class Kind : std::uint8_t {
    kDevice,   // open the tty at `device` (raw mode, `baud`)
    kConnect,  // connect to `endpoint`, where the device's end listens
    kListen,   // accept at `endpoint`; a newer connection replaces the current one
  };
  Kind kind = Kind::kDevice;
  std::string device;
  Endpoint endpoint;
  std::uint32_t baud = 115200;
  // How long to wait before opening or connecting again after a failure or a closed line.
  TimeNs retry_ns = 500 * kNsPerMs;
};

// Whether `baud` is a rate the tty driver takes (9600 ... 4000000).
bool SerialBaudSupported(std::uint32_t baud);

}  // namespace edgesgd::tcp
