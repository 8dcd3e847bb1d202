#pragma once

// The example's two runs of one configuration: in edgesgd's simulator, and as a TCP server with
// workers on loopback. Both start from the same model, train on the same shards and report the
// same figures.

#include <cstdint>
#include <span>
#include <string>

#include "csv_data.h"
#include "edgesgd/protocol/run_config.h"
#include "model.h"

namespace custom_model {

inline constexpr std::uint32_t kWorkers = 4;

// The outcome of one run.
struct RunReport {
  bool finished = false;
  std::string failure;           // why not, when !finished
  double accuracy = 0;           // of the final model on the held-out rows
  std::uint64_t bytes_up = 0;    // frames from the workers, as the server counted them
  std::uint64_t bytes_down = 0;  // frames from the server
  double seconds = 0;            // wall clock
};

// The server and kWorkers workers in virtual time (sim::ServerSimulation), with unlimited
// links. Worker w trains on shard w of `train`.
RunReport TrainInSimulator(const edgesgd::protocol::RunConfig& config, MlpShape shape,
                           std::span<const float> initial_model, const Dataset& train,
                           const Dataset& test);

// A tcp::Server and kWorkers tcp::Workers on one event loop, over loopback with authenticated
// frames (a fresh random key per device). Worker `id` (1..kWorkers) takes its shard when the
// server's Welcome says how many workers share the rows.
RunReport TrainOverTcp(const edgesgd::protocol::RunConfig& config, MlpShape shape,
                       std::span<const float> initial_model, const Dataset& train,
                       const Dataset& test);

}  // namespace custom_model
