#pragma once

// Flags shared by several subcommands, registered in one place so names, defaults and help text
// agree everywhere.

#include <CLI/CLI.hpp>
#include <cstdint>

#include "edgesgd/core/codec_params.h"

namespace edgesgd::cli {

// Codec parameters as flags (the codec choice itself is per subcommand).
struct CodecFlags {
  float k_ratio = 0.01f;
  std::uint32_t block_ratio = 64;
  std::uint32_t bits = 8;
  std::uint32_t bucket = 512;
  float mu = 4.0f;      // reg_top_k
  float reg_q = 1e8f;   // reg_top_k

  // Valid once the flags passed their range checks.
  CodecParams ToParams() const;
};

void AddCodecParameterFlags(CLI::App& command, CodecFlags& flags);

}  // namespace edgesgd::cli
