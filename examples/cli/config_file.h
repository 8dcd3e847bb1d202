#pragma once

// `--config FILE.toml` for subcommands: a TOML file of top-level `flag = value` lines (strings
// in quotes, numbers, true/false, # comments) is expanded into the flags it stands for, placed
// before the command line's own flags so that those override it.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

// Replaces every `--config FILE` / `--config=FILE` in `args` (the arguments after the program
// name) by the flags the file holds, inserted right after the subcommand path (the leading
// arguments that do not start with '-'). Errors: a one-line message naming the file and line.
HostResult<> ExpandConfigFiles(std::vector<std::string>& args);

// Lists --config in `command`'s --help (ExpandConfigFiles consumes it before parsing) and lets a
// flag given both in the file and on the command line take the command line's value. Call
// before adding the command's other flags.
void AddConfigFlag(CLI::App& command);

// Whether `flag` ("--k-ratio") was written on the command line itself rather than read from a
// --config file, as ExpandConfigFiles saw it (it records every flag it keeps).
bool GivenOnCommandLine(const std::string& flag);

// Where a --config file gave a flag: the file as the command line named it, the line (from 1)
// and the key as written there ("k_ratio").
struct ConfigOrigin {
  std::string path;
  int line = 0;
  std::string key;

  // "config file PATH line N", as every report of a line of a config file begins.
  std::string where() const;
};

// The line of a --config file that ExpandConfigFiles read `flag` ("--k-ratio") from, so that a
// flag the parser refuses can be reported where the user wrote it; nullptr when no file gave the
// flag, or the command line gave it too (the run then takes the command line's value).
const ConfigOrigin* ConfigFileOrigin(const std::string& flag);

// "config file PATH line N, key 'k_ratio': " when ConfigFileOrigin(flag) has the line, else
// empty: the start of a message refusing the flag's value, which the user wrote in that file.
std::string ConfigLinePrefix(const std::string& flag);

}  // namespace edgesgd::cli
