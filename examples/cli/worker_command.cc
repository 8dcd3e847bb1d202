// `edgesgd worker`: a worker over TCP, a tcp::Worker fed by the flags' task. The server owns the
// run: its Welcome says how many workers there are and with which seed and batch, so the
// worker's shard of the data is built only then, from the data flags.

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/run_flags.h"
#include "cli/signing_keys.h"
#include "cli/task.h"
#include "cli/tcp_flags.h"
#include "edgesgd/tcp/worker.h"

namespace edgesgd::cli {
namespace {

constexpr const char* kWorker = "worker";

// The worker's gradient oracle: its shard of the flags' task, built on the Welcome (the process
// keeps that shard's samples alone); data flags that do not fit the server's model refuse the
// run there.
struct WorkerTask {
  const WorkerFlags* flags = nullptr;
  Task task;
  HostResult<> refusal;  // why the run was refused

  static Status Gradient(void* user, std::span<const float> point, std::uint32_t round,
                         std::uint32_t local_step, std::span<float> gradient) {
    auto& self = *static_cast<WorkerTask*>(user);
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

  Status Setup(const protocol::RunConfig& config, std::uint32_t workers) {
    HostResult<TaskOptions> options = BuildTaskOptions(*flags, workers, config.seed, config.batch);
    if (options.ok()) {
      // Only this worker's rows of the data are kept (an id beyond the run's workers is refused
      // below, with the run's shape).
      if (flags->id <= workers) options->own_worker = flags->id - 1;
      refusal = task.Setup(*options);
    } else {
      refusal = std::move(options).error();
    }
    if (!refusal.ok()) return Status::FailedPrecondition("the data flags do not build a task");
    if (task.dimension() != config.layout.dimension() || flags->id > workers) {
      const Status status =
          Status::FailedPrecondition("the data flags do not fit the server's run");
      refusal = HostError(
          status, "the server's model has " + std::to_string(config.layout.dimension()) +
                      " parameters and " + std::to_string(workers) +
                      " workers, but these data flags give " + std::to_string(task.dimension()) +
                      " parameters for worker " + std::to_string(flags->id) +
                      ": pass the server's --task/--data/--dim/--hidden/--model");
      return status;
    }
    return Status::Ok();
  }
};

int RunWorker(const WorkerFlags& o) {
  tcp::WorkerSettings settings;
  const bool on_serial = HasSerialLine(o.serial);
  AuthKeys keys;
  if (on_serial) {
    const HostResult<tcp::SerialLine> line = SerialLineOf(o.serial);
    if (!line.ok()) return Fail(kWorker, line.message(), 2);
    settings.serial = *line;
    settings.serial_max_frame_bytes = MaxFrameBytesOf(o.serial);
    settings.serial_link = LinkOptionsOf(o.serial);
  } else {
    if (o.connect.empty()) {
      return Fail(kWorker,
                  "no server: give --connect HOST:PORT, or a serial line to a gateway (--serial, "
                  "--connect-serial or --listen-serial)",
                  2);
    }
    HostResult<tcp::Endpoint> server = tcp::ParseEndpoint(o.connect);
    if (!server.ok()) return Fail(kWorker, "--connect " + server.message(), 2);
    settings.server = *server;
  }
  // On a serial line too: the line is authenticated with this device's key, as a TCP connection
  // would be, and the bridge at its other end holds the same key file.
  if (const HostResult<> loaded = LoadAuthKeys(o.network, o.id, KeysKept::kOwnDevice, keys);
      !loaded.ok()) {
    return Fail(kWorker, loaded.message(), 2);
  }
  WorkerTask oracle{&o, {}, {}};
  settings.worker.device_id = o.id;
  settings.worker.gradient = &WorkerTask::Gradient;
  settings.worker.user = &oracle;
  settings.worker.join_retry_ns = Seconds(o.join_retry_s);
  settings.worker.heartbeat_interval_ns = Seconds(o.heartbeat_s);
  settings.worker.secure_minimum_neighbours = o.secagg_min_neighbours;
  SecureSigning signing;
  if (!o.secagg_signing_key.empty()) {
    if (const HostResult<> loaded = LoadWorkerSigning(o.secagg_signing_key,
                                                      o.secagg_verifying_keys, o.id, signing);
        !loaded.ok()) {
      return Fail(kWorker, loaded.message(), 2);
    }
    settings.worker.secure_signing = signing.device();
  }
  settings.memory_bytes = o.memory_mb << 20;
  settings.on_welcome = [&oracle](const protocol::RunConfig& config, std::uint32_t workers) {
    return oracle.Setup(config, workers);
  };
  settings.network = NetworkOptions(o.network, o.id, kWorker, keys);
  settings.network.give_up_ns = Seconds(o.give_up_s);
  tcp::Worker worker;
  if (const HostResult<> opened = worker.Open(settings); !opened.ok()) {
    // The session refused the flags (2), or the network is not usable (1).
    return Fail(kWorker, opened.message(),
                worker.session().phase() == protocol::WorkerPhase::kUninitialized ? 2 : 1);
  }
  WarnIfUnauthenticated(o.network, kWorker);
  const tcp::DriverStop stop = worker.Run();
  // on_welcome refused the run.
  if (!oracle.refusal.ok()) return Fail(kWorker, oracle.refusal.message(), 1);
  const protocol::WorkerSession& session = worker.session();
  if (!session.status().ok()) {
    return Fail(kWorker, std::string("the server refused this worker: ") + session.failure_reason(),
                1);
  }
  if (stop != tcp::DriverStop::kFinished) {
    char detail[96];
    std::snprintf(detail, sizeof(detail), " to %s for %.0f s",
                  on_serial ? "the serial line" : o.connect.c_str(), o.give_up_s);
    return ExitCodeFor(stop, kWorker, stop == tcp::DriverStop::kGaveUp ? detail : "");
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

}  // namespace

void AddWorkerCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<WorkerFlags>();
  CLI::App* command = app.add_subcommand(
      "worker",
      "Worker: connects to a server over TCP (or through `edgesgd bridge` on a serial line), "
      "takes the run's configuration from its Welcome, and trains on its shard of the data "
      "(give the server's data flags).");
  AddWorkerFlags(*command, *o);
  command->callback([o, &exit_code] { exit_code = RunWorker(*o); });
}

}  // namespace edgesgd::cli
