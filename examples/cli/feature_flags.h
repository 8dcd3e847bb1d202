#pragma once

// The flags of the run features' parameters, made from the features' field tables
// (FeatureFieldTables in run_feature.h), as CodecFlags makes the codecs' flags: one flag per
// field, with the field's help text, its choices and the RunConfig's default, and the same TOML
// key in a --config file. A flag given while the run's other settings leave its field unread is
// an error with the field's reason. Adding a feature's parameter adds its flag here without a
// line of CLI code.

#include <CLI/CLI.hpp>
#include <deque>
#include <span>
#include <string>

#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/run_feature.h"

namespace edgesgd::cli {

class FeatureFlags {
 public:
  // Registers the flags of every field of `tables` on `command`. The object must outlive the
  // parse.
  void Add(CLI::App& command, std::span<const protocol::FeatureFields* const> tables);

  // Writes every given flag's value into its field of `config`. Then, with `strict`, refuses a
  // flag given on the command line whose field `config` leaves unread. Errors: a one-line
  // message naming the flag (a value that is not of the field's kind, or the reason it is
  // unread).
  HostResult<> Apply(protocol::RunConfig& config, bool strict = true) const;

  // Whether any flag of `feature`'s fields was given.
  bool AnyGiven(const protocol::RunFeature& feature) const;

 private:
  struct Flag {
    const protocol::RunFeature* feature = nullptr;
    const protocol::FeatureField* field = nullptr;
    std::string value;
    CLI::Option* option = nullptr;
  };
  std::deque<Flag> flags_;  // CLI11 keeps references to the values: no reallocation
};

}  // namespace edgesgd::cli
