#pragma once

// --codec and every codec parameter as a flag, made from the codec descriptors (the codec
// registry): one flag per distinct parameter name — several codecs share --k-ratio — whose help
// names the codecs that read it and shows the default. Adding a codec adds its flags here
// without a line of CLI code.

#include <CLI/CLI.hpp>
#include <deque>
#include <string>
#include <string_view>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

class CodecFlags {
 public:
  // Registers --codec (every known codec, with its one-line summary; `default_codec` when not
  // given) and the parameter flags on `command`. The object must outlive the parse.
  void Add(CLI::App& command, const std::string& default_codec, const std::string& codec_help);
  // Only the parameter flags (a command that runs every codec).
  void AddParameters(CLI::App& command);

  // The codec --codec names.
  const std::string& codec() const { return codec_; }

  // The parameters of the codec named `name`: its defaults, then every parameter flag given
  // that it reads, validated by the codec (its reason is the error). With `strict`, a flag
  // given on the command line that these parameters do not read — another codec's, or one the
  // chosen settings ignore (--bits under --quant-schedule dq) — is an error; flags from a
  // --config file (base settings shared by runs of several codecs) are then ignored, as are all
  // such flags without `strict`. Errors: a one-line message naming the flag.
  HostResult<CodecParams> ParamsFor(std::string_view name, bool strict) const;

  // ParamsFor(codec(), strict).
  HostResult<CodecParams> Params(bool strict = true) const { return ParamsFor(codec_, strict); }

 private:
  struct Flag {
    std::string name;  // the parameter's name; the flag is --name with '-' for '_'
    ParamKind kind = ParamKind::kReal;
    std::string value;
    CLI::Option* option = nullptr;
    std::string codecs;  // the codecs that read it, "sign, stochastic_sign"
  };
  const Flag* Find(std::string_view name) const;

  std::string codec_;
  std::deque<Flag> flags_;  // CLI11 keeps references to the values: no reallocation
};

// "k_ratio" -> "--k-ratio".
std::string FlagOf(std::string_view name);

// A parameter's 32-bit word as the user writes it ("0.1", "8", "trimmed_mean").
std::string FormatWord(ParamKind kind, std::span<const std::string_view> choices,
                       std::uint32_t word);

// The word of `field` for what the user wrote. Errors: a one-line message naming the flag (and
// its --config line) for text that is not such a value.
HostResult<std::uint32_t> ParseWord(const CodecFieldValue& field, const std::string& text);

// The known codecs whose traits satisfy `has`, comma-separated in id order ("top_k, sign").
std::string CodecNamesWith(bool (*has)(const CodecTraits&));

}  // namespace edgesgd::cli
