// The `edgesgd` command: one binary with a subcommand per role (docs/cli.md describes each).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/parse_errors.h"

int main(int argc, char** argv) {
  CLI::App app{
      "edgesgd: communication-efficient distributed SGD for edge devices.\n"
      "Compressors with error feedback, parameter-server and gossip training.",
      "edgesgd"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "edgesgd 0.1.0");
  // One line per error, as every edgesgd failure is reported.
  app.failure_message([](const CLI::App*, const CLI::Error& error) {
    return std::string("edgesgd: ") + error.what() + " (run with --help for usage)\n";
  });
  int exit_code = 0;
  edgesgd::cli::AddBenchCommand(app, exit_code);
  edgesgd::cli::AddTrainCommand(app, exit_code);
  edgesgd::cli::AddSimulateCommand(app, exit_code);
  edgesgd::cli::AddServerCommand(app, exit_code);
  edgesgd::cli::AddWorkerCommand(app, exit_code);
  edgesgd::cli::AddPeerCommand(app, exit_code);
  edgesgd::cli::AddBridgeCommand(app, exit_code);
  edgesgd::cli::AddKeygenCommand(app, exit_code);
  edgesgd::cli::AddPrivacyBudgetCommand(app, exit_code);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (const edgesgd::HostResult<> expanded = edgesgd::cli::ExpandConfigFiles(args);
      !expanded.ok()) {
    std::fprintf(stderr, "edgesgd: %s\n", expanded.message().c_str());
    return 2;
  }
  // CLI11 parses a reversed vector (it pops arguments from the back).
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& error) {
    // Help and version requests exit 0; usage errors exit 2, like other command-line tools.
    if (const std::string explained = edgesgd::cli::ExplainParseError(app, error);
        !explained.empty()) {
      std::fprintf(stderr, "edgesgd: %s\n", explained.c_str());
      return 2;
    }
    return app.exit(error) == 0 ? 0 : 2;
  }
  return exit_code;
}
