#pragma once

// Flags shared by several subcommands, registered in one place so names, defaults and help text
// agree everywhere.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "edgesgd/core/codec_params.h"
#include "edgesgd/core/quant_schedule.h"

namespace edgesgd::cli {

// Codec parameters as flags (the codec choice itself is per subcommand).
struct CodecFlags {
  float k_ratio = 0.01f;
  std::uint32_t block_ratio = 64;
  std::uint32_t bits = 8;
  std::uint32_t bucket = 512;
  float mu = 4.0f;      // reg_top_k
  float reg_q = 1e8f;   // reg_top_k
  bool bits_given = false;  // --bits appeared (a dynamic schedule chooses the bits itself)

  // Valid once the flags passed their range checks.
  CodecParams ToParams() const;
};

void AddCodecParameterFlags(CLI::App& command, CodecFlags& flags);

// The qsgd quantization schedule as flags: --quant-schedule fixed|dq, and for dq --bits-min,
// --bits-max, --dq-k, --dq-rho (ALGORITHMS.md §5).
struct QuantScheduleFlags {
  std::string schedule = "fixed";
  std::uint32_t bits_min = 2;
  std::uint32_t bits_max = 8;
  float dq_k = 20.0f;
  float dq_rho = 0.99f;
  bool dq_flags_given = false;  // any of the dq-only flags appeared

  bool dynamic() const { return schedule == "dq"; }
  // The schedule's parameters; for dq also sets `codec.qsgd_levels` to those of --bits-max, the
  // widest a round can use (frames are sized for it). Valid once CheckQuantScheduleFlags passed.
  QuantScheduleParams Apply(CodecParams& codec) const;
};

void AddQuantScheduleFlags(CLI::App& command, QuantScheduleFlags& flags);

// A one-line reason why the schedule flags do not fit the codec flags (`codec` is the --codec
// name), or empty.
std::string CheckQuantScheduleFlags(const QuantScheduleFlags& flags, const CodecFlags& codec_flags,
                                    const std::string& codec);

}  // namespace edgesgd::cli
