#include "cli/parse_errors.h"

#include <cctype>
#include <functional>
#include <vector>

#include "cli/config_file.h"
#include "cli/suggest.h"

namespace edgesgd::cli {
namespace {

// The program, then each command given below it: {edgesgd, bench, secagg}.
std::vector<const CLI::App*> CommandsGiven(const CLI::App& app) {
  std::vector<const CLI::App*> commands = {&app};
  for (std::vector<CLI::App*> chosen = app.get_subcommands(); !chosen.empty();
       chosen = chosen.front()->get_subcommands()) {
    commands.push_back(chosen.front());
  }
  return commands;
}

// "edgesgd bench secagg".
std::string CommandLine(const CLI::App& command) {
  const CLI::App* parent = command.get_parent();
  return parent == nullptr ? command.get_name() : CommandLine(*parent) + " " + command.get_name();
}

// How an error names a command: 'bench secagg', or 'edgesgd' for the program itself.
std::string Named(const CLI::App& command) {
  const std::string line = CommandLine(command);
  return "'" + line.substr(command.get_parent() == nullptr ? 0 : line.find(' ') + 1) + "'";
}

// The long names of `command`'s flags, without their dashes.
std::vector<std::string> FlagNames(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    names.insert(names.end(), option->get_lnames().begin(), option->get_lnames().end());
  }
  return names;
}

// "; did you mean --k-ratio?" for the names of `known` nearest to `typed`, each written as `spell`
// writes it, or nothing when none is near.
std::string DidYouMean(const std::string& typed, const std::vector<std::string>& known,
                       const std::function<std::string(std::string)>& spell) {
  std::vector<std::string> nearest = NearestNames(typed, known);
  if (nearest.empty()) return "";
  for (std::string& name : nearest) name = spell(name);
  return "; did you mean " + JoinAlternatives(nearest) + "?";
}

std::string AsFlag(std::string name) { return "--" + name; }

std::string AsKey(std::string name) {
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return "'" + name + "'";
}

std::string AsCommand(std::string name) { return "'" + name + "'"; }

std::string FlagsHint(const CLI::App& command) {
  return " (run " + CommandLine(command) + " --help for its flags)";
}

// The message for `argument` ("--k-ration", "--k-ration=0.1"), which is no flag of `command`;
// for one a config file gave, it names the key and its line there.
std::string UnknownFlag(const CLI::App& command, const std::string& argument) {
  const std::string flag = argument.substr(0, argument.find('='));
  const std::size_t name_begins = flag.find_first_not_of('-');
  if (name_begins == std::string::npos) return "";  // dashes alone: CLI11's message says it
  const std::string name = flag.substr(name_begins);
  const std::vector<std::string> known = FlagNames(command);
  if (const ConfigOrigin* origin = ConfigFileOrigin(flag)) {
    return origin->where() + ": unknown key '" + origin->key + "' for " + Named(command) +
           DidYouMean(name, known, AsKey) + FlagsHint(command);
  }
  return "unknown flag " + flag + " for " + Named(command) + DidYouMean(name, known, AsFlag) +
         FlagsHint(command);
}

// The message for `argument`, which is no command of `command`; empty when `command` has none
// (the argument is then one it does not take, as CLI11 says).
std::string UnknownCommand(const CLI::App& command, const std::string& argument) {
  std::vector<std::string> known;
  // Option groups are subcommands without a name.
  for (const CLI::App* sub :
       command.get_subcommands([](const CLI::App* sub) { return !sub->get_name().empty(); })) {
    known.push_back(sub->get_name());
  }
  if (known.empty()) return "";
  std::string message = "unknown command '" + argument + "'";
  if (command.get_parent() != nullptr) message += " for " + Named(command);
  return message + DidYouMean(argument, known, AsCommand) + " (run " + CommandLine(command) +
         " --help for its commands)";
}

// Whether `message` names `flag` itself, not a longer flag it begins ("--data" in "--data-dir").
bool Names(const std::string& message, const std::string& flag) {
  for (std::size_t at = message.find(flag); at != std::string::npos;
       at = message.find(flag, at + 1)) {
    const std::size_t end = at + flag.size();
    if (end == message.size()) return true;
    const unsigned char next = static_cast<unsigned char>(message[end]);
    if (!std::isalnum(next) && next != '-' && next != '_') return true;
  }
  return false;
}

// CLI11 refused a value (its messages name the flag): the config file line that gave it, if a
// file did.
std::string RefusedConfigValue(const std::vector<const CLI::App*>& commands,
                               const CLI::ParseError& error) {
  for (const CLI::App* command : commands) {
    for (const std::string& name : FlagNames(*command)) {
      const std::string prefix = ConfigLinePrefix(AsFlag(name));
      if (!prefix.empty() && Names(error.what(), AsFlag(name))) {
        return prefix + error.what() + FlagsHint(*command);
      }
    }
  }
  return "";
}

}  // namespace

std::string ExplainParseError(const CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return "";
  const std::vector<const CLI::App*> commands = CommandsGiven(app);
  for (const CLI::App* command : commands) {
    const std::vector<std::string> unplaced = command->remaining();
    if (unplaced.empty()) continue;
    // The first argument CLI11 could not place is what it stumbled on; the rest may be its value.
    const std::string& first = unplaced.front();
    if (first.starts_with('-')) return UnknownFlag(*command, first);
    return UnknownCommand(*command, first);
  }
  return RefusedConfigValue(commands, error);
}

}  // namespace edgesgd::cli
