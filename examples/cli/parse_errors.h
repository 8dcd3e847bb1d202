#pragma once

// Parse failures reported in terms the user can act on. CLI11 says "The following arguments
// were not expected" for a mistyped flag and "A subcommand is required" for a mistyped command,
// and nothing of a --config file: these name the unknown flag or command with the nearest known
// ones, and the file and line a refused flag came from.

#include <CLI/CLI.hpp>
#include <string>

namespace edgesgd::cli {

// One line (without "edgesgd: " and the newline) for `error`, thrown by `app.parse`: an unknown
// flag, command or config-file key with the names it may be a typo of, or a value CLI11 refused
// for a flag a --config file gave, with the file and line. Empty when CLI11's own message is the
// one to print: help and version requests, and other errors.
std::string ExplainParseError(const CLI::App& app, const CLI::ParseError& error);

}  // namespace edgesgd::cli
