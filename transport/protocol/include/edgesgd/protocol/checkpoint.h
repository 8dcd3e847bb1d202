#pragma once

// The server's checkpoint format: the committed state of a run as bytes, and the run
// configuration it belongs to, field by field, so that resuming with any setting changed is
// refused with the setting's name.
//
// Layout, little-endian:
//   "EDGSCKPT"                              magic, 8 bytes
//   u32 format version                      kCheckpointVersion
//   u32 configuration bytes, then records   per ForEachRunConfigField: u8 name length, the
//                                           name, u64 value
//   u32 round, u32 rounds, u64 sequence     the round in progress and the frame counter
//   5 x u64 counters                        bytes/frames received and sent, rounds completed
//   u32 model floats, the floats            the model the round started from
//   u32 aggregation bytes, the bytes        the aggregation component's state (a residual)
//   u32 server optimizer floats, the floats its state (ServerOptimizer::StateFloats)
//   u32 privacy values, u64 rounds charged, a private run's account (PrivacyLedger): its total
//     the doubles                           RDP at each of kRdpOrders (no values when not private)
//   u64 FNV-1a of everything before it
// Nothing here allocates.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/protocol/run_config.h"

namespace edgesgd::protocol {

inline constexpr std::uint32_t kCheckpointVersion = 6;

// Cumulative counters a resumed run continues from.
struct CheckpointCounters {
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t frames_received = 0;
  std::uint64_t frames_sent = 0;
  std::uint64_t rounds_completed = 0;
};

// What a checkpoint holds besides the configuration. Reading points `model`, `aggregation` and
// `server_optimizer` into the checkpoint's bytes (any alignment: copy them out with memcpy).
struct CheckpointState {
  std::uint32_t round = 0;
  std::uint32_t rounds = 0;
  std::uint64_t sequence = 0;
  CheckpointCounters counters;
  std::span<const std::byte> model;        // d floats
  std::span<const std::byte> aggregation;  // the component's CheckpointBytes
  // ServerOptimizer::StateFloats(d, config.server_optimizer) floats
  std::span<const std::byte> server_optimizer;
  // A private run's privacy account: RDP doubles at kRdpOrders (none when not private).
  std::span<const std::byte> privacy_rdp;
  std::uint64_t privacy_rounds = 0;
};

// Bytes of the checkpoint of a run of `config` and `workers` whose aggregation component keeps
// `aggregation_bytes` of state.
std::size_t CheckpointBytes(const RunConfig& config, std::uint32_t workers,
                            std::size_t aggregation_bytes);

// Writes the checkpoint into `out` and returns the bytes written. Errors: kResourceExhausted
// when `out` is shorter than CheckpointBytes; kInvalidArgument when the state's model or server
// optimizer state is not the configuration's size.
Result<std::size_t> WriteCheckpoint(std::span<std::byte> out, const RunConfig& config,
                                    std::uint32_t workers, const CheckpointState& state);

// Reads a checkpoint written for `config` and `workers` with `aggregation_bytes` of component
// state. Checks, in order: magic, format version, checksum (a damaged file), every field of the
// configuration, then the state's sizes and round, and that the model is finite (the
// components check their own state when they restore it). On success
// `out` views `bytes`. Errors (with a reason): kDataLoss for a damaged file or another format
// version; kInvalidArgument for a non-finite model, or when the configuration differs —
// `differing_field` (if given) is then the name of the first field that differs
// (ForEachRunConfigField's names), or empty when the stored configuration has fields this one
// lacks.
Status ReadCheckpoint(std::span<const std::byte> bytes, const RunConfig& config,
                      std::uint32_t workers, std::size_t aggregation_bytes, CheckpointState& out,
                      std::string_view* differing_field = nullptr);

}  // namespace edgesgd::protocol
