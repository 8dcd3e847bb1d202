#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>

namespace edgesgd::cli {

// An option whose value must lie in [min, max]; its default shows in --help.
template <typename T, typename Bound>
CLI::Option* AddBoundedOption(CLI::App& command, std::string name, T& value, Bound min, Bound max,
                              std::string description) {
  return command.add_option(std::move(name), value, std::move(description))
      ->capture_default_str()
      ->check(CLI::Range(min, max));
}

// A duration in seconds, from a millisecond to `max`; its default shows in --help.
inline CLI::Option* AddSecondsOption(CLI::App& command, std::string name, double& seconds,
                                     std::string description, double max = 1e6) {
  return AddBoundedOption(command, std::move(name), seconds, 1e-3, max, std::move(description));
}

}  // namespace edgesgd::cli
