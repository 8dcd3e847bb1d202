#pragma once

#include <CLI/CLI.hpp>

namespace edgesgd::cli {

// Each subcommand registers its flags on the app and sets a callback that stores its exit code
// in `exit_code` (0 on success). Errors are reported on stderr as one line.
void AddBenchCommand(CLI::App& app, int& exit_code);
// `bench tcp`, registered by AddBenchCommand on its `bench` subcommand.
void AddBenchTcpCommand(CLI::App& bench, int& exit_code);
// `bench secagg` and `bench model`, likewise.
void AddBenchSecAggCommand(CLI::App& bench, int& exit_code);
void AddBenchModelCommand(CLI::App& bench, int& exit_code);
void AddTrainCommand(CLI::App& app, int& exit_code);
void AddSimulateCommand(CLI::App& app, int& exit_code);
// Over TCP (the tcp library: tcp::Server, tcp::Worker, tcp::Peer).
void AddServerCommand(CLI::App& app, int& exit_code);
void AddWorkerCommand(CLI::App& app, int& exit_code);
void AddPeerCommand(CLI::App& app, int& exit_code);
// `bridge`: a serial-line device's gateway to a server (tcp::SerialBridge).
void AddBridgeCommand(CLI::App& app, int& exit_code);
// `keygen`: a key file of fresh device keys for --keys.
void AddKeygenCommand(CLI::App& app, int& exit_code);
// `privacy-budget`: epsilon of a DP-FedAvg run, or the noise multiplier for a target epsilon.
void AddPrivacyBudgetCommand(CLI::App& app, int& exit_code);

}  // namespace edgesgd::cli
