#include "edgesgd/sim/link_timing.h"

#include <gtest/gtest.h>

#include "edgesgd/sim/device_profile.h"
#include "edgesgd/sim/sim_config.h"

namespace edgesgd::sim {
namespace {

using protocol::kNever;

TEST(SimLinkTiming, TransmitIsBitsOverBandwidthRoundedUp) {
  EXPECT_EQ(TransmitNs(1000, 8'000'000), 1'000'000u);  // 8000 bits at 8 Mbit/s = 1 ms
  EXPECT_EQ(TransmitNs(125, 1'000'000'000), 1'000u);   // 1000 bits at 1 Gbit/s = 1 us
  EXPECT_EQ(TransmitNs(1, 3), 2'666'666'667u);         // 8/3 s, rounded up
  EXPECT_EQ(TransmitNs(1, 8'000'000'000), 1u);         // exactly 1 ns
  EXPECT_EQ(TransmitNs(1, 9'000'000'000), 1u);         // 0.89 ns rounds up to 1
  EXPECT_EQ(TransmitNs(0, 1000), 0u);
}

TEST(SimLinkTiming, InfiniteLinkTakesNoTime) { EXPECT_EQ(TransmitNs(1'000'000, 0), 0u); }

TEST(SimLinkTiming, FastLinksAndLargeFramesStayExact) {
  // Above 18 Gbit/s the remainder times 1e9 would overflow 64 bits: the digit-by-digit path.
  EXPECT_EQ(TransmitNs(3, 100'000'000'000), 1u);  // 24 bits at 100 Gbit/s = 0.24 ns
  EXPECT_EQ(TransmitNs(3'000'000'000, 100'000'000'000), 240'000'000u);
  EXPECT_EQ(TransmitNs(3'000'000'001, 100'000'000'000), 240'000'001u);  // .08 ns rounds up
  EXPECT_EQ(TransmitNs(12'500'000'000, 100'000'000'000), 1'000'000'000u);
  EXPECT_EQ(TransmitNs(7, kMaxBitsPerSecond), 1u);
  EXPECT_EQ(TransmitNs(1ull << 30, 8), (1ull << 30) * kNsPerSecond);  // 2^30 s
  EXPECT_EQ(TransmitNs(1ull << 40, 8), kNever);                       // 2^40 s does not fit
  EXPECT_EQ(TransmitNs(1ull << 62, 8), kNever);
}

TEST(SimLinkTiming, ComputeScalesWithSamplesAndSpeed) {
  EXPECT_EQ(ComputeNs(100, 10'000, 1.0), 1'000'000u);
  EXPECT_EQ(ComputeNs(100, 10'000, 2.0), 500'000u);
  EXPECT_EQ(ComputeNs(100, 10'000, 0.25), 4'000'000u);
  EXPECT_EQ(ComputeNs(1, 10, 3.0), 4u);  // 3.33 rounds up
  EXPECT_EQ(ComputeNs(0, 10'000, 1.0), 0u);
  EXPECT_EQ(ComputeNs(100, 0, 1.0), 0u);
  EXPECT_EQ(ComputeNs(~0ull, ~0ull, 1.0), kNever);
}

TEST(SimLinkTiming, SaturatingAddClampsAtNever) {
  EXPECT_EQ(SaturatingAdd(1, 2), 3u);
  EXPECT_EQ(SaturatingAdd(kNever - 1, 2), kNever);
  EXPECT_EQ(SaturatingAdd(kNever, 0), kNever);
}

}  // namespace
}  // namespace edgesgd::sim
