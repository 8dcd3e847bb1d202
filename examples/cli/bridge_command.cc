// `edgesgd bridge`: the gateway of a device on a serial line (a microcontroller's UART, or an
// emulator's), relaying its frames to and from the server over TCP as an authenticated worker
// connection (tcp::SerialBridge).

#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/run_flags.h"
#include "cli/serial_flags.h"
#include "cli/tcp_flags.h"
#include "edgesgd/tcp/serial_bridge.h"

namespace edgesgd::cli {
namespace {

constexpr const char* kBridge = "bridge";

struct BridgeFlags {
  std::string connect;
  std::uint32_t id = 0;
  double give_up_s = 300;
  std::size_t queue_frames = 8;
  bool quiet = false;
  SerialFlags serial;
  NetworkFlags network;
};

void PrintSummary(const BridgeFlags& o, const tcp::SerialBridge& bridge) {
  const tcp::SerialBridgeCounters& c = bridge.counters();
  const serial::LinkCounters& link = bridge.link().counters();
  const serial::DecoderCounters& decoder = bridge.link().decoder_counters();
  std::fprintf(stderr,
               "edgesgd bridge %u: %llu frames to the device, %llu to the server; "
               "%llu device restarts, %llu server losses, %llu link restarts, %llu line "
               "closures; line: %llu retransmissions, %llu duplicates, %llu damaged frames "
               "(%llu bytes) skipped, %llu failed authentication\n",
               o.id, static_cast<unsigned long long>(c.frames_to_device),
               static_cast<unsigned long long>(c.frames_to_server),
               static_cast<unsigned long long>(c.device_restarts),
               static_cast<unsigned long long>(c.server_losses),
               static_cast<unsigned long long>(c.link_restarts),
               static_cast<unsigned long long>(c.line_closures),
               static_cast<unsigned long long>(link.retransmissions),
               static_cast<unsigned long long>(link.duplicates),
               static_cast<unsigned long long>(decoder.rejected()),
               static_cast<unsigned long long>(decoder.bytes_dropped),
               static_cast<unsigned long long>(c.auth_rejected));
}

int RunBridge(const BridgeFlags& o) {
  tcp::SerialBridgeSettings settings;
  const HostResult<tcp::SerialLine> line = SerialLineOf(o.serial);
  if (!line.ok()) return Fail(kBridge, line.message(), 2);
  settings.device = *line;
  HostResult<tcp::Endpoint> server = tcp::ParseEndpoint(o.connect);
  if (!server.ok()) return Fail(kBridge, "--connect " + server.message(), 2);
  settings.server = *server;
  AuthKeys keys;
  if (const HostResult<> loaded = LoadAuthKeys(o.network, o.id, KeysKept::kEveryDevice, keys);
      !loaded.ok()) {
    return Fail(kBridge, loaded.message(), 2);
  }
  settings.device_id = o.id;
  settings.max_frame_bytes = MaxFrameBytesOf(o.serial);
  settings.queue_frames = o.queue_frames;
  settings.link = LinkOptionsOf(o.serial);
  settings.network = NetworkOptions(o.network, o.id, kBridge, keys);
  settings.network.give_up_ns = Seconds(o.give_up_s);
  tcp::SerialBridge bridge;
  if (const HostResult<> opened = bridge.Open(settings); !opened.ok()) {
    return Fail(kBridge, opened.message(), 1);
  }
  if (!o.serial.listen.empty()) {
    if (const HostResult<> written = WritePortFile(o.network, bridge.serial_listen_port());
        !written.ok()) {
      return Fail(kBridge, written.message(), 1);
    }
  }
  WarnIfUnauthenticated(o.network, kBridge);
  const tcp::DriverStop stop = bridge.Run();
  if (!o.quiet) PrintSummary(o, bridge);
  char detail[96];
  std::snprintf(detail, sizeof(detail), " to %s for %.0f s", o.connect.c_str(), o.give_up_s);
  return ExitCodeFor(stop, kBridge, stop == tcp::DriverStop::kGaveUp ? detail : "");
}

}  // namespace

void AddBridgeCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BridgeFlags>();
  CLI::App* command = app.add_subcommand(
      "bridge",
      "Gateway for one device on a serial line (a microcontroller's UART, a tty, or an "
      "emulator's UART on a TCP port): relays its frames to the server over TCP, so the server "
      "sees an ordinary worker. With --keys both the line and the server connection are "
      "authenticated with the device's key (the device holds the same key); --insecure carries "
      "plain frames on both. Reconnects on either side; ends when the server ends the run.");
  AddConfigFlag(*command);
  AddSerialFlags(*command, o->serial);
  command->add_option("--connect", o->connect, "The server's address, HOST:PORT")->required();
  command->add_option("--id", o->id, "The device's id, 1..workers (its frames carry it)")
      ->required()
      ->check(CLI::Range(1u, protocol::kMaxWorkers));
  command
      ->add_option("--give-up-s", o->give_up_s,
                   "Exit with an error after this long without a connection to the server")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e9));
  command
      ->add_option("--queue-frames", o->queue_frames,
                   "Server frames waiting for the line; when full the oldest is dropped")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  AddNetworkFlags(*command, o->network);
  command->add_option("--port-file", o->network.port_file,
                      "With --listen-serial: write the serial line's listening port to FILE");
  command->add_flag("--quiet", o->quiet, "No summary line on stderr");
  command->callback([o, &exit_code] { exit_code = RunBridge(*o); });
}

}  // namespace edgesgd::cli
