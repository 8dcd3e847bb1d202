// `edgesgd server`, `edgesgd worker` and `edgesgd peer`: the protocol sessions of `simulate`
// over real TCP (transport/tcp). The server owns the run: it takes the training flags and hands
// the RunConfig to every worker in its Welcome, so a worker needs only the server's address, its
// id and the data flags to build its shard. Gossip peers each take the full flags (there is no
// one to hand them out). Metrics rows and the summary are simulate's, with wall-clock seconds.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/metrics.h"
#include "cli/run_flags.h"
#include "cli/task.h"
#include "edgesgd/tcp/session_driver.h"
#include "edgesgd/auth/key_file.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/protocol/gossip_peer_session.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"

namespace edgesgd::cli {
namespace {

constexpr int kExitInterrupted = 130;

// Driver settings every TCP subcommand exposes.
struct NetworkFlags {
  double idle_timeout_s = 30;
  double write_timeout_s = 10;
  double hello_timeout_s = 5;
  std::size_t send_queue = 8;
  double reconnect_max_s = 2;
  std::string port_file;
  std::string keys;  // --keys FILE
  bool insecure = false;
  std::string tls_cert;  // --tls-cert, --tls-key, --tls-ca: all or none
  std::string tls_key;
  std::string tls_ca;
};

void AddNetworkFlags(CLI::App& command, NetworkFlags& flags) {
  command.add_option("--write-timeout-s", flags.write_timeout_s,
                     "Close a connection whose frame write takes longer than this")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  command.add_option("--send-queue", flags.send_queue,
                     "Frames queued per connection; a connected peer that falls further behind "
                     "is disconnected")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{4096}));
  command.add_option("--reconnect-max-s", flags.reconnect_max_s,
                     "Longest delay between reconnect attempts (exponential backoff from 50 ms, "
                     "with jitter)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  CLI::Option* keys = command.add_option(
      "--keys", flags.keys,
      "Pre-shared device keys, one `DEVICE_ID HEX_KEY` line each (64 hex digits; keep the file "
      "chmod 600): every frame is authenticated with HMAC-SHA256 and replays are rejected. "
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

// DriverOptions::tls from the --tls-* flags (unset without them).
std::optional<tcp::TlsFiles> TlsFilesOf(const NetworkFlags& flags) {
  if (flags.tls_cert.empty()) return std::nullopt;
  return tcp::TlsFiles{flags.tls_cert, flags.tls_key, flags.tls_ca};
}

// The key ring of --keys, or none under --insecure. Lives as long as the driver using it.
struct AuthKeys {
  auth::FixedKeyRing<protocol::kMaxWorkers> ring;
  bool enabled = false;
};

// Loads --keys into `keys` (unless --insecure); `own_device` (0 for the server, which only
// accepts connections) must have a key. False after printing a one-line error.
bool LoadAuthKeys(const NetworkFlags& flags, std::uint32_t own_device, const char* command,
                  AuthKeys& keys) {
  if (flags.insecure) return true;
  if (flags.keys.empty()) {
    std::fprintf(stderr, "edgesgd %s: --keys FILE is required (or --insecure for plain frames)\n",
                 command);
    return false;
  }
  const auth::KeyFileLoad load = auth::LoadKeyFile(flags.keys, keys.ring);
  if (!load.ok()) {
    std::fprintf(stderr, "edgesgd %s: --keys: %s\n", command, load.message.c_str());
    return false;
  }
  if (!load.warning.empty()) {
    platform::Log(platform::LogLevel::kWarning, "%s: %s", command, load.warning.c_str());
  }
  if (own_device != 0 && keys.ring.Find(own_device) == nullptr) {
    std::fprintf(stderr, "edgesgd %s: --keys %s has no key for device %u (this --id)\n",
                 command, flags.keys.c_str(), own_device);
    return false;
  }
  keys.enabled = true;
  return true;
}

void AddListenerFlags(CLI::App& command, NetworkFlags& flags) {
  command.add_option("--hello-timeout-s", flags.hello_timeout_s,
                     "Close an accepted connection that sends no valid first frame within this")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  command.add_option("--idle-timeout-s", flags.idle_timeout_s,
                     "Close an accepted connection that sends nothing for this long (workers "
                     "send heartbeats; gossip neighbours send a model every round)")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  command.add_option("--port-file", flags.port_file,
                     "Write the listening port to FILE once bound (useful with port 0)");
}

protocol::TimeNs Seconds(double seconds) {
  return static_cast<protocol::TimeNs>(seconds * 1e9);
}

tcp::DriverOptions BaseDriverOptions(const NetworkFlags& flags, std::uint64_t seed,
                                     const char* log_name, const AuthKeys& keys,
                                     std::uint32_t device) {
  tcp::DriverOptions options;
  options.auth_keys = keys.enabled ? &keys.ring : nullptr;
  options.auth_device = device;
  options.tls = TlsFilesOf(flags);
  options.write_timeout_ns = Seconds(flags.write_timeout_s);
  options.hello_timeout_ns = Seconds(flags.hello_timeout_s);
  options.send_queue_frames = flags.send_queue;
  options.reconnect_max_ns = Seconds(flags.reconnect_max_s);
  options.seed = seed;
  options.log_name = log_name;
  options.handle_signals = true;
  return options;
}

// Opens the driver and writes the port file. False after printing a one-line error.
bool OpenDriver(tcp::SessionDriver& driver, const tcp::DriverOptions& options,
                const NetworkFlags& flags, const char* command) {
  std::string error;
  if (!driver.Open(options, error).ok()) {
    std::fprintf(stderr, "edgesgd %s: %s\n", command, error.c_str());
    return false;
  }
  if (!flags.port_file.empty()) {
    // Written whole under a temporary name and renamed, so a reader never sees half a number.
    const std::string temporary = flags.port_file + ".tmp";
    std::FILE* file = std::fopen(temporary.c_str(), "w");
    if (file == nullptr || std::fprintf(file, "%u\n", driver.listen_port()) < 0 ||
        std::fclose(file) != 0 || std::rename(temporary.c_str(), flags.port_file.c_str()) != 0) {
      std::fprintf(stderr, "edgesgd %s: cannot write --port-file %s: %s\n", command,
                   flags.port_file.c_str(), std::strerror(errno));
      return false;
    }
  }
  return true;
}

// Arena storage of `bytes` usable bytes. Pages are not touched until the arena hands them out,
// so a generous worker budget costs only what the run uses.
struct ArenaBuffer {
  explicit ArenaBuffer(std::size_t bytes)
      : storage(new std::byte[bytes + kArenaAlignment]),
        arena(std::span<std::byte>(storage.get(), bytes + kArenaAlignment)) {}
  std::unique_ptr<std::byte[]> storage;
  Arena arena;
};

// ---- Checkpoint files ----

// Writes `bytes` to `path` so that a crash at any moment leaves either the old file or the new
// one: a temporary file in the same directory, fsync, rename over `path`, fsync the directory.
bool WriteFileAtomically(const std::string& path, std::span<const std::byte> bytes,
                         std::string& error) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot write checkpoint " + temporary + ": " + std::strerror(errno);
    return false;
  }
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "cannot write checkpoint " + temporary + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    error = "cannot sync checkpoint " + temporary + ": " + std::strerror(errno);
    return false;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot rename checkpoint onto " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);  // makes the rename durable
    ::close(dir_fd);
  }
  return true;
}

bool ReadWholeFile(const std::string& path, std::vector<std::byte>& out, std::string& error) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    error = "cannot read checkpoint " + path + ": " + std::strerror(errno);
    return false;
  }
  out.clear();
  std::byte chunk[65536];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) out.insert(out.end(), chunk, chunk + n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) {
    error = "cannot read checkpoint " + path;
    return false;
  }
  return true;
}

int ExitCodeFor(tcp::DriverStop stop, const char* command, const char* detail) {
  switch (stop) {
    case tcp::DriverStop::kFinished: return 0;
    case tcp::DriverStop::kSignal:
      std::fprintf(stderr, "edgesgd %s: interrupted%s\n", command, detail);
      return kExitInterrupted;
    case tcp::DriverStop::kGaveUp:
      std::fprintf(stderr, "edgesgd %s: gave up: no connection%s\n", command, detail);
      return 1;
    case tcp::DriverStop::kStopped: return 1;
  }
  return 1;
}

// ---- server ----

struct ServerFlags : RunFlags {
  std::string listen;
  std::string checkpoint;
  std::uint32_t checkpoint_every = 1;
  bool resume = false;
  double join_timeout_s = 0;
  NetworkFlags network;
};

int RunServer(const ServerFlags& o) {
  const char* kName = "server";
  tcp::Endpoint listen;
  std::string error;
  if (!tcp::ParseEndpoint(o.listen, listen, error).ok()) {
    std::fprintf(stderr, "edgesgd server: --listen %s\n", error.c_str());
    return 2;
  }
  AuthKeys keys;
  if (!LoadAuthKeys(o.network, 0, kName, keys)) return 2;
  if (o.resume && o.checkpoint.empty()) {
    std::fprintf(stderr, "edgesgd server: --resume needs --checkpoint FILE\n");
    return 2;
  }
  if (const std::string why = CheckRunConsistency(o); !why.empty()) {
    std::fprintf(stderr, "edgesgd server: %s\n", why.c_str());
    return 2;
  }
  Task task;
  if (const int code = SetUpTask("server", o, o.workers, task); code != 0) return code;
  const protocol::RunConfig config = BuildRunConfig(o, task);
  protocol::ServerOptions server_options = BuildServerOptions(o);
  if (o.join_timeout_s > 0) server_options.join_timeout_ns = Seconds(o.join_timeout_s);
  if (const int code = ValidateServerRun("server", config, server_options); code != 0) {
    return code;
  }
  const MemoryPlan plan = MakeMemoryPlan(config, server_options);
  ArenaBuffer arena(plan.server_arena);
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  protocol::ServerSession server;
  if (const Status check = server.Init(arena.arena, config, server_options, initial);
      !check.ok()) {
    std::fprintf(stderr, "edgesgd server: %s\n", check.reason());
    return 1;
  }
  std::vector<std::byte> state(protocol::ServerSession::StateBytes(config));
  if (o.resume) {
    std::vector<std::byte> saved;
    if (!ReadWholeFile(o.checkpoint, saved, error)) {
      std::fprintf(stderr, "edgesgd server: --resume: %s\n", error.c_str());
      return 1;
    }
    if (const Status check = server.RestoreState(saved); !check.ok()) {
      std::fprintf(stderr, "edgesgd server: --resume %s: %s\n", o.checkpoint.c_str(),
                   check.reason());
      return 1;
    }
    platform::Log(platform::LogLevel::kInfo, "server: resuming at round %u of %u from %s",
                  server.round() + 1, o.rounds, o.checkpoint.c_str());
  }

  tcp::DriverOptions options = BaseDriverOptions(o.network, o.seed, kName, keys, 0);
  options.listen = listen;
  options.max_peer_id = server_options.workers;
  options.max_frame_bytes = plan.update_frame;
  options.idle_timeout_ns = Seconds(o.network.idle_timeout_s);
  tcp::SessionDriver driver;
  if (!OpenDriver(driver, options, o.network, kName)) return 1;
  if (!o.quiet) {
    std::fprintf(stderr, "edgesgd server: listening on %s:%u for %zu workers\n",
                 listen.host.c_str(), driver.listen_port(), o.workers);
  }

  MetricsWriter metrics;
  if (!o.metrics.empty() && !metrics.Open(o.metrics, error)) {
    std::fprintf(stderr, "edgesgd server: %s\n", error.c_str());
    return 1;
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  ServerRunOutput output(o, config, task, metrics, progress);
  std::uint32_t saved_round = server.round();
  bool checkpoint_failed = false;
  driver.SetAfterSessionCall([&] {
    // Durable before anything of the next round leaves: the driver sends the session's frames
    // only after this returns.
    if (!o.checkpoint.empty() && server.round() != saved_round &&
        (server.round() % o.checkpoint_every == 0 || server.Finished())) {
      const Result<std::size_t> bytes = server.SaveState(state);
      if (!bytes.ok() || !WriteFileAtomically(o.checkpoint, state, error)) {
        std::fprintf(stderr, "edgesgd server: %s\n",
                     bytes.ok() ? error.c_str() : "cannot encode the checkpoint");
        checkpoint_failed = true;
        driver.RequestStop();
      }
      saved_round = server.round();
    }
    output.Drain(server);
  });
  const tcp::DriverStop stop = driver.Run(server);
  progress.Finish();
  if (!metrics.Close(error)) {
    std::fprintf(stderr, "edgesgd server: %s\n", error.c_str());
    return 1;
  }
  if (checkpoint_failed) return 1;
  if (stop != tcp::DriverStop::kFinished || !server.Finished()) {
    char detail[160];
    std::snprintf(detail, sizeof(detail), " after %u of %u rounds%s", server.round(), o.rounds,
                  o.checkpoint.empty() ? "" : " (resume with --resume)");
    const int code = ExitCodeFor(stop, kName, detail);
    return code == 0 ? 1 : code;
  }
  if (!server.status().ok()) {
    std::fprintf(stderr, "edgesgd server: the run failed after %u rounds (the model diverged)\n",
                 server.round());
    return 1;
  }

  const protocol::ServerCounters& counters = server.counters();
  const tcp::DriverCounters& net = driver.counters();
  SummaryWriter summary;
  WriteRunSummary(summary, o, config, task.dimension(), output.last());
  WriteMemoryPlan(summary, plan);
  summary.Begin("network");
  summary.Field("server_rejected_frames", counters.total_rejected());
  summary.Field("deadline_extensions", counters.deadline_extensions);
  summary.Field("rejoins", counters.rejoins);
  summary.Field("workers_lost", counters.workers_lost);
  summary.Field("connections_accepted", net.accepted);
  summary.Field("disconnects", net.disconnects);
  summary.Field("oversized_frames", net.oversized_frames);
  summary.Field("malformed_prefixes", net.malformed_prefixes);
  summary.Field("unidentified_connections", net.unidentified);
  summary.Field("hello_timeouts", net.hello_timeouts);
  summary.Field("idle_timeouts", net.idle_timeouts);
  summary.Field("write_timeouts", net.write_timeouts);
  summary.Field("queue_overflows", net.queue_overflows);
  summary.Field("auth_rejected", net.auth_rejected);
  summary.Field("tls_failures", net.tls_failures);
  summary.End();
  return FinishServerRun("server", "s", o, summary, server.model(), output.last());
}

// ---- worker ----

struct WorkerFlags : RunFlags {
  std::string connect;
  std::uint32_t id = 0;
  double slowdown = 1;
  double heartbeat_s = 1;
  double join_retry_s = 1;
  double give_up_s = 60;
  std::size_t memory_mb = 256;
  NetworkFlags network;
};

// The worker's gradient oracle. The run's shape (workers, seed, batch) arrives in the Welcome,
// so the task is built right after it (the driver's hook), from the data flags plus the
// Welcome; data flags that do not fit the server's model stop the worker there.
struct WorkerTask {
  const WorkerFlags* flags = nullptr;
  protocol::WorkerSession* session = nullptr;
  Task task;
  bool ready = false;
  std::string error;  // set (and the driver stopped) when the task cannot be built

  static Status Gradient(void* user, std::span<const float> point, std::uint32_t round,
                         std::uint32_t local_step, std::span<float> gradient) {
    auto& self = *static_cast<WorkerTask*>(user);
    if (!self.ready) return Status::FailedPrecondition();  // stopping: see Setup's error
    const auto start = std::chrono::steady_clock::now();
    const Status status =
        self.task.Gradient(self.flags->id - 1, point, round, local_step, gradient);
    if (self.flags->slowdown > 1) {
      // A slower device: the same computation takes `slowdown` times as long.
      const auto spent = std::chrono::steady_clock::now() - start;
      std::this_thread::sleep_for(
          std::chrono::duration_cast<std::chrono::nanoseconds>(spent * (self.flags->slowdown - 1)));
    }
    return status;
  }

  bool Setup() {
    const protocol::RunConfig& config = session->config();
    TaskOptions options;
    if (!BuildTaskOptions(*flags, session->workers(), config.seed, config.batch, options, error) ||
        !task.Setup(options, error)) {
      return false;
    }
    if (task.dimension() != config.layout.dimension() || flags->id > session->workers()) {
      error = "the server's model has " + std::to_string(config.layout.dimension()) +
              " parameters and " + std::to_string(session->workers()) +
              " workers, but these data flags give " + std::to_string(task.dimension()) +
              " parameters for worker " + std::to_string(flags->id) +
              ": pass the server's --task/--data/--dim/--hidden";
      return false;
    }
    ready = true;
    return true;
  }
};

int RunWorker(const WorkerFlags& o) {
  const char* kName = "worker";
  tcp::Endpoint server_address;
  std::string error;
  if (!tcp::ParseEndpoint(o.connect, server_address, error).ok()) {
    std::fprintf(stderr, "edgesgd worker: --connect %s\n", error.c_str());
    return 2;
  }
  AuthKeys keys;
  if (!LoadAuthKeys(o.network, o.id, kName, keys)) return 2;
  ArenaBuffer arena(o.memory_mb << 20);
  protocol::WorkerSession session;
  WorkerTask oracle;
  tcp::SessionDriver driver;
  oracle.flags = &o;
  oracle.session = &session;
  protocol::WorkerOptions worker_options;
  worker_options.device_id = o.id;
  worker_options.gradient = &WorkerTask::Gradient;
  worker_options.user = &oracle;
  worker_options.join_retry_ns = Seconds(o.join_retry_s);
  worker_options.heartbeat_interval_ns = Seconds(o.heartbeat_s);
  if (const Status check = session.Init(arena.arena, worker_options); !check.ok()) {
    std::fprintf(stderr, "edgesgd worker: %s\n", check.reason());
    return 2;
  }
  tcp::DriverOptions options = BaseDriverOptions(o.network, o.id, kName, keys, o.id);
  options.dial.push_back({protocol::kServerPeer, server_address});
  options.give_up_ns = Seconds(o.give_up_s);
  if (!OpenDriver(driver, options, o.network, kName)) return 1;
  driver.SetAfterSessionCall([&] {
    if (session.configured() && !oracle.ready && oracle.error.empty() && !oracle.Setup()) {
      driver.RequestStop();
    }
  });
  const tcp::DriverStop stop = driver.Run(session);
  if (!oracle.error.empty()) {
    std::fprintf(stderr, "edgesgd worker: %s\n", oracle.error.c_str());
    return 1;
  }
  if (!session.status().ok()) {
    std::fprintf(stderr, "edgesgd worker: the server refused this worker: %s\n",
                 session.failure_reason());
    return 1;
  }
  if (stop != tcp::DriverStop::kFinished) {
    char detail[96];
    std::snprintf(detail, sizeof(detail), " to %s for %.0f s", o.connect.c_str(), o.give_up_s);
    return ExitCodeFor(stop, kName, stop == tcp::DriverStop::kGaveUp ? detail : "");
  }
  if (!o.quiet) {
    const protocol::WorkerCounters& counters = session.counters();
    std::fprintf(stderr, "edgesgd worker %u: done: %llu updates sent (%llu re-sent), %llu joins\n",
                 o.id, static_cast<unsigned long long>(counters.updates_sent),
                 static_cast<unsigned long long>(counters.updates_resent),
                 static_cast<unsigned long long>(counters.joins_sent));
  }
  return 0;
}

// ---- peer ----

struct PeerFlags : RunFlags {
  std::uint32_t id = 0;
  std::string listen;
  std::string peers;
  NetworkFlags network;
};

int RunPeer(const PeerFlags& o) {
  const char* kName = "peer";
  tcp::Endpoint listen;
  std::vector<tcp::Endpoint> addresses;
  std::string error;
  if (!tcp::ParseEndpoint(o.listen, listen, error).ok()) {
    std::fprintf(stderr, "edgesgd peer: --listen %s\n", error.c_str());
    return 2;
  }
  if (!tcp::ParseEndpointList(o.peers, addresses, error).ok()) {
    std::fprintf(stderr, "edgesgd peer: --peers %s\n", error.c_str());
    return 2;
  }
  AuthKeys keys;
  if (!LoadAuthKeys(o.network, o.id, kName, keys)) return 2;
  const std::size_t n = addresses.size();
  if (o.id < 1 || o.id > n) {
    std::fprintf(stderr,
                 "edgesgd peer: --id %u is not a position in --peers (1..%zu: the list holds "
                 "every peer's address in id order)\n",
                 o.id, n);
    return 2;
  }
  if (o.codec != "identity" || o.aggregate != "mean" || o.optimizer != "sgd") {
    std::fprintf(stderr,
                 "edgesgd peer: gossip exchanges dense models with plain SGD steps: drop "
                 "--codec, --aggregate and --optimizer\n");
    return 2;
  }
  if (const std::string why = CheckGossipConsistency(o); !why.empty()) {
    std::fprintf(stderr, "edgesgd peer: %s\n", why.c_str());
    return 2;
  }
  GossipPlan plan;
  if (!BuildGossipPlan(o, n, plan, error)) {
    std::fprintf(stderr, "edgesgd peer: %s\n", error.c_str());
    return 2;
  }
  if (!o.quiet) PrintGossipPlan("peer", o, plan);
  Task task;
  if (const int code = SetUpTask("peer", o, n, task); code != 0) return code;
  const protocol::GossipConfig config = BuildGossipConfig(o, task, plan, o.id);
  std::vector<float> initial(task.dimension());
  task.InitialModel(initial);
  ArenaBuffer arena(protocol::GossipPeerSession::ArenaBytes(config));
  protocol::GossipOptions gossip_options;
  gossip_options.gradient = &Task::GradientCallback;
  gossip_options.user = task.binding(o.id - 1);
  gossip_options.samples_per_step = static_cast<std::uint32_t>(task.samples_per_step(o.id - 1));
  gossip_options.initial_model = initial;
  protocol::GossipPeerSession session;
  if (const Status check = session.Init(arena.arena, config, gossip_options);
      !check.ok()) {
    std::fprintf(stderr, "edgesgd peer: %s\n", check.reason());
    return 2;
  }

  tcp::DriverOptions options =
      BaseDriverOptions(o.network, o.seed * 1000003u + o.id, kName, keys, o.id);
  options.listen = listen;
  options.max_peer_id = static_cast<protocol::PeerId>(n);
  options.max_frame_bytes = protocol::GossipPeerSession::MaxFrameBytes(config);
  options.idle_timeout_ns = Seconds(o.network.idle_timeout_s);
  for (const protocol::PeerId neighbour : config.mixing.neighbour_ids()) {
    options.dial.push_back({neighbour, addresses[neighbour - 1]});
  }
  tcp::SessionDriver driver;
  if (!OpenDriver(driver, options, o.network, kName)) return 1;

  MetricsWriter metrics;
  if (!o.metrics.empty() && !metrics.Open(o.metrics, error)) {
    std::fprintf(stderr, "edgesgd peer: %s\n", error.c_str());
    return 1;
  }
  ProgressLine progress(o.quiet, IsTerminal(), o.rounds);
  MetricsRow last;
  driver.SetAfterSessionCall([&] {
    protocol::GossipRoundEvent event;
    while (session.PollRoundEvent(event)) {
      MetricsRow row;
      row.round = event.round + 1;
      row.time_s = static_cast<double>(event.time_closed) * 1e-9;
      row.bytes_up = event.bytes_sent;
      row.bytes_down = event.bytes_received;
      row.bits_per_coord = 32.0;
      if (EvaluatesRound(o, row.round)) {
        EvaluateInto(task, session.model(), row);
        last = row;
      }
      metrics.Write(row);
      progress.Update(row);
    }
    protocol::GossipRejectEvent reject;
    while (session.PollRejectEvent(reject)) {
      progress.Note("peer %u rejected a frame from peer %u in round %u: %s", o.id, reject.peer,
                    reject.round + 1, protocol::GossipRejectReasonName(reject.reason));
    }
  });
  const tcp::DriverStop stop = driver.Run(session);
  progress.Finish();
  if (!metrics.Close(error)) {
    std::fprintf(stderr, "edgesgd peer: %s\n", error.c_str());
    return 1;
  }
  if (stop != tcp::DriverStop::kFinished || !session.Finished()) {
    char detail[64];
    std::snprintf(detail, sizeof(detail), " after %u of %u rounds", session.round(), o.rounds);
    const int code = ExitCodeFor(stop, kName, detail);
    return code == 0 ? 1 : code;
  }
  const protocol::GossipCounters& counters = session.counters();
  SummaryWriter summary;
  WriteGossipRunSummary(summary, o, n, task.dimension(), last);
  summary.Field("peer", o.id);
  summary.Begin("gossip");
  WriteGossipPlanFields(summary, o, plan);
  summary.Field("neighbours_missed", counters.neighbours_missed);
  summary.Field("deadline_closes", counters.deadline_closes);
  summary.Field("neighbours_lost", counters.neighbours_lost);
  summary.Field("rejected_frames", counters.total_rejected());
  summary.Field("auth_rejected", driver.counters().auth_rejected);
  summary.Field("tls_failures", driver.counters().tls_failures);
  summary.End();
  if ((!o.summary.empty() && !summary.Save(o.summary, error)) ||
      !SaveModel(o, session.model(), error)) {
    std::fprintf(stderr, "edgesgd peer: %s\n", error.c_str());
    return 1;
  }
  if (!o.quiet) {
    std::fprintf(stderr, "edgesgd peer %u: done: %u rounds in %.1f s; loss %.4f, accuracy %s\n",
                 o.id, o.rounds, last.time_s, last.loss, FormatAccuracy(last.accuracy).c_str());
  }
  return 0;
}

const char* const kDeadlineHelp =
    "Wall seconds a round waits for stragglers before closing with --quorum updates";

}  // namespace

void AddServerCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServerFlags>();
  CLI::App* command = app.add_subcommand(
      "server",
      "Parameter server over TCP: owns the run's configuration (sent to every worker in its "
      "Welcome), aggregates updates, checkpoints, writes metrics with wall-clock seconds.");
  command->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--listen", o->listen, "Address to accept workers on, HOST:PORT (port 0: any)")
      ->required();
  AddDataFlags(*command, *o);
  AddSeedFlag(*command, *o);
  AddTrainingFlags(*command, *o, kDeadlineHelp);
  command->add_option("--join-timeout-s", o->join_timeout_s,
                      "Start training this long after starting once --quorum workers joined "
                      "(0: wait for all --workers)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  command->add_option("--checkpoint", o->checkpoint,
                      "Write model, round and counters to FILE (atomically: temp file, fsync, "
                      "rename) before any frame of the next round is sent");
  command->add_option("--checkpoint-every", o->checkpoint_every,
                      "Checkpoint every K rounds (and at the end); K > 1 may lose up to K-1 "
                      "rounds on a crash")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000000u));
  command->add_flag("--resume", o->resume,
                    "Continue from --checkpoint (same flags); workers rejoin and get the model");
  AddNetworkFlags(*command, o->network);
  AddListenerFlags(*command, o->network);
  AddOutputFlags(*command, *o);
  command->callback([o, &exit_code] { exit_code = RunServer(*o); });
}

void AddWorkerCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<WorkerFlags>();
  CLI::App* command = app.add_subcommand(
      "worker",
      "Worker over TCP: connects to a server, takes the run's configuration from its Welcome, "
      "and trains on its shard of the data (give the server's data flags).");
  command->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--connect", o->connect, "The server's address, HOST:PORT")->required();
  command->add_option("--id", o->id, "This worker's id, 1..workers (its data shard)")
      ->required()
      ->check(CLI::Range(1u, protocol::kMaxWorkers));
  AddDataFlags(*command, *o);
  command->add_option("--slowdown", o->slowdown,
                      "Make every gradient computation take F times as long (a slower device)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  command->add_option("--heartbeat-s", o->heartbeat_s,
                      "Heartbeat interval while not sampled (keeps the server's idle and "
                      "liveness timers fed)")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  command->add_option("--join-retry-s", o->join_retry_s,
                      "Re-send Join this often until welcomed; every Join makes the server send "
                      "the full model again, so keep it above a model's transfer time")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  command->add_option("--give-up-s", o->give_up_s,
                      "Exit with an error after this long without a connection to the server")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e9));
  command->add_option("--memory-mb", o->memory_mb,
                      "Memory this device offers the run (advertised in its Join; the server "
                      "refuses a run that needs more)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{4095}));  // a Join states u32 bytes
  AddNetworkFlags(*command, o->network);
  command->add_flag("--quiet", o->quiet, "No summary line on stderr");
  command->callback([o, &exit_code] { exit_code = RunWorker(*o); });
}

void AddPeerCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PeerFlags>();
  CLI::App* command = app.add_subcommand(
      "peer",
      "Gossip peer over TCP: D-PSGD, gradient tracking or DeTAG (--gossip) with its neighbours "
      "on --topology; every peer takes the "
      "same flags and the same --peers list.");
  command->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("--id", o->id, "This peer's id: its position (1-based) in --peers")
      ->required()
      ->check(CLI::Range(1u, protocol::kMaxWorkers));
  command->add_option("--listen", o->listen, "Address to accept neighbours on, HOST:PORT")
      ->required();
  command->add_option("--peers", o->peers,
                      "Every peer's address in id order, HOST:PORT,HOST:PORT,... (the number of "
                      "peers is the list's length)")
      ->required();
  AddDataFlags(*command, *o);
  AddSeedFlag(*command, *o);
  AddTrainingFlags(*command, *o,
                   "Wall seconds a gossip round waits for its neighbours' models; a silent "
                   "neighbour's weight then moves onto this peer");
  AddGossipFlags(*command, *o);
  AddNetworkFlags(*command, o->network);
  AddListenerFlags(*command, o->network);
  AddOutputFlags(*command, *o);
  command->callback([o, &exit_code] { exit_code = RunPeer(*o); });
}

}  // namespace edgesgd::cli
