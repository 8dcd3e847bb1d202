#include "cli/serial_flags.h"

#include <charconv>

#include "cli/bounded_option.h"
#include "cli/flag_error.h"
#include "cli/tcp_flags.h"

namespace edgesgd::cli {

std::vector<CLI::Option*> AddSerialFlags(CLI::App& command, SerialFlags& o) {
  CLI::Option* device = command.add_option(
      "--serial", o.device,
      "The serial line is this tty (e.g. /dev/ttyUSB0 or /dev/ttyACM0), used in raw mode");
  CLI::Option* connect = command.add_option(
      "--connect-serial", o.connect,
      "The serial line is a TCP connection to HOST:PORT, where the other end listens (an "
      "emulator's UART, e.g. qemu -serial tcp::PORT,server=on,wait=off)");
  CLI::Option* listen = command.add_option(
      "--listen-serial", o.listen,
      "The serial line is a TCP connection accepted on HOST:PORT (the other end connects; a "
      "newer connection replaces the current one)");
  device->excludes(connect)->excludes(listen);
  connect->excludes(listen);
  command.add_option("--baud", o.baud, "Baud rate of a --serial tty")
      ->capture_default_str()
      ->check([](const std::string& text) {
        std::uint32_t baud = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), baud);
        const bool whole = error == std::errc() && end == text.data() + text.size();
        return whole && tcp::SerialBaudSupported(baud)
                   ? std::string()
                   : std::string("not a rate a tty takes (9600, 19200, ... 115200, ... 4000000)");
      });
  AddBoundedOption(command, "--serial-max-frame-kb", o.max_frame_kb, std::size_t{1},
                   std::size_t{1} << 20,
                   "Largest frame carried on the line, in KiB (the link keeps two buffers of "
                   "about this size); the model broadcast of a dense run is 4 bytes per "
                   "parameter");
  AddBoundedOption(command, "--serial-retransmit-ms", o.retransmit_ms, 1.0, 3.6e6,
                   "Send an unacknowledged frame again after this long plus the frame's own "
                   "time on the line (see --serial-bytes-per-s)");
  AddBoundedOption(command, "--serial-bytes-per-s", o.bytes_per_s, 100.0, 1e10,
                   "The line's speed, which gives a frame's time on it (a 32 KB model takes "
                   "2.8 s at the default, 115200 baud); qemu's emulated UART moves about "
                   "15-30 KB/s");
  AddBoundedOption(command, "--serial-attempts", o.attempts, 1u, 1000000u,
                   "Sends of one frame before the link is declared failed and started again "
                   "(the session then joins again)");
  return {device, connect, listen};
}

bool HasSerialLine(const SerialFlags& o) {
  return !o.device.empty() || !o.connect.empty() || !o.listen.empty();
}

HostResult<tcp::SerialLine> SerialLineOf(const SerialFlags& o) {
  tcp::SerialLine line;
  if (!o.device.empty()) {
    line.kind = tcp::SerialLine::Kind::kDevice;
    line.device = o.device;
    line.baud = o.baud;
    return line;
  }
  const bool connect = !o.connect.empty();
  if (!connect && o.listen.empty()) {
    return FlagError(
        "no serial line: give --serial PATH, --connect-serial HOST:PORT or --listen-serial "
        "HOST:PORT");
  }
  line.kind = connect ? tcp::SerialLine::Kind::kConnect : tcp::SerialLine::Kind::kListen;
  HostResult<tcp::Endpoint> endpoint = tcp::ParseEndpoint(connect ? o.connect : o.listen);
  if (!endpoint.ok()) {
    return HostError(
        endpoint.status(),
        std::string(connect ? "--connect-serial " : "--listen-serial ") + endpoint.message());
  }
  line.endpoint = *endpoint;
  return line;
}

serial::LinkOptions LinkOptionsOf(const SerialFlags& o) {
  serial::LinkOptions options;
  options.retransmit_ns = static_cast<serial::TimeNs>(o.retransmit_ms * 1e6);
  options.byte_ns = static_cast<serial::TimeNs>(1e9 / o.bytes_per_s);
  options.max_attempts = o.attempts;
  return options;
}

std::size_t MaxFrameBytesOf(const SerialFlags& o) { return o.max_frame_kb << 10; }

}  // namespace edgesgd::cli
