#include "edgesgd/sim/fault_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "edgesgd/core/check.h"
#include "edgesgd/core/random.h"

namespace edgesgd::sim {
namespace {

// The counter's tensor word: what the draw is for in the top 4 bits, high bits of the frame
// number below (frames 2^32 and later of one sender still get fresh counters).
constexpr std::uint32_t kFrameDraws = 0x0u << 28;
constexpr std::uint32_t kDropoutDraws = 0x1u << 28;
constexpr std::uint32_t kDiurnalPhaseDraws = 0x2u << 28;
constexpr std::uint32_t kHighBitsMask = 0x0FFFFFFFu;

constexpr std::uint32_t kMaxFlips = 64;

// p in [0, 1] as a threshold on a 32-bit draw: floor(p * 2^32), so p = 1 gives 2^32 (always)
// and p = 0 gives 0 (never). The product is exact in double (p has 53 bits, 2^32 is a power of
// two), and so is the conversion of its floor.
std::uint64_t Threshold(double probability) {
  EDGESGD_CHECK(probability >= 0.0 && probability <= 1.0);
  return static_cast<std::uint64_t>(std::floor(probability * 4294967296.0));
}

CounterRng FrameRng(std::uint64_t seed, protocol::PeerId sender, std::uint64_t sequence) {
  return CounterRng(seed, static_cast<std::uint32_t>(sequence),
                    kFrameDraws | (static_cast<std::uint32_t>(sequence >> 32) & kHighBitsMask),
                    StreamId(RandomPurpose::kNetworkFaults, sender));
}

}  // namespace

FaultModel::FaultModel(std::uint64_t seed, const FaultConfig& config)
    : seed_(seed),
      config_(config),
      loss_threshold_(Threshold(config.loss)),
      corruption_threshold_(Threshold(config.corruption)),
      duplication_threshold_(Threshold(config.duplication)),
      dropout_threshold_(Threshold(config.dropout)) {
  EDGESGD_CHECK(dropout_threshold_ == 0 || config.dropout_epoch_ns > 0);
  EDGESGD_CHECK(config.max_corrupt_bits >= 1 && config.max_corrupt_bits <= kMaxFlips);
  EDGESGD_CHECK(config.diurnal_online >= 0.0 && config.diurnal_online <= 1.0);
  for (std::size_t i = 0; i < config.availability.size(); ++i) {
    const OnlineInterval& interval = config.availability[i];
    EDGESGD_CHECK(interval.start_ns < interval.end_ns);
    if (i > 0) {
      const OnlineInterval& previous = config.availability[i - 1];
      EDGESGD_CHECK(previous.device < interval.device ||
                    (previous.device == interval.device && previous.end_ns <= interval.start_ns));
    }
  }
}

FrameFate FaultModel::DrawFate(protocol::PeerId sender, std::uint64_t sequence) const {
  // One Philox block per frame: words 0-2 decide loss, corruption and duplication; word 3 is
  // the flip count, read by Corrupt.
  CounterRng rng = FrameRng(seed_, sender, sequence);
  FrameFate fate;
  fate.lost = rng.NextU32() < loss_threshold_;
  fate.corrupted = rng.NextU32() < corruption_threshold_;
  fate.duplicated = rng.NextU32() < duplication_threshold_;
  return fate;
}

std::uint32_t FaultModel::Corrupt(protocol::PeerId sender, std::uint64_t sequence,
                                  std::span<std::byte> bytes) const {
  if (bytes.empty()) return 0;
  CounterRng rng = FrameRng(seed_, sender, sequence);
  for (int skip = 0; skip < 3; ++skip) rng.NextU32();
  // Frames beyond 512 MiB only have their first 2^32 - 1 bits eligible; none are that large.
  const std::uint64_t total_bits = static_cast<std::uint64_t>(bytes.size()) * 8u;
  const auto bits =
      static_cast<std::uint32_t>(total_bits < 0xFFFFFFFFull ? total_bits : 0xFFFFFFFFull);
  std::uint32_t flips = 1 + rng.NextBelow(config_.max_corrupt_bits);
  if (flips > bits) flips = bits;
  // Distinct positions, so a corrupted frame always differs from the original (two flips of the
  // same bit would cancel). flips <= 64 and rejection is rare unless the frame is tiny.
  std::array<std::uint32_t, kMaxFlips> chosen{};
  std::uint32_t count = 0;
  while (count < flips) {
    const std::uint32_t position = rng.NextBelow(bits);
    bool repeated = false;
    for (std::uint32_t i = 0; i < count; ++i) repeated = repeated || chosen[i] == position;
    if (repeated) continue;
    chosen[count++] = position;
    bytes[position / 8] ^= static_cast<std::byte>(1u << (position % 8));
  }
  return flips;
}

bool FaultModel::IsUnavailable(protocol::PeerId device, protocol::TimeNs time) const {
  if (device == protocol::kServerPeer) return false;
  if (config_.diurnal_period_ns != 0) {
    // The device's phase: where in its day virtual time 0 falls.
    CounterRng rng(seed_, 0, kDiurnalPhaseDraws, StreamId(RandomPurpose::kNetworkFaults, device));
    const std::uint64_t period = config_.diurnal_period_ns;
    // u * period / 2^32 for a uniform 32-bit u, exactly, in 64-bit halves: a phase < period.
    const std::uint64_t u = rng.NextU32();
    const std::uint64_t phase = u * (period >> 32) + ((u * (period & 0xFFFFFFFFu)) >> 32);
    const std::uint64_t position = (time % period + phase) % period;
    if (static_cast<double>(position) >=
        config_.diurnal_online * static_cast<double>(period)) {
      return true;
    }
  }
  const std::span<const OnlineInterval> trace = config_.availability;
  if (trace.empty()) return false;
  const auto by_device = [](const OnlineInterval& interval, protocol::PeerId id) {
    return interval.device < id;
  };
  const auto first = std::lower_bound(trace.begin(), trace.end(), device, by_device);
  if (first == trace.end() || first->device != device) return false;  // not traced: online
  for (auto it = first; it != trace.end() && it->device == device && it->start_ns <= time; ++it) {
    if (time < it->end_ns) return false;
  }
  return true;
}

bool FaultModel::IsOfflineInEpoch(protocol::PeerId device, std::uint64_t epoch) const {
  if (device == protocol::kServerPeer || dropout_threshold_ == 0) return false;
  CounterRng rng(seed_, static_cast<std::uint32_t>(epoch),
                 kDropoutDraws | (static_cast<std::uint32_t>(epoch >> 32) & kHighBitsMask),
                 StreamId(RandomPurpose::kNetworkFaults, device));
  return rng.NextU32() < dropout_threshold_;
}

std::uint64_t FaultModel::EpochOf(protocol::TimeNs time) const {
  return config_.dropout_epoch_ns == 0 ? 0 : time / config_.dropout_epoch_ns;
}

}  // namespace edgesgd::sim
