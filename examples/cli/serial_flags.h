#pragma once

// The serial line of `edgesgd bridge` and of `edgesgd worker --serial...`: where the line is (a
// tty, or a TCP port standing in for a UART) and the link's limits and timers.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "edgesgd/platform/result.h"
#include "edgesgd/serial/link.h"
#include "edgesgd/tcp/serial_line.h"

namespace edgesgd::cli {

struct SerialFlags {
  std::string device;   // --serial PATH
  std::string connect;  // --connect-serial HOST:PORT
  std::string listen;   // --listen-serial HOST:PORT
  std::uint32_t baud = 115200;
  std::size_t max_frame_kb = 4096;
  double retransmit_ms = 200;
  double bytes_per_s = 11520;  // 115200 baud
  std::uint32_t attempts = 25;
};

// Registers --serial, --connect-serial and --listen-serial (at most one of them; SerialLineOf
// says when none was given), --baud, --serial-max-frame-kb, --serial-retransmit-ms,
// --serial-bytes-per-s and --serial-attempts on `command`. Returns the three line options, for
// a command that excludes them from other flags.
std::vector<CLI::Option*> AddSerialFlags(CLI::App& command, SerialFlags& flags);

// Whether any of the three line flags was given.
bool HasSerialLine(const SerialFlags& flags);

// The line of the flags; the error's line names the flag.
HostResult<tcp::SerialLine> SerialLineOf(const SerialFlags& flags);

serial::LinkOptions LinkOptionsOf(const SerialFlags& flags);
std::size_t MaxFrameBytesOf(const SerialFlags& flags);

}  // namespace edgesgd::cli
