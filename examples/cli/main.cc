// The `edgesgd` command: one binary with a subcommand per role (see DESIGN.md for the contract).

#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "edgesgd: communication-efficient distributed SGD for edge devices.\n"
      "Compressors with error feedback, parameter-server and gossip training.",
      "edgesgd"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "edgesgd 0.1.0");
  int exit_code = 0;
  edgesgd::cli::AddBenchCommand(app, exit_code);
  edgesgd::cli::AddTrainCommand(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return exit_code;
}
