#include "cli/config_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "cli/flag_error.h"

namespace edgesgd::cli {
namespace {

std::string Trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

// Drops a trailing comment outside quotes.
std::string StripComment(const std::string& line) {
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quoted = !quoted;
    if (line[i] == '#' && !quoted) return line.substr(0, i);
  }
  return line;
}

// The flags the --config files of the last command line gave, with where (one run per process).
std::map<std::string, ConfigOrigin>& ConfigFileFlags() {
  static std::map<std::string, ConfigOrigin> flags;
  return flags;
}

HostResult<> ReadConfig(const std::string& path, std::vector<std::string>& flags) {
  std::ifstream file(path);
  if (!file) {
    return FlagError("cannot read config file " + path + ": " + std::strerror(errno));
  }
  std::string line;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    const std::string content = Trim(StripComment(line));
    if (content.empty()) continue;
    const auto where = [&] { return ConfigOrigin{path, number, ""}.where(); };
    if (content.front() == '[') {
      return FlagError(where() +
                       ": tables are not supported; write top-level `flag = value` lines");
    }
    const auto equals = content.find('=');
    if (equals == std::string::npos) {
      return FlagError(where() + ": expected `flag = value`");
    }
    const std::string key = Trim(content.substr(0, equals));
    std::string value = Trim(content.substr(equals + 1));
    if (key.empty() || key.find_first_of(" \t\"") != std::string::npos) {
      return FlagError(where() + ": invalid flag name '" + key + "'");
    }
    std::string flag = "--" + key;
    for (char& c : flag) {
      if (c == '_') c = '-';  // TOML style keys map onto --dashed-flags
    }
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    } else if (value.empty() || value.front() == '"') {
      return FlagError(where() + ": value of '" + key + "' is missing or has an unclosed quote");
    }
    if (value == "false") continue;
    flags.push_back(flag);
    if (value != "true") flags.push_back(value);
    ConfigFileFlags()[flag] = {path, number, key};
  }
  return {};
}

// The flags of the last command line ExpandConfigFiles saw (one per process).
std::set<std::string>& CommandLineFlags() {
  static std::set<std::string> flags;
  return flags;
}

}  // namespace

std::string ConfigOrigin::where() const {
  return "config file " + path + " line " + std::to_string(line);
}

bool GivenOnCommandLine(const std::string& flag) { return CommandLineFlags().count(flag) > 0; }

const ConfigOrigin* ConfigFileOrigin(const std::string& flag) {
  const auto found = ConfigFileFlags().find(flag);
  if (found == ConfigFileFlags().end() || GivenOnCommandLine(flag)) return nullptr;
  return &found->second;
}

std::string ConfigLinePrefix(const std::string& flag) {
  const ConfigOrigin* origin = ConfigFileOrigin(flag);
  return origin == nullptr ? "" : origin->where() + ", key '" + origin->key + "': ";
}

HostResult<> ExpandConfigFiles(std::vector<std::string>& args) {
  std::size_t insert_at = 0;
  while (insert_at < args.size() && !args[insert_at].empty() && args[insert_at][0] != '-') {
    ++insert_at;
  }
  std::vector<std::string> from_files;
  std::vector<std::string> rest;
  for (std::size_t i = insert_at; i < args.size(); ++i) {
    std::string path;
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) {
        return FlagError("--config needs a file name");
      }
      path = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
    } else {
      if (args[i].rfind("--", 0) == 0) CommandLineFlags().insert(args[i].substr(0, args[i].find('=')));
      rest.push_back(args[i]);
      continue;
    }
    EDGESGD_HOST_TRY(ReadConfig(path, from_files));
  }
  args.resize(insert_at);
  args.insert(args.end(), from_files.begin(), from_files.end());
  args.insert(args.end(), rest.begin(), rest.end());
  return {};
}

void AddConfigFlag(CLI::App& command) {
  command.add_option("--config",
                     "Read flags from a TOML file of `flag = value` lines; flags on the command "
                     "line override it");
  command.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

}  // namespace edgesgd::cli
