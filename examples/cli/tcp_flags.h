#pragma once

// What `server`, `worker` and `peer` add to a run's flags: addresses, the connection policy,
// frame authentication, TLS and (server) checkpoints; how they become the tcp library's
// settings; and the exits and summary sections only a run over TCP has.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/metrics.h"
#include "cli/gossip_flags.h"
#include "cli/run_flags.h"
#include "cli/serial_flags.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::cli {

// Driver settings every TCP subcommand exposes.
struct NetworkFlags {
  double idle_timeout_s = 30;
  double write_timeout_s = 10;
  double hello_timeout_s = 5;
  std::size_t max_unidentified_connections = 64;
  std::size_t send_queue = 8;
  std::size_t socket_send_buffer = 0;  // bytes; 0 keeps the kernel's auto-tuning
  std::size_t receive_low_watermark = tcp::kDefaultReceiveLowWatermarkBytes;
  double reconnect_max_s = 2;
  std::string port_file;
  std::string keys;  // --keys FILE
  bool insecure = false;
  std::string tls_cert;  // --tls-cert, --tls-key, --tls-ca: all or none
  std::string tls_key;
  std::string tls_ca;
};

struct ServerFlags : RunFlags {
  std::string listen;
  std::string checkpoint;
  std::uint32_t checkpoint_every = 1;
  bool resume = false;
  std::string secagg_verifying_keys;  // --secagg-signed: every device's verifying key
  NetworkFlags network;
};

struct WorkerFlags : RunFlags {
  std::string connect;
  std::uint32_t id = 0;
  double slowdown = 1;
  double heartbeat_s = 1;
  double join_retry_s = 1;
  double give_up_s = 60;
  std::size_t memory_mb = 256;
  // Secure aggregation: the smallest roster it masks with. Three keeps the threshold at 3 or
  // more, so no single neighbour, real or invented, can help the server rebuild a secret.
  std::uint32_t secagg_min_neighbours = 3;
  // Signed secure rounds: this device's signing key and every device's verifying key.
  std::string secagg_signing_key;
  std::string secagg_verifying_keys;
  NetworkFlags network;
  SerialFlags serial;  // instead of --connect: the server through a gateway on a serial line
};

struct PeerFlags : RunFlags {
  std::uint32_t id = 0;
  std::string listen;
  std::string peers;
  NetworkFlags network;
};

// The connection policy's flags (timeouts, queue, backoff, --keys/--insecure, TLS), registered
// on `command`.
void AddNetworkFlags(CLI::App& command, NetworkFlags& flags);

// --socket-send-buffer and --receive-low-watermark (DriverOptions' socket settings), registered
// on `command`; `bench tcp` shares them.
void AddSocketFlags(CLI::App& command, std::size_t& send_buffer, std::size_t& low_watermark);

// Every flag of each subcommand, registered on `command`.
void AddServerFlags(CLI::App& command, ServerFlags& flags);
void AddWorkerFlags(CLI::App& command, WorkerFlags& flags);
void AddPeerFlags(CLI::App& command, PeerFlags& flags);

protocol::TimeNs Seconds(double seconds);

// The key ring of --keys, or none under --insecure. Lives as long as the driver using it.
struct AuthKeys {
  auth::FixedKeyRing<protocol::kMaxWorkers> ring;
  bool enabled = false;
};

// The keys a node takes from --keys: a worker, which only ever speaks as its own device, that
// device's alone, so that its per-device file and the shared file serve it alike and the other
// devices' keys are never in its memory; the server, peers and bridges every key of the file (a
// bridge uses the others to tell a device holding another device's key from an unknown one).
enum class KeysKept { kEveryDevice, kOwnDevice };

// Loads --keys into `keys` (unless --insecure); `own_device` (0 for the server, which only
// accepts connections) must have a key. The error's line names the flag.
HostResult<> LoadAuthKeys(const NetworkFlags& flags, std::uint32_t own_device, KeysKept kept,
                          AuthKeys& keys);

// Under --insecure, a warning that frames are not authenticated and who can therefore send them:
// printed when the run starts (after every check that could refuse it).
void WarnIfUnauthenticated(const NetworkFlags& flags, const char* command);

// The connection policy of the flags: timeouts, send queue, reconnect backoff, `keys`, TLS,
// SIGINT/SIGTERM handling, `seed` (reconnect jitter) and `log_name`.
tcp::DriverOptions NetworkOptions(const NetworkFlags& flags, std::uint64_t seed,
                                  const char* log_name, const AuthKeys& keys);

// Writes --port-file (if given) with `port`, whole under a temporary name and renamed. Errors:
// kUnavailable, naming the file and the system's reason.
HostResult<> WritePortFile(const NetworkFlags& flags, std::uint16_t port);

// The exit code of a run that ended with `stop`: 0 when finished, else 130 for a signal or 1,
// with a line on stderr naming `command` and ending in `detail`.
int ExitCodeFor(tcp::DriverStop stop, const char* command, const char* detail);

// The summary's "network" section of a parameter server over TCP: the frames' protection, the
// session's rejections, rejoins and losses, the updates accepted from each worker, and the
// connections' counters.
void WriteServerNetwork(SummaryWriter& summary, const NetworkFlags& flags,
                        const protocol::ServerSession& session, const tcp::DriverCounters& network);

// The summary's "gossip" section of a peer over TCP: the plan, and how its neighbours and
// connections fared.
void WritePeerGossip(SummaryWriter& summary, const PeerFlags& flags, const GossipPlan& plan,
                     const protocol::GossipCounters& gossip, const tcp::DriverCounters& network);

}  // namespace edgesgd::cli
