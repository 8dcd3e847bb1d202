#include "runs.h"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "edgesgd/auth/key_ring.h"
#include "edgesgd/sim/simulation.h"
#include "edgesgd/tcp/asio.h"  // asio::io_context, configured as edgesgd needs it
#include "edgesgd/tcp/server.h"
#include "edgesgd/tcp/worker.h"
#include "training.h"

namespace custom_model {
namespace {

using edgesgd::Status;
using edgesgd::protocol::RoundEvent;
using edgesgd::protocol::RunConfig;
using edgesgd::tcp::DriverStop;

// Follows a run round by round, as the server closes them: prints the held-out accuracy four
// times and keeps the last round's byte counters (cumulative) for the report.
class Progress {
 public:
  Progress(const char* run, MlpShape shape, const Dataset& test, std::uint32_t rounds)
      : run_(run), evaluator_(shape), test_(test), every_(rounds < 4 ? 1 : rounds / 4) {}

  void operator()(const RoundEvent& round, std::span<const float> model) {
    last_ = round;
    if ((round.round + 1) % every_ == 0) {
      std::printf("%-9s round %4u: held-out accuracy %.3f\n", run_, round.round + 1,
                  Accuracy(evaluator_, model, test_));
    }
  }

  // Fills the report from the final model and the last round's counters.
  void Finish(std::span<const float> model, RunReport& report) {
    report.finished = true;
    report.accuracy = Accuracy(evaluator_, model, test_);
    report.bytes_up = last_.bytes_up;
    report.bytes_down = last_.bytes_down;
  }

 private:
  const char* run_;
  Mlp evaluator_;
  const Dataset& test_;
  std::uint32_t every_;
  RoundEvent last_;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

using DeviceKey = std::array<std::byte, edgesgd::auth::kKeyBytes>;

// A fresh random key per device. A deployment makes them once and gives each device its own and
// the server all of them (the edgesgd command reads them from a key file).
std::array<DeviceKey, kWorkers> RandomKeys() {
  std::random_device entropy;
  std::array<DeviceKey, kWorkers> keys;
  for (DeviceKey& key : keys) {
    for (std::byte& b : key) b = static_cast<std::byte>(entropy());
  }
  return keys;
}

edgesgd::HostResult<> AddKey(edgesgd::auth::KeyRing& ring, std::uint32_t id, const DeviceKey& key) {
  const Status status = ring.Add(id, key);
  if (!status.ok()) {
    return edgesgd::HostError(status).WithContext("the key of device " + std::to_string(id));
  }
  return {};
}

// What one worker device holds. The node is declared last: it points at the key and trainer.
struct WorkerDevice {
  WorkerDevice(asio::io_context& io, MlpShape shape, std::uint32_t device_id)
      : id(device_id), name("worker " + std::to_string(device_id)), trainer(shape), node(io) {}

  std::uint32_t id;
  std::string name;  // in its log lines
  edgesgd::auth::FixedKeyRing<1> key;
  ShardTrainer trainer;
  edgesgd::tcp::Worker node;
};

// Why a worker's node stopped before the run ended, or "" when it ended with the run.
std::string WorkerFailure(const WorkerDevice& device, DriverStop stop) {
  if (!device.node.status().ok()) return device.name + ": " + device.node.status().reason();
  if (!device.node.session().status().ok()) {
    return device.name + ": the server refused it: " + device.node.session().failure_reason();
  }
  if (stop != DriverStop::kFinished) {
    return device.name + " ended early: " + edgesgd::tcp::DriverStopName(stop);
  }
  return "";
}

}  // namespace

RunReport TrainInSimulator(const RunConfig& config, MlpShape shape,
                           std::span<const float> initial_model, const Dataset& train,
                           const Dataset& test) {
  const auto start = std::chrono::steady_clock::now();
  RunReport report;
  std::vector<ShardTrainer> trainers(kWorkers, ShardTrainer(shape));
  for (std::uint32_t w = 0; w < kWorkers; ++w) {
    trainers[w].SetShard(ShardOf(train, w, kWorkers), config.batch, config.feedback.local_steps);
  }

  edgesgd::sim::ServerSimulationSettings settings;
  settings.run = config;
  settings.server.workers = kWorkers;
  settings.server.quorum = kWorkers;  // every round waits for every worker
  settings.initial_model.assign(initial_model.begin(), initial_model.end());
  settings.workers.resize(kWorkers);  // default devices: unlimited links, instant compute
  // The simulator names the worker asking (0-based), where a tcp::Worker has one trainer each.
  settings.gradient = [&trainers](std::size_t worker, std::span<const float> point,
                                  std::uint32_t round, std::uint32_t local_step,
                                  std::span<float> gradient) {
    return trainers[worker].Gradient(point, round, local_step, gradient);
  };

  edgesgd::sim::ServerSimulation simulation;
  if (const edgesgd::HostResult<> init = simulation.Init(settings); !init.ok()) {
    report.failure = init.message();
    return report;
  }
  Progress progress("simulator", shape, test, config.rounds);
  simulation.OnRound([&progress](const RoundEvent& round, std::span<const float> model) {
    progress(round, model);
  });
  const edgesgd::sim::SimulationResult result = simulation.Run();
  report.seconds = SecondsSince(start);
  if (!result.finished) {
    report.failure = "the simulation stopped after " + std::to_string(result.rounds) + " rounds";
    return report;
  }
  progress.Finish(result.model, report);
  return report;
}

RunReport TrainOverTcp(const RunConfig& config, MlpShape shape,
                       std::span<const float> initial_model, const Dataset& train,
                       const Dataset& test) {
  const auto start = std::chrono::steady_clock::now();
  RunReport report;
  const std::array<DeviceKey, kWorkers> keys = RandomKeys();
  edgesgd::auth::FixedKeyRing<kWorkers> server_keys;
  for (std::uint32_t id = 1; id <= kWorkers; ++id) {
    if (const edgesgd::HostResult<> added = AddKey(server_keys, id, keys[id - 1]); !added.ok()) {
      report.failure = added.message();
      return report;
    }
  }

  asio::io_context io;  // one event loop runs the server and every worker
  edgesgd::tcp::Server server(io);
  edgesgd::tcp::ServerSettings server_settings;
  server_settings.run = config;  // sent to every worker in its Welcome
  server_settings.server.workers = kWorkers;
  server_settings.server.quorum = kWorkers;
  server_settings.initial_model.assign(initial_model.begin(), initial_model.end());
  server_settings.listen = {"127.0.0.1", 0};  // port 0: any free port (listen_port())
  server_settings.network.auth_keys = &server_keys;
  server_settings.network.log_name = "server";
  if (const edgesgd::HostResult<> opened = server.Open(server_settings); !opened.ok()) {
    report.failure = opened.message();
    return report;
  }
  Progress progress("tcp", shape, test, config.rounds);
  server.OnRound([&progress](const RoundEvent& round, std::span<const float> model) {
    progress(round, model);
  });

  std::vector<std::unique_ptr<WorkerDevice>> devices;
  for (std::uint32_t id = 1; id <= kWorkers; ++id) {
    WorkerDevice& device = *devices.emplace_back(std::make_unique<WorkerDevice>(io, shape, id));
    if (const edgesgd::HostResult<> added = AddKey(device.key, id, keys[id - 1]); !added.ok()) {
      report.failure = added.message();
      return report;
    }
    edgesgd::tcp::WorkerSettings settings;
    settings.server = {"127.0.0.1", server.listen_port()};
    settings.worker.device_id = id;
    settings.worker.gradient = &ShardTrainer::GradientFunction;
    settings.worker.user = &device.trainer;
    settings.memory_bytes = std::size_t{1} << 20;  // what this device offers the run
    // The worker learns the run here, before its first gradient: check that the server trains
    // this model, then take the shard of this id among the workers it announces.
    settings.on_welcome = [&device, &train, &config](const RunConfig& run, std::uint32_t workers) {
      if (run.layout != config.layout) {
        return Status::InvalidArgument("the server trains a different model");
      }
      device.trainer.SetShard(ShardOf(train, device.id - 1, workers), run.batch,
                              run.feedback.local_steps);
      return Status::Ok();
    };
    settings.network.auth_keys = &device.key;
    settings.network.log_name = device.name.c_str();
    settings.network.give_up_ns = 10'000'000'000;  // stop when the server is unreachable for 10 s
    if (const edgesgd::HostResult<> opened = device.node.Open(settings); !opened.ok()) {
      report.failure = opened.message();
      return report;
    }
  }

  // One process runs every node, so the first one to end early ends them all (the server would
  // wait for a missing worker, and workers would redial a server that is gone); its reason is
  // the run's failure.
  const auto fail = [&report, &server, &devices](std::string failure) {
    if (!report.failure.empty()) return;
    report.failure = std::move(failure);
    server.Stop();
    for (const std::unique_ptr<WorkerDevice>& device : devices) device->node.Stop();
  };
  server.Start([&server, &fail](DriverStop stop) {
    if (stop == DriverStop::kFinished) return;
    std::string failure =
        std::string("the server ended early: ") + edgesgd::tcp::DriverStopName(stop);
    if (!server.status().ok()) failure += ", " + server.status().message();
    fail(std::move(failure));
  });
  for (const std::unique_ptr<WorkerDevice>& device : devices) {
    device->node.Start([&device = *device, &fail](DriverStop stop) {
      if (std::string failure = WorkerFailure(device, stop); !failure.empty()) {
        fail(std::move(failure));
      }
    });
  }
  io.run();  // returns once the server and every worker are done
  report.seconds = SecondsSince(start);

  if (!report.failure.empty()) return report;
  const edgesgd::protocol::ServerSession& session = server.session();
  if (!session.status().ok()) {
    report.failure = std::string("the run failed: ") + session.status().reason();
    return report;
  }
  progress.Finish(session.model(), report);
  return report;
}

}  // namespace custom_model
