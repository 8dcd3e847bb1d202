#include "cli/codec_flags.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cli/config_file.h"
#include "cli/flag_error.h"

namespace edgesgd::cli {

std::string FormatWord(ParamKind kind, std::span<const std::string_view> choices,
                       std::uint32_t word) {
  char text[32];
  switch (kind) {
    case ParamKind::kReal:
      std::snprintf(text, sizeof(text), "%g", static_cast<double>(std::bit_cast<float>(word)));
      return text;
    case ParamKind::kBitWidth:
      std::snprintf(text, sizeof(text), "%u", std::bit_width(word) + 1);  // levels 2^(b-1) - 1
      return text;
    case ParamKind::kChoice:
      return word < choices.size() ? std::string(choices[word]) : std::to_string(word);
    case ParamKind::kInteger:
      break;
  }
  return std::to_string(word);
}

HostResult<std::uint32_t> ParseWord(const CodecFieldValue& field, const std::string& text) {
  const std::string flag = FlagOf(field.name);
  // A value from a --config file is reported at its line there.
  const std::string where = ConfigLinePrefix(flag);
  char* end = nullptr;
  switch (field.kind) {
    case ParamKind::kReal: {
      const double value = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(value)) {
        return FlagError(where + flag + " expects a finite number, got '" + text + "'");
      }
      return std::bit_cast<std::uint32_t>(static_cast<float>(value));
    }
    case ParamKind::kInteger:
    case ParamKind::kBitWidth: {
      const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
      const unsigned long long limit = field.kind == ParamKind::kBitWidth ? 32 : 0xFFFFFFFFull;
      if (text.empty() || text[0] == '-' || *end != '\0' || value > limit) {
        return FlagError(where + flag + " expects a whole number up to " + std::to_string(limit) +
                         ", got '" + text + "'");
      }
      return field.kind == ParamKind::kBitWidth && value > 0
                 ? static_cast<std::uint32_t>((std::uint64_t{1} << (value - 1)) - 1)
                 : static_cast<std::uint32_t>(value);
    }
    case ParamKind::kChoice:
      for (std::size_t i = 0; i < field.choices.size(); ++i) {
        if (field.choices[i] == text) return static_cast<std::uint32_t>(i);
      }
      std::string message = where + flag + " must be one of";
      for (const std::string_view choice : field.choices) message += " " + std::string(choice);
      return FlagError(message + ", got '" + text + "'");
  }
  return HostError(Status::Internal());
}

std::string FlagOf(std::string_view name) {
  std::string flag = "--" + std::string(name);
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

const CodecFlags::Flag* CodecFlags::Find(std::string_view name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

void CodecFlags::Add(CLI::App& command, const std::string& default_codec,
                     const std::string& codec_help) {
  codec_ = default_codec;
  std::vector<std::string> names;
  std::string help = codec_help;
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    names.emplace_back(Codec::kName);
    help += "\n  " + std::string(Codec::kName) + ": " + std::string(Codec::kSummary);
  });
  command.add_option("--codec", codec_, help)->capture_default_str()->check(CLI::IsMember(names));
  AddParameters(command);
}

void CodecFlags::AddParameters(CLI::App& command) {
  // One flag per parameter name, in registry order; its help names every codec that reads it.
  struct Entry {
    std::string name;
    ParamKind kind;
    std::string help;
    std::string codecs;
    std::string default_text;
  };
  std::vector<Entry> entries;
  ForEachCodec([&](auto codec) {
    using Codec = typename decltype(codec)::type;
    ForEachParamField(CodecParams(typename Codec::Params{}), [&](const CodecFieldValue& field) {
      for (Entry& entry : entries) {
        if (entry.name == field.name) {
          entry.codecs += ", " + std::string(Codec::kName);
          return;
        }
      }
      std::string field_help;
      for (const ParamField<typename Codec::Params>& declared : Codec::kFields) {
        if (declared.name == field.name) field_help = std::string(declared.help);
      }
      entries.push_back({std::string(field.name), field.kind, field_help,
                         std::string(Codec::kName),
                         FormatWord(field.kind, field.choices, field.word)});
    });
  });
  for (const Entry& entry : entries) {
    Flag& flag = flags_.emplace_back();
    flag.name = entry.name;
    flag.kind = entry.kind;
    flag.codecs = entry.codecs;
    flag.option = command.add_option(FlagOf(entry.name), flag.value,
                                     entry.codecs + ": " + entry.help)
                      ->default_str(entry.default_text);
  }
}

HostResult<CodecParams> CodecFlags::ParamsFor(std::string_view name, bool strict) const {
  const Result<CodecParams> defaults = DefaultCodecParams(name);
  if (!defaults.ok()) return FlagError("--codec " + std::string(name) + " is not a codec");
  // Fields in descriptor order, so a field's applicability (unused_because) is judged with the
  // settings before it (the schedule comes before the dq parameters it enables).
  std::vector<std::uint32_t> default_words;
  ForEachParamField(defaults.value(), [&default_words](const CodecFieldValue& field) {
    default_words.push_back(field.word);
  });
  std::vector<std::uint32_t> words = default_words;
  HostResult<> parsed;
  std::size_t index = 0;
  ForEachParamField(defaults.value(), [&](const CodecFieldValue& field) {
    const Flag* flag = Find(field.name);
    if (parsed.ok() && flag != nullptr && flag->option->count() > 0) {
      HostResult<std::uint32_t> word = ParseWord(field, flag->value);
      if (word.ok()) {
        words[index] = *word;
      } else {
        parsed = std::move(word).error();
      }
    }
    ++index;
  });
  if (!parsed.ok()) return std::move(parsed).error();
  const Result<CodecParams> params = ParamsFromWords(CodecIdOf(defaults.value()), words);
  if (!params.ok()) {
    std::string message = "--codec " + std::string(name) + ": " + params.status().reason();
    // Name the flag: the first one that, applied after those before it, makes the
    // parameters invalid.
    std::vector<std::uint32_t> applied = default_words;
    bool named = false;
    index = 0;
    ForEachParamField(defaults.value(), [&](const CodecFieldValue& field) {
      applied[index] = words[index];
      if (!named && words[index] != default_words[index]) {
        const Result<CodecParams> check = ParamsFromWords(CodecIdOf(defaults.value()), applied);
        if (!check.ok()) {
          message = ConfigLinePrefix(FlagOf(field.name)) + FlagOf(field.name) + " " +
                    Find(field.name)->value + ": " + check.status().reason();
          named = true;
        }
      }
      ++index;
    });
    return HostError(params.status(), std::move(message));
  }
  if (strict) {
    for (const Flag& flag : flags_) {
      if (flag.option->count() == 0 || !GivenOnCommandLine(FlagOf(flag.name))) continue;
      const char* unused = nullptr;
      bool read = false;
      ForEachParamField(params.value(), [&](const CodecFieldValue& field) {
        if (field.name != flag.name) return;
        read = true;
        unused = field.unused_because;
      });
      if (!read) {
        return FlagError(FlagOf(flag.name) + " is not a parameter of --codec " +
                         std::string(name) + "; it belongs to " + flag.codecs);
      }
      if (unused != nullptr) return FlagError(FlagOf(flag.name) + " does not apply: " + unused);
    }
  }
  return params.value();
}

std::string CodecNamesWith(bool (*has)(const CodecTraits&)) {
  std::string names;
  for (CodecId id = 0; id < kCodecCount; ++id) {
    if (!has(TraitsOf(DefaultCodecParams(id).value()))) continue;
    if (!names.empty()) names += ", ";
    names += CodecName(id);
  }
  return names;
}

}  // namespace edgesgd::cli
