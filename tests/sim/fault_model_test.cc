#include "edgesgd/sim/fault_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

#include "sim/fake_sessions.h"

namespace edgesgd::sim {
namespace {

constexpr std::uint64_t kFrames = 100'000;

// |count - n p| within 5 standard deviations of a binomial(n, p): a false failure has odds
// below one in a million, and a wrong rate (off by 10% of p) still fails.
void ExpectRate(std::uint64_t count, std::uint64_t n, double p) {
  const double mean = static_cast<double>(n) * p;
  const double sigma = std::sqrt(mean * (1.0 - p));
  EXPECT_NEAR(static_cast<double>(count), mean, 5.0 * sigma) << "p=" << p;
}

TEST(SimFaultModel, RatesMatchProbabilities) {
  FaultConfig config;
  config.loss = 0.1;
  config.corruption = 0.05;
  config.duplication = 0.02;
  const FaultModel model(42, config);
  std::uint64_t lost = 0;
  std::uint64_t corrupted = 0;
  std::uint64_t duplicated = 0;
  for (std::uint64_t seq = 0; seq < kFrames; ++seq) {
    const FrameFate fate = model.DrawFate(3, seq);
    lost += fate.lost ? 1u : 0u;
    corrupted += fate.corrupted ? 1u : 0u;
    duplicated += fate.duplicated ? 1u : 0u;
  }
  ExpectRate(lost, kFrames, 0.1);
  ExpectRate(corrupted, kFrames, 0.05);
  ExpectRate(duplicated, kFrames, 0.02);
}

TEST(SimFaultModel, ZeroNeverAndOneAlways) {
  FaultConfig config;
  config.loss = 1.0;
  const FaultModel model(7, config);
  for (std::uint64_t seq = 0; seq < 10'000; ++seq) {
    const FrameFate fate = model.DrawFate(1, seq);
    ASSERT_TRUE(fate.lost);
    ASSERT_FALSE(fate.corrupted);
    ASSERT_FALSE(fate.duplicated);
  }
}

TEST(SimFaultModel, EachFaultHasItsOwnDraw) {
  // Raising the loss probability must not move which frames get corrupted or duplicated.
  FaultConfig a;
  a.loss = 0.1;
  a.corruption = 0.3;
  a.duplication = 0.3;
  FaultConfig b = a;
  b.loss = 0.9;
  const FaultModel model_a(5, a);
  const FaultModel model_b(5, b);
  for (std::uint64_t seq = 0; seq < 10'000; ++seq) {
    ASSERT_EQ(model_a.DrawFate(2, seq).corrupted, model_b.DrawFate(2, seq).corrupted);
    ASSERT_EQ(model_a.DrawFate(2, seq).duplicated, model_b.DrawFate(2, seq).duplicated);
  }
}

TEST(SimFaultModel, DrawsDependOnSeedSenderAndSequenceOnly) {
  FaultConfig config;
  config.loss = 0.5;
  const FaultModel model(11, config);
  const FaultModel same(11, config);
  const FaultModel other_seed(12, config);
  int differs_by_seed = 0;
  int differs_by_sender = 0;
  for (std::uint64_t seq = 0; seq < 1000; ++seq) {
    ASSERT_EQ(model.DrawFate(1, seq).lost, same.DrawFate(1, seq).lost);
    differs_by_seed += model.DrawFate(1, seq).lost != other_seed.DrawFate(1, seq).lost;
    differs_by_sender += model.DrawFate(1, seq).lost != model.DrawFate(2, seq).lost;
  }
  EXPECT_GT(differs_by_seed, 300);
  EXPECT_GT(differs_by_sender, 300);
  // Frame numbers past 2^32 get fresh counters rather than wrapping onto frame 0's.
  int differs_by_high_bits = 0;
  for (std::uint64_t seq = 0; seq < 1000; ++seq) {
    differs_by_high_bits +=
        model.DrawFate(1, seq).lost != model.DrawFate(1, seq + (1ull << 32)).lost;
  }
  EXPECT_GT(differs_by_high_bits, 300);
}

TEST(SimFaultModel, CorruptFlipsDistinctBitsReproducibly) {
  FaultConfig config;
  config.corruption = 1.0;
  config.max_corrupt_bits = 4;
  const FaultModel model(9, config);
  std::vector<int> flips_seen(5, 0);
  for (std::uint64_t seq = 0; seq < 2000; ++seq) {
    const std::vector<std::byte> original = testing::TaggedBytes(64, 3);
    std::vector<std::byte> first = original;
    std::vector<std::byte> second = original;
    const std::uint32_t flipped = model.Corrupt(4, seq, first);
    ASSERT_EQ(model.Corrupt(4, seq, second), flipped);
    ASSERT_EQ(first, second);
    ASSERT_GE(flipped, 1u);
    ASSERT_LE(flipped, 4u);
    int distance = 0;
    for (std::size_t i = 0; i < original.size(); ++i) {
      distance += std::popcount(static_cast<unsigned>(first[i] ^ original[i]));
    }
    ASSERT_EQ(distance, static_cast<int>(flipped));
    ++flips_seen[flipped];
  }
  for (std::size_t count = 1; count <= 4; ++count) {
    EXPECT_GT(flips_seen[count], 300) << count << " bits";
  }
}

TEST(SimFaultModel, CorruptTinyAndEmptyFrames) {
  FaultConfig config;
  config.corruption = 1.0;
  config.max_corrupt_bits = 64;
  const FaultModel model(1, config);
  std::vector<std::byte> one_byte(1, std::byte{0});
  for (std::uint64_t seq = 0; seq < 100; ++seq) {
    std::vector<std::byte> frame = one_byte;
    const std::uint32_t flipped = model.Corrupt(1, seq, frame);
    ASSERT_LE(flipped, 8u);
    ASSERT_EQ(std::popcount(static_cast<unsigned>(frame[0])), static_cast<int>(flipped));
  }
  std::vector<std::byte> empty;
  EXPECT_EQ(model.Corrupt(1, 0, empty), 0u);
}

TEST(SimFaultModel, DropoutEpochsFollowProbabilityAndSpareTheServer) {
  FaultConfig config;
  config.dropout = 0.3;
  config.dropout_epoch_ns = 1'000'000;
  const FaultModel model(21, config);
  std::uint64_t offline = 0;
  for (std::uint64_t epoch = 0; epoch < kFrames; ++epoch) {
    offline += model.IsOfflineInEpoch(5, epoch) ? 1u : 0u;
    ASSERT_FALSE(model.IsOfflineInEpoch(protocol::kServerPeer, epoch));
  }
  ExpectRate(offline, kFrames, 0.3);
  EXPECT_EQ(model.EpochOf(0), 0u);
  EXPECT_EQ(model.EpochOf(999'999), 0u);
  EXPECT_EQ(model.EpochOf(1'000'000), 1u);
  for (protocol::TimeNs t = 0; t < 50'000'000; t += 250'000) {
    ASSERT_EQ(model.IsOffline(5, t), model.IsOfflineInEpoch(5, t / 1'000'000));
  }
}

TEST(SimFaultModel, NoDropoutConfiguredMeansAlwaysOnline) {
  const FaultModel model(3, FaultConfig{});
  for (protocol::TimeNs t = 0; t < 1'000'000'000; t += 10'000'000) {
    ASSERT_FALSE(model.IsOffline(1, t));
  }
}

// Diurnal availability: each device online for the configured fraction of every period, the
// same hours every period, at phases that differ between devices; the server always.
TEST(SimFaultModel, DiurnalDevicesAreOnlineTheirShareOfEveryPeriod) {
  FaultConfig config;
  config.diurnal_period_ns = 1'000'000;
  config.diurnal_online = 0.25;
  const FaultModel model(8, config);
  std::vector<std::uint32_t> first_online;
  for (protocol::PeerId device = 1; device <= 20; ++device) {
    std::uint32_t online = 0;
    std::uint32_t first = 1000;
    for (std::uint32_t step = 0; step < 1000; ++step) {
      const protocol::TimeNs t = step * 1000;
      const bool up = !model.IsOffline(device, t);
      ASSERT_EQ(up, !model.IsOffline(device, t + 7 * config.diurnal_period_ns));
      online += up ? 1u : 0u;
      if (up && first == 1000) first = step;
    }
    EXPECT_NEAR(online, 250, 1) << device;
    first_online.push_back(first);
    ASSERT_FALSE(model.IsOffline(protocol::kServerPeer, device * 12'345));
  }
  std::sort(first_online.begin(), first_online.end());
  EXPECT_GT(std::unique(first_online.begin(), first_online.end()) - first_online.begin(), 10);
}

// A trace: a traced device is online inside its intervals only, an untraced one always.
TEST(SimFaultModel, TracedDevicesAreOnlineInsideTheirIntervalsOnly) {
  const std::vector<OnlineInterval> trace = {{2, 100, 200}, {2, 300, 400}, {5, 0, 50}};
  FaultConfig config;
  config.availability = trace;
  const FaultModel model(1, config);
  for (const auto& [device, time, online] :
       std::vector<std::tuple<protocol::PeerId, protocol::TimeNs, bool>>{
           {2, 99, false}, {2, 100, true}, {2, 199, true}, {2, 200, false}, {2, 350, true},
           {2, 400, false}, {5, 0, true}, {5, 50, false}, {3, 1'000'000, true}, {1, 0, true}}) {
    EXPECT_EQ(!model.IsOffline(device, time), online) << device << " at " << time;
  }
}

}  // namespace
}  // namespace edgesgd::sim
