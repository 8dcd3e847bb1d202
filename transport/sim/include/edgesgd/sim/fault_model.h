#pragma once

// The simulator's random faults as pure functions of (seed, device, frame number or epoch):
// whether a frame is lost, corrupted or duplicated, which bits a corruption flips, and whether a
// device is offline in a drop-out epoch or outside its availability. Nothing here depends on event order, so the same seed
// gives the same faults to the same frames on every run and every architecture.

#include <cstdint>
#include <span>

#include "edgesgd/protocol/session.h"
#include "edgesgd/sim/sim_config.h"

namespace edgesgd::sim {

// The random fate of one frame. `lost` excludes the others being acted on (the simulator does
// not corrupt or duplicate a frame that never arrives), but all three are always drawn so that
// changing one probability does not shift the others' draws.
struct FrameFate {
  bool lost = false;
  bool corrupted = false;
  bool duplicated = false;
};

class FaultModel {
 public:
  // Checks the configuration (CHECK): probabilities in [0, 1], dropout_epoch_ns > 0 when
  // dropout > 0, 1 <= max_corrupt_bits <= 64, diurnal_online in [0, 1], availability intervals
  // sorted and not empty. Does not allocate.
  FaultModel(std::uint64_t seed, const FaultConfig& config);

  // Fate of the `sequence`-th frame (0-based) emitted by `sender`. Reads only the seed and
  // configuration; counter = (low 32 bits of sequence, kind | high bits, stream of `sender`).
  FrameFate DrawFate(protocol::PeerId sender, std::uint64_t sequence) const;

  // Flips between 1 and max_corrupt_bits distinct bits of `bytes` (fewer if the frame has fewer
  // bits), chosen from the same counter as DrawFate(sender, sequence). Writes `bytes`; returns
  // the number of bits flipped (0 for an empty frame).
  std::uint32_t Corrupt(protocol::PeerId sender, std::uint64_t sequence,
                        std::span<std::byte> bytes) const;

  // Whether `device` is offline during drop-out epoch `epoch`. The server (peer 0) never is.
  bool IsOfflineInEpoch(protocol::PeerId device, std::uint64_t epoch) const;

  // Drop-out epoch containing `time` (0 when drop-out is disabled).
  std::uint64_t EpochOf(protocol::TimeNs time) const;

  // Whether `device` is offline at virtual time `time`: in a drop-out epoch, or outside its
  // availability (diurnal or traced).
  bool IsOffline(protocol::PeerId device, protocol::TimeNs time) const {
    return (dropout_threshold_ != 0 && IsOfflineInEpoch(device, EpochOf(time))) ||
           IsUnavailable(device, time);
  }

  // Whether `device` is outside its availability at `time`.
  bool IsUnavailable(protocol::PeerId device, protocol::TimeNs time) const;

  const FaultConfig& config() const { return config_; }

 private:
  std::uint64_t seed_;
  FaultConfig config_;
  // Each probability p as an exact 33-bit threshold: a uniform 32-bit draw u hits when
  // u < threshold, which happens with probability threshold / 2^32 (p = 1 always hits).
  std::uint64_t loss_threshold_;
  std::uint64_t corruption_threshold_;
  std::uint64_t duplication_threshold_;
  std::uint64_t dropout_threshold_;
};

}  // namespace edgesgd::sim
