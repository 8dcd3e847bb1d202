#include "cli/tcp_flags.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "cli/bounded_option.h"
#include "cli/config_file.h"
#include "cli/flag_error.h"
#include "edgesgd/auth/key_file.h"
#include "edgesgd/platform/log.h"

namespace edgesgd::cli {
namespace {

// The exit code of a run ended by SIGINT or SIGTERM.
constexpr int kExitInterrupted = 130;

void AddListenerFlags(CLI::App& command, NetworkFlags& flags) {
  AddSecondsOption(command, "--hello-timeout-s", flags.hello_timeout_s,
                   "Close an accepted connection that sends no valid first frame within this");
  AddBoundedOption(command, "--max-unidentified-connections", flags.max_unidentified_connections,
                   std::size_t{1}, std::size_t{1} << 20,
                   "Accepted connections that may wait for their first frame at once; one "
                   "more closes the oldest (each peer then has at most one connection)");
  AddSecondsOption(command, "--idle-timeout-s", flags.idle_timeout_s,
                   "Close an accepted connection that sends nothing for this long (workers "
                   "send heartbeats; gossip neighbours send a model every round)");
  command.add_option("--port-file", flags.port_file,
                     "Write the listening port to FILE once bound (useful with port 0)");
}

const char* const kDeadlineHelp =
    "Wall seconds a round waits for stragglers before closing with --quorum updates (--buffer: "
    "before a silent worker is replaced)";

// DriverOptions::tls from the --tls-* flags (unset without them).
std::optional<tcp::TlsFiles> TlsFilesOf(const NetworkFlags& flags) {
  if (flags.tls_cert.empty()) return std::nullopt;
  return tcp::TlsFiles{flags.tls_cert, flags.tls_key, flags.tls_ca};
}

}  // namespace

void AddSocketFlags(CLI::App& command, std::size_t& send_buffer, std::size_t& low_watermark) {
  AddBoundedOption(command, "--socket-send-buffer", send_buffer, std::size_t{0},
                   tcp::kMaxSocketOptionBytes,
                   "SO_SNDBUF of every connection in bytes (the kernel doubles it, up to "
                   "net.core.wmem_max); 0 keeps the kernel's auto-tuning, usually the "
                   "fastest: frames are written straight from where they were built as far as "
                   "the socket takes them. A long, fast link needs about its bandwidth x "
                   "round-trip time");
  AddBoundedOption(command, "--receive-low-watermark", low_watermark, std::size_t{0},
                   tcp::kMaxSocketOptionBytes,
                   "While a large frame arrives, wake the reader only once this many of its "
                   "bytes (or the rest of it) are in; 0 wakes it on every arrival. Bytes held "
                   "back still keep a connection from counting as idle. Not used with TLS");
}

void AddNetworkFlags(CLI::App& command, NetworkFlags& flags) {
  AddSecondsOption(command, "--write-timeout-s", flags.write_timeout_s,
                   "Close a connection whose frame write takes longer than this");
  AddBoundedOption(command, "--send-queue", flags.send_queue, std::size_t{1}, std::size_t{4096},
                   "Frames queued per connection; a connected peer that falls further behind "
                   "is disconnected");
  AddSocketFlags(command, flags.socket_send_buffer, flags.receive_low_watermark);
  AddBoundedOption(command, "--reconnect-max-s", flags.reconnect_max_s, 0.05, 3600.0,
                   "Longest delay between reconnect attempts (exponential backoff from 50 ms, "
                   "with jitter)");
  CLI::Option* keys = command.add_option(
      "--keys", flags.keys,
      "Pre-shared device keys, one `DEVICE_ID HEX_KEY` line each (64 hex digits; keep the file "
      "chmod 600; `edgesgd keygen` writes one): every frame is authenticated with HMAC-SHA256 and replays are rejected. "
      "Required unless --insecure");
  command.add_flag("--insecure", flags.insecure,
                   "Send and accept unauthenticated frames (a trusted network or a test only)")
      ->excludes(keys);
  const char* tls_note = tcp::TlsAvailable() ? "" : " (not in this build: no OpenSSL)";
  CLI::Option* cert = command.add_option(
      "--tls-cert", flags.tls_cert,
      std::string("TLS on every connection (encryption; with --tls-key and --tls-ca): this "
                  "node's PEM certificate") +
          tls_note);
  CLI::Option* key = command.add_option("--tls-key", flags.tls_key,
                                        "This node's PEM private key (unencrypted)");
  CLI::Option* ca = command.add_option(
      "--tls-ca", flags.tls_ca,
      "PEM certificate of the CA that signed every node's certificate: both ends of a "
      "connection must present one it signed");
  cert->needs(key)->needs(ca);
  key->needs(cert);
  ca->needs(cert);
}

void AddServerFlags(CLI::App& command, ServerFlags& o) {
  AddConfigFlag(command);
  command.add_option("--listen", o.listen, "Address to accept workers on, HOST:PORT (port 0: any)")
      ->required();
  AddDataFlags(command, o);
  AddSeedFlag(command, o);
  AddTrainingFlags(command, o, kDeadlineHelp);
  command.get_option("--feedback")
      ->description("Error feedback of --aggregate mean: none, ef, def (see --detach) or saef "
                    "(defa, DEF-A's read-out, needs every worker's residual: simulate only)");
  AddJoinTimeoutFlag(command, o);
  command.add_option("--checkpoint", o.checkpoint,
                     "Write model, round and counters to FILE (atomically: temp file, fsync, "
                     "rename) before any frame of the next round is sent");
  AddBoundedOption(command, "--checkpoint-every", o.checkpoint_every, 1u, 100000000u,
                   "Checkpoint every K rounds (and at the end); K > 1 may lose up to K-1 "
                   "rounds on a crash, and a private run (--dp-mode) needs 1");
  command.add_flag("--resume", o.resume,
                   "Continue from --checkpoint (same flags); workers rejoin and get the model");
  command.add_option("--secagg-verifying-keys", o.secagg_verifying_keys,
                     "With --secagg-signed: every device's verifying key, the FILE of `edgesgd "
                     "keygen --verifying-keys` (public); advertisements and survivor-set "
                     "signatures that do not verify are refused");
  AddNetworkFlags(command, o.network);
  AddListenerFlags(command, o.network);
  AddOutputFlags(command, o);
}

void AddWorkerFlags(CLI::App& command, WorkerFlags& o) {
  AddConfigFlag(command);
  CLI::Option* connect = command.add_option(
      "--connect", o.connect,
      "The server's address, HOST:PORT (or reach it through a gateway on a serial line: "
      "--serial, --connect-serial or --listen-serial)");
  command.add_option("--id", o.id, "This worker's id, 1..workers (its data shard)")
      ->required()
      ->check(CLI::Range(1u, protocol::kMaxWorkers));
  AddDataFlags(command, o);
  AddBoundedOption(command, "--slowdown", o.slowdown, 1.0, 1e6,
                   "Make every gradient computation take F times as long (a slower device)");
  AddSecondsOption(command, "--heartbeat-s", o.heartbeat_s,
                   "Heartbeat interval while not sampled (keeps the server's idle and "
                   "liveness timers fed)");
  AddSecondsOption(command, "--join-retry-s", o.join_retry_s,
                   "Re-send Join this often until welcomed; every Join makes the server send "
                   "the full model again, so keep it above a model's transfer time");
  AddBoundedOption(command, "--secagg-min-neighbours", o.secagg_min_neighbours, 1u,
                   protocol::kMaxWorkers,
                   "Secure aggregation: refuse to mask a round's update with fewer neighbours "
                   "than this (a server that isolates a device with few or invented neighbours "
                   "could otherwise learn its update); set it from the run's neighbourhood "
                   "less the drop-outs this device accepts. The default 3 keeps the threshold "
                   "at 3 or more: no single neighbour can help the server");
  CLI::Option* signing_key = command.add_option(
      "--secagg-signing-key", o.secagg_signing_key,
      "Sign this device's secure rounds with its key in FILE (`edgesgd keygen --signing-keys`, "
      "the whole file or its --per-device-dir file; owner-only permissions). The worker then "
      "joins only runs with --secagg-signed, checks its neighbours' signatures and reveals "
      "nothing unless t of its neighbourhood signed the survivor set it was sent");
  CLI::Option* verifying_keys = command.add_option(
      "--secagg-verifying-keys", o.secagg_verifying_keys,
      "Every device's verifying key (`edgesgd keygen --verifying-keys`), from a source the "
      "server does not control; needed with --secagg-signing-key");
  signing_key->needs(verifying_keys);
  verifying_keys->needs(signing_key);
  AddSecondsOption(command, "--give-up-s", o.give_up_s,
                   "Exit with an error after this long without a connection to the server "
                   "(over TCP; on a serial line, the gateway gives up instead)",
                   1e9);
  AddBoundedOption(command, "--memory-mb", o.memory_mb, std::size_t{1}, std::size_t{4095},
                   "Memory this device offers the run (advertised in its Join; the server "
                   "refuses a run that needs more)");  // a Join states u32 bytes
  AddNetworkFlags(command, o.network);
  for (CLI::Option* line : AddSerialFlags(command, o.serial)) line->excludes(connect);
  command.add_flag("--quiet", o.quiet, "No summary line on stderr");
}

void AddPeerFlags(CLI::App& command, PeerFlags& o) {
  AddConfigFlag(command);
  command.add_option("--id", o.id, "This peer's id: its position (1-based) in --peers")
      ->required()
      ->check(CLI::Range(1u, protocol::kMaxWorkers));
  command.add_option("--listen", o.listen, "Address to accept neighbours on, HOST:PORT")
      ->required();
  command.add_option("--peers", o.peers,
                     "Every peer's address in id order, HOST:PORT,HOST:PORT,... (the number of "
                     "peers is the list's length)")
      ->required();
  AddDataFlags(command, o);
  AddSeedFlag(command, o);
  AddTrainingFlags(command, o,
                   "Wall seconds a gossip round waits for its neighbours' models; a silent "
                   "neighbour's weight then moves onto this peer");
  AddGossipFlags(command, o);
  AddNetworkFlags(command, o.network);
  AddListenerFlags(command, o.network);
  AddOutputFlags(command, o);
}

protocol::TimeNs Seconds(double seconds) { return static_cast<protocol::TimeNs>(seconds * 1e9); }

HostResult<> LoadAuthKeys(const NetworkFlags& flags, std::uint32_t own_device, KeysKept kept,
                          AuthKeys& keys) {
  if (flags.insecure) return {};
  if (flags.keys.empty()) {
    return FlagError("--keys FILE is required (or --insecure for plain frames)");
  }
  HostResult<std::size_t> load = kept == KeysKept::kOwnDevice
                                     ? auth::LoadDeviceKey(flags.keys, own_device, keys.ring)
                                     : auth::LoadKeyFile(flags.keys, keys.ring);
  if (!load.ok()) return std::move(load).error().WithContext("--keys");
  if (own_device != 0 && keys.ring.Find(own_device) == nullptr) {
    return FlagError("--keys " + flags.keys + " has no key for device " +
                     std::to_string(own_device) + " (this --id)");
  }
  keys.enabled = true;
  return {};
}

void WarnIfUnauthenticated(const NetworkFlags& flags, const char* command) {
  if (!flags.insecure) return;
  platform::Log(platform::LogLevel::kWarning, "%s: --insecure: frames are not authenticated: %s",
                command,
                flags.tls_cert.empty()
                    ? "anyone who can reach this node can send frames as any device (a trusted "
                      "network or a test only)"
                    : "over TLS, any node with a certificate from --tls-ca can send frames as "
                      "any device");
}

tcp::DriverOptions NetworkOptions(const NetworkFlags& flags, std::uint64_t seed,
                                  const char* log_name, const AuthKeys& keys) {
  tcp::DriverOptions options;
  options.auth_keys = keys.enabled ? &keys.ring : nullptr;
  options.tls = TlsFilesOf(flags);
  options.write_timeout_ns = Seconds(flags.write_timeout_s);
  options.hello_timeout_ns = Seconds(flags.hello_timeout_s);
  options.max_unidentified_connections = flags.max_unidentified_connections;
  // Accepted connections only: a worker's dialled link is never idle-checked.
  options.idle_timeout_ns = Seconds(flags.idle_timeout_s);
  options.send_queue_frames = flags.send_queue;
  options.socket_send_buffer_bytes = flags.socket_send_buffer;
  options.receive_low_watermark_bytes = flags.receive_low_watermark;
  options.reconnect_max_ns = Seconds(flags.reconnect_max_s);
  options.seed = seed;
  options.log_name = log_name;
  options.handle_signals = true;
  return options;
}

HostResult<> WritePortFile(const NetworkFlags& flags, std::uint16_t port) {
  if (flags.port_file.empty()) return {};
  // Written whole under a temporary name and renamed, so a reader never sees half a number.
  const std::string temporary = flags.port_file + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  if (file == nullptr || std::fprintf(file, "%u\n", port) < 0 || std::fclose(file) != 0 ||
      std::rename(temporary.c_str(), flags.port_file.c_str()) != 0) {
    return HostError(Status::Unavailable(), "cannot write --port-file " + flags.port_file + ": " +
                                                std::strerror(errno));
  }
  return {};
}

int ExitCodeFor(tcp::DriverStop stop, const char* command, const char* detail) {
  switch (stop) {
    case tcp::DriverStop::kFinished:
      return 0;
    case tcp::DriverStop::kSignal:
      std::fprintf(stderr, "edgesgd %s: interrupted%s\n", command, detail);
      return kExitInterrupted;
    case tcp::DriverStop::kGaveUp:
      std::fprintf(stderr, "edgesgd %s: gave up: no connection%s\n", command, detail);
      return 1;
    case tcp::DriverStop::kStopped:
      return 1;
  }
  return 1;
}

namespace {

// How the frames were protected, in the current summary section.
void WriteLinkSecurity(SummaryWriter& summary, const NetworkFlags& flags) {
  summary.Field("frame_authentication", flags.insecure ? "none (--insecure)" : "keys");
  summary.Field("tls", !flags.tls_cert.empty());
}

}  // namespace

void WriteServerNetwork(SummaryWriter& summary, const NetworkFlags& flags,
                        const protocol::ServerSession& session, const tcp::DriverCounters& net) {
  const protocol::ServerCounters& counters = session.counters();
  summary.Begin("network");
  WriteLinkSecurity(summary, flags);
  WriteServerCounters(summary, counters);
  summary.Field("rejoins", counters.rejoins);
  summary.Field("workers_lost", counters.workers_lost);
  summary.Field("refused_runs", counters.refused_runs);
  summary.Field("connections_accepted", net.accepted);
  summary.Field("disconnects", net.disconnects);
  summary.Field("oversized_frames", net.oversized_frames);
  summary.Field("malformed_prefixes", net.malformed_prefixes);
  summary.Field("unidentified_connections", net.unidentified);
  summary.Field("hello_timeouts", net.hello_timeouts);
  summary.Field("unidentified_evicted", net.unidentified_evicted);
  summary.Field("accept_backoffs", net.accept_backoffs);
  summary.Field("idle_timeouts", net.idle_timeouts);
  summary.Field("write_timeouts", net.write_timeouts);
  summary.Field("queue_overflows", net.queue_overflows);
  summary.Field("auth_rejected", net.auth_rejected);
  summary.Field("tls_failures", net.tls_failures);
  // Device by device, so a fleet's slowest or missing member shows: {"1": n1, "2": n2, ...}.
  summary.Begin("updates_by_worker");
  for (std::uint32_t worker = 1; worker <= session.options().workers; ++worker) {
    summary.Field(std::to_string(worker).c_str(), session.UpdatesAcceptedFrom(worker));
  }
  summary.End();
  summary.End();
}

void WritePeerGossip(SummaryWriter& summary, const PeerFlags& o, const GossipPlan& plan,
                     const protocol::GossipCounters& counters, const tcp::DriverCounters& net) {
  summary.Begin("gossip");
  WriteGossipPlanFields(summary, o, plan);
  WriteLinkSecurity(summary, o.network);
  summary.Field("neighbours_missed", counters.neighbours_missed);
  summary.Field("deadline_closes", counters.deadline_closes);
  summary.Field("neighbours_lost", counters.neighbours_lost);
  summary.Field("rejected_frames", counters.total_rejected());
  if (protocol::CompressesGossip(plan.algorithm) && plan.public_copies) {
    // CHOCO's and BEER's copies repaired after a lost delta (a link that was not up yet, or
    // dropped).
    summary.Field("out_of_order_deltas",
                  counters.rejected_for(protocol::GossipRejectReason::kOutOfOrder));
    summary.Field("copy_requests_sent", counters.copy_requests_sent);
    summary.Field("copies_sent", counters.copies_sent);
    summary.Field("copies_applied", counters.copies_applied);
  }
  summary.Field("auth_rejected", net.auth_rejected);
  summary.Field("tls_failures", net.tls_failures);
  summary.End();
}

}  // namespace edgesgd::cli
