#include "cli/feature_flags.h"

#include <utility>

#include "cli/codec_flags.h"
#include "cli/config_file.h"
#include "cli/flag_error.h"

namespace edgesgd::cli {

void FeatureFlags::Add(CLI::App& command, std::span<const protocol::FeatureFields* const> tables) {
  const protocol::RunConfig defaults;
  for (const protocol::FeatureFields* table : tables) {
    for (const protocol::FeatureField& field : table->fields) {
      std::string help(field.help);
      if (field.kind == ParamKind::kChoice) {
        help += ". One of:";
        for (const std::string_view choice : field.choices) {
          help += ' ';
          help += choice;
        }
      }
      Flag& flag = flags_.emplace_back();
      flag.feature = table->feature;
      flag.field = &field;
      flag.option = command.add_option(FlagOf(field.name), flag.value, help)
                        ->default_str(FormatWord(field.kind, field.choices, field.get(defaults)));
    }
  }
}

HostResult<> FeatureFlags::Apply(protocol::RunConfig& config, bool strict) const {
  for (const Flag& flag : flags_) {
    if (flag.option->count() == 0) continue;
    const protocol::FeatureField& field = *flag.field;
    const CodecFieldValue described{field.name, field.kind, field.choices};
    HostResult<std::uint32_t> word = ParseWord(described, flag.value);
    if (!word.ok()) return std::move(word).error();
    field.set(config, *word);
  }
  if (!strict) return {};
  for (const Flag& flag : flags_) {
    const std::string name = FlagOf(flag.field->name);
    if (flag.option->count() == 0 || !GivenOnCommandLine(name)) continue;
    const char* unused =
        flag.field->unused_because != nullptr ? flag.field->unused_because(config) : nullptr;
    if (unused != nullptr) return FlagError(name + " does not apply: " + unused);
  }
  return {};
}

bool FeatureFlags::AnyGiven(const protocol::RunFeature& feature) const {
  for (const Flag& flag : flags_) {
    if (flag.feature == &feature && flag.option->count() > 0) return true;
  }
  return false;
}

}  // namespace edgesgd::cli
