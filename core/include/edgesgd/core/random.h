#pragma once

#include <array>
#include <cstdint>

namespace edgesgd {

// Counter-based randomness. Workers agree on random choices (rand_k indices, block starts)
// without exchanging them: every draw is a pure function of (seed, round, tensor, stream, index),
// computed with integer arithmetic only, so it is identical on x86-64, ARM and Cortex-M.

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;
using PhiloxBlock = std::array<std::uint32_t, 4>;

// The high and low halves of the product a * b at Philox's word width.
constexpr void MultiplyWide(std::uint32_t a, std::uint32_t b, std::uint32_t& high,
                            std::uint32_t& low) {
  const std::uint64_t product = std::uint64_t{a} * b;
  high = static_cast<std::uint32_t>(product >> 32);
  low = static_cast<std::uint32_t>(product);
}

// The 64-bit halves in 64-bit arithmetic only (32-bit targets have no wider type).
constexpr void MultiplyWide(std::uint64_t a, std::uint64_t b, std::uint64_t& high,
                            std::uint64_t& low) {
  const std::uint64_t a_low = a & 0xFFFFFFFFu;
  const std::uint64_t a_high = a >> 32;
  const std::uint64_t b_low = b & 0xFFFFFFFFu;
  const std::uint64_t b_high = b >> 32;
  const std::uint64_t low_low = a_low * b_low;
  const std::uint64_t low_high = a_low * b_high;
  const std::uint64_t high_low = a_high * b_low;
  const std::uint64_t middle =
      (low_low >> 32) + (low_high & 0xFFFFFFFFu) + (high_low & 0xFFFFFFFFu);
  low = (middle << 32) | (low_low & 0xFFFFFFFFu);
  high = a_high * b_high + (low_high >> 32) + (high_low >> 32) + (middle >> 32);
}

// Philox's multipliers and key increments (Weyl constants) at each word width.
template <typename Word>
struct PhiloxConstants;
template <>
struct PhiloxConstants<std::uint32_t> {
  static constexpr std::uint32_t kMul0 = 0xD2511F53u;
  static constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
  static constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  static constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
};
template <>
struct PhiloxConstants<std::uint64_t> {
  static constexpr std::uint64_t kMul0 = 0xD2E7470EE14C6C93ull;
  static constexpr std::uint64_t kMul1 = 0xCA5A826395121157ull;
  static constexpr std::uint64_t kWeyl0 = 0x9E3779B97F4A7C15ull;
  static constexpr std::uint64_t kWeyl1 = 0xBB67AE8584CAA73Bull;
};

// Philox4xW with 10 rounds (Salmon et al., SC'11), matching the Random123 reference.
template <typename Word>
constexpr std::array<Word, 4> Philox4_10(std::array<Word, 4> counter, std::array<Word, 2> key) {
  using C = PhiloxConstants<Word>;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += C::kWeyl0;
      key[1] += C::kWeyl1;
    }
    Word hi0 = 0;
    Word lo0 = 0;
    Word hi1 = 0;
    Word lo1 = 0;
    MultiplyWide(C::kMul0, counter[0], hi0, lo0);
    MultiplyWide(C::kMul1, counter[2], hi1, lo1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

// Philox4x32-10: the shared draws, under a 64-bit key.
constexpr PhiloxBlock Philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  return Philox4_10<std::uint32_t>(counter, key);
}

using Philox64Block = std::array<std::uint64_t, 4>;
using Philox64Key = std::array<std::uint64_t, 2>;

// Philox4x64-10: a 128-bit key, for the draws whose secrecy rests on it.
constexpr Philox64Block Philox4x64_10(Philox64Block counter, Philox64Key key) {
  return Philox4_10<std::uint64_t>(counter, key);
}

// A 128-bit secret of one holder: the key of the draws nobody else may foresee (differential
// privacy's noise, a private run's cohorts, secure aggregation's neighbour graph). All zero means
// none. 64 bits would be within reach of a search that matches candidate noise to a released
// model.
struct SecretKey {
  std::uint64_t low = 0;
  std::uint64_t high = 0;

  constexpr bool empty() const { return low == 0 && high == 0; }
  friend constexpr bool operator==(const SecretKey&, const SecretKey&) = default;
};

// SplitMix64 (Steele et al.): advances `state` and returns the next 64-bit value. Used to derive
// independent seeds (per worker, per data shard) from one user seed.
constexpr std::uint64_t SplitMix64(std::uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform float in [0, 1) from the top 24 bits: exact (every result is a multiple of 2^-24), so
// no rounding mode or FPU difference can change it.
constexpr float UniformFloat(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1.0p-24f;
}

// What a random stream is for. Combined with a worker id into the counter's stream word so that
// shared streams (same on all workers) and private streams never overlap.
enum class RandomPurpose : std::uint32_t {
  kSparsifySelection = 1,  // rand_k indices: shared by all workers
  kBlockStart = 2,         // random_block starts: shared
  kQuantizationDither = 3, // qsgd stochastic rounding: private per worker
  kDataSampling = 4,       // mini-batch sampling: private per worker
  kModelInit = 5,
  kUser = 6,
  kParticipation = 7,      // which workers a round samples: shared
  kNetworkFaults = 8,      // the simulator's loss / corruption / drop-out draws
  kPrivacyNoise = 9,       // differential privacy's Gaussian noise: private, under a secret key
  kSecureAggregationGraph = 10,  // which devices mask with each other (SecAgg+): the server's
  kSimulatedAttack = 11,         // the simulator's Byzantine workers (noise attacks)
  kSignNoise = 12,               // the stochastic sign's thresholds: private per worker
};

// The counter's stream word: purpose in the top 8 bits, worker id in the low 24.
constexpr std::uint32_t StreamId(RandomPurpose purpose, std::uint32_t worker = 0) {
  return (static_cast<std::uint32_t>(purpose) << 24) | (worker & 0x00FFFFFFu);
}

constexpr PhiloxKey KeyFromSeed(std::uint64_t seed) {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
}

// Uniform integer in [0, bound), bound >= 1, exactly: Lemire's multiply-shift with rejection over
// the 32-bit words next() returns. Every reader of a stream draws through this one function, so a
// batched reader (rand_k's) and CounterRng take the same words for the same draws.
template <typename NextU32>
constexpr std::uint32_t UniformBelow(std::uint32_t bound, NextU32&& next) {
  std::uint64_t product = std::uint64_t{next()} * bound;
  auto low = static_cast<std::uint32_t>(product);
  if (low < bound) {
    const std::uint32_t threshold = (0u - bound) % bound;
    while (low < threshold) {
      product = std::uint64_t{next()} * bound;
      low = static_cast<std::uint32_t>(product);
    }
  }
  return static_cast<std::uint32_t>(product >> 32);
}

// The draws of a reader whose NextU32 gives uniform 32-bit words (CRTP: no state, no virtual).
template <typename Reader>
class UniformDraws {
 public:
  // Uniform integer in [0, bound), bound >= 1; see UniformBelow.
  constexpr std::uint32_t NextBelow(std::uint32_t bound) {
    return UniformBelow(bound, [this] { return reader().NextU32(); });
  }

  // Uniform float in [0, 1), see UniformFloat.
  constexpr float NextFloat() { return UniformFloat(reader().NextU32()); }

 private:
  constexpr Reader& reader() { return static_cast<Reader&>(*this); }
};

// A sequential reader over one Philox stream: counter = (round, tensor, stream, block index).
// Cheap to construct; holds 28 bytes of state.
class CounterRng : public UniformDraws<CounterRng> {
 public:
  constexpr CounterRng(std::uint64_t seed, std::uint32_t round, std::uint32_t tensor,
                       std::uint32_t stream)
      : key_(KeyFromSeed(seed)), round_(round), tensor_(tensor), stream_(stream) {}

  // Next 32 random bits.
  constexpr std::uint32_t NextU32() {
    if (used_ == 4) {
      block_ = Philox4x32_10({round_, tensor_, stream_, next_block_++}, key_);
      used_ = 0;
    }
    return block_[used_++];
  }

 private:
  PhiloxKey key_;
  std::uint32_t round_;
  std::uint32_t tensor_;
  std::uint32_t stream_;
  std::uint32_t next_block_ = 0;
  std::uint32_t used_ = 4;
  PhiloxBlock block_{};
};

// A sequential reader over a Philox4x64 stream under a SecretKey: counter = (round, tensor,
// stream, block index), as CounterRng's. Holds 56 bytes of state.
class SecretRng : public UniformDraws<SecretRng> {
 public:
  constexpr SecretRng(const SecretKey& key, std::uint32_t round, std::uint32_t tensor,
                      std::uint32_t stream)
      : key_{key.low, key.high}, round_(round), tensor_(tensor), stream_(stream) {}

  // Next 32 random bits: the low then the high half of each 64-bit word of a block.
  constexpr std::uint32_t NextU32() {
    if (used_ == 8) {
      block_ = Philox4x64_10({round_, tensor_, stream_, next_block_++}, key_);
      used_ = 0;
    }
    const std::uint64_t word = block_[used_ / 2];
    const auto bits = static_cast<std::uint32_t>(used_ % 2 == 0 ? word : word >> 32);
    ++used_;
    return bits;
  }

 private:
  Philox64Key key_;
  std::uint32_t round_;
  std::uint32_t tensor_;
  std::uint32_t stream_;
  std::uint64_t next_block_ = 0;
  std::uint32_t used_ = 8;
  Philox64Block block_{};
};

}  // namespace edgesgd
