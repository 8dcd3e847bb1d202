// Differential privacy's sampling and accounting in the sessions: each live device joins a
// private round with probability P, from a cohort key no worker holds, whatever the rest of the
// fleet does; and the epsilon the server reports is the one an independent account of the
// rounds that really happened gives.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/rdp_quadrature.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

constexpr std::size_t kDim = 64;

RunConfig PrivateRun(PrivacyMode mode, float participation, float noise, std::uint32_t rounds) {
  RunConfig config = MeanConfig(kDim, kCodecId<IdentityCodec>, rounds);
  config.participation = participation;
  config.privacy = PrivacyParams{.mode = mode, .clip = 1.0f, .noise_multiplier = noise};
  return config;
}

ServerOptions FleetOptions(std::uint32_t workers, std::uint64_t noise_key) {
  ServerOptions options;
  options.workers = workers;
  options.quorum = 1;
  options.noise_key = {noise_key};
  options.round_deadline_ns = kSecond;
  options.join_timeout_ns = kSecond;  // train without the devices that never come
  options.liveness_timeout_ns = 5 * kSecond;
  return options;
}

void GiveNoiseKey(PeerId id, WorkerOptions& options) {
  options.add_noise = &AddNoiseShare;
  options.noise_key = {0xB0B0 + id};
}

// Updates each device had accepted over a private run of `rounds` rounds in which only the
// first `live` of `workers` devices are ever online.
std::vector<std::uint32_t> SelectionCounts(std::uint32_t workers, std::uint32_t live,
                                           float participation, std::uint32_t rounds,
                                           std::uint64_t noise_key) {
  const RunConfig config = PrivateRun(PrivacyMode::kCentral, participation, 1.0f, rounds);
  const std::vector<float> initial(kDim, 0.0f);
  Cluster cluster(config, FleetOptions(workers, noise_key), Targets(workers, kDim), initial, {},
                  GiveNoiseKey);
  for (PeerId peer = live + 1; peer <= workers; ++peer) cluster.net().SetWorkerDown(peer, true);
  cluster.Start();
  EXPECT_TRUE(cluster.RunUntilFinished(100000 * kSecond));
  EXPECT_TRUE(cluster.server().status().ok());
  EXPECT_EQ(cluster.server().round(), rounds);
  std::vector<std::uint32_t> counts;
  for (PeerId peer = 1; peer <= live; ++peer) {
    counts.push_back(cluster.server().UpdatesAcceptedFrom(peer));
  }
  return counts;
}

// 100 devices, 90 of them never online, P = 0.02: each of the 10 live ones must be sampled in
// about 2 % of the rounds (a binomial count), not in the 10 % that a cohort of at least one
// would force on them.
TEST(PrivateSamplingTest, EachLiveDeviceJoinsARoundWithProbabilityP) {
  constexpr std::uint32_t kRounds = 1000;
  constexpr double kRate = 0.02;
  const std::vector<std::uint32_t> counts = SelectionCounts(100, 10, 0.02f, kRounds, 0xC0FFEE);
  const double mean = kRounds * kRate;
  const double sd = std::sqrt(kRounds * kRate * (1 - kRate));
  std::uint32_t total = 0;
  for (const std::uint32_t count : counts) {
    // Five standard deviations: a false alarm once in about 3.5 million devices.
    EXPECT_NEAR(count, mean, 5 * sd);
    total += count;
  }
  EXPECT_NEAR(total, 10 * mean, 5 * std::sqrt(10.0) * sd);
}

// The cohort follows the server's secret, not the run's seed that every worker receives: two
// servers of the same run with different secrets sample different devices.
TEST(PrivateSamplingTest, TheCohortComesFromTheServersSecret) {
  const std::vector<std::uint32_t> a = SelectionCounts(10, 10, 0.3f, 60, 0x5EC12E7);
  const std::vector<std::uint32_t> b = SelectionCounts(10, 10, 0.3f, 60, 0x5EC12E8);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, SelectionCounts(10, 10, 0.3f, 60, 0x5EC12E7));  // and is reproducible from it
}

// Distributed noise with devices dropping out: a round's sum carries the shares of those who
// reported, which is less noise than the expected cohort's whenever fewer report. The account
// is rebuilt from the rounds' own events (rate P, multiplier z sqrt(reported / cohort)) by
// quadrature, and the server's must match it at every integer order.
TEST(PrivateSamplingTest, TheEpsilonIsTheAccountOfTheRoundsThatHappened) {
  constexpr std::uint32_t kWorkers = 12;
  constexpr std::uint32_t kRounds = 40;
  constexpr float kRate = 0.5f;
  constexpr double kNoise = 3.0;
  const RunConfig config = PrivateRun(PrivacyMode::kDistributed, kRate, kNoise, kRounds);
  const std::vector<float> initial(kDim, 0.0f);
  Cluster cluster(config, FleetOptions(kWorkers, 0xD15C0), Targets(kWorkers, kDim), initial, {},
                  GiveNoiseKey);
  cluster.net().SetLatencyAll(kMs);  // a round per step at most: the round log keeps them all
  cluster.Start();
  std::vector<RoundEvent> events;
  for (std::uint32_t round = 1; round <= kRounds; ++round) {
    // Two devices vanish for a stretch, sampled or not: their rounds close without them.
    if (round == 10) {
      cluster.net().SetWorkerDown(3, true);
      cluster.net().SetWorkerDown(7, true);
    }
    ASSERT_TRUE(cluster.RunUntilRound(round, 100000 * kSecond));
    for (const RoundEvent& event : cluster.DrainRounds()) events.push_back(event);
  }
  ASSERT_TRUE(cluster.RunUntilFinished(100000 * kSecond));
  for (const RoundEvent& event : cluster.DrainRounds()) events.push_back(event);
  ASSERT_EQ(events.size(), kRounds);

  const double cohort = static_cast<double>(SampledCount(kRate, kWorkers));
  std::map<std::uint32_t, std::uint32_t> rounds_by_reports;
  bool fewer_than_expected = false;
  for (const RoundEvent& event : events) {
    if (event.reported > 0) ++rounds_by_reports[event.reported];
    fewer_than_expected |= event.reported > 0 && event.reported < cohort;
  }
  ASSERT_TRUE(fewer_than_expected) << "the run never had a round short of the cohort";

  const double delta = static_cast<double>(config.privacy.delta);
  const double rate = static_cast<double>(kRate);
  const PrivacyLedger& ledger = cluster.server().privacy_ledger();
  std::uint64_t charged = 0;
  for (const auto& [reports, rounds] : rounds_by_reports) charged += rounds;
  EXPECT_EQ(ledger.rounds(), charged);
  std::vector<double> orders;
  std::vector<double> server_rdp;
  std::vector<double> independent_rdp;
  for (std::size_t k = 0; k < kRdpOrders.size(); ++k) {
    const double order = kRdpOrders[k];
    if (std::floor(order) != order || order > 12) continue;  // past it, A - 1 overflows
    double rdp = 0;
    for (const auto& [reports, rounds] : rounds_by_reports) {
      const double noise = kNoise * std::sqrt(reports / cohort);
      rdp += rounds * edgesgd::testing::RdpByQuadrature(rate, noise, order, 60000);
    }
    orders.push_back(order);
    server_rdp.push_back(ledger.rdp()[k]);
    independent_rdp.push_back(rdp);
    EXPECT_NEAR(ledger.rdp()[k], rdp, 1e-5 * rdp) << "order " << order;
  }
  const double server = EpsilonFromRdp(orders, server_rdp, delta).epsilon;
  const double independent = EpsilonFromRdp(orders, independent_rdp, delta).epsilon;
  EXPECT_GE(server, independent * (1 - 1e-5));
  // The last event reports the ledger's epsilon over every order, which is at most the integer
  // orders' and exceeds the nominal run's (z on every round) since rounds fell short.
  const double reported = events.back().epsilon;
  EXPECT_EQ(reported, ledger.Epsilon(delta)->epsilon);
  EXPECT_LE(reported, server);
  PrivacyLedger nominal;
  for (std::uint64_t round = 0; round < charged; ++round) {
    ASSERT_TRUE(nominal.Charge(rate, kNoise).ok());
  }
  EXPECT_GT(reported, nominal.Epsilon(delta)->epsilon);
}

// A round that samples nobody closes at once and costs nothing; no device is added to it.
TEST(PrivateSamplingTest, AnEmptyRoundClosesAtOnceAndIsNotCharged) {
  const RunConfig config = PrivateRun(PrivacyMode::kCentral, 0.05f, 1.0f, 200);
  const std::vector<float> initial(kDim, 0.0f);
  Cluster cluster(config, FleetOptions(4, 0xE3B7), Targets(4, kDim), initial, {}, GiveNoiseKey);
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  std::uint32_t empty = 0;
  std::uint64_t released = 0;
  while (!cluster.server().Finished()) {
    ASSERT_TRUE(cluster.RunUntilRound(cluster.server().round() + 1, 100000 * kSecond));
    for (const RoundEvent& event : cluster.DrainRounds()) {
      EXPECT_LE(event.selected, 4u);
      empty += event.selected == 0 ? 1 : 0;
      released += event.reported > 0 ? 1 : 0;
      EXPECT_EQ(event.reported, event.selected);  // nobody drops out here
    }
  }
  EXPECT_GT(empty, 100u);  // 0.95^4 = 81 % of the rounds
  EXPECT_EQ(cluster.server().counters().top_ups, 0u);
  EXPECT_EQ(cluster.server().privacy_ledger().rounds(), released);
}

// A resumed run continues the account its checkpoint carries: its epsilon at the end is the
// uninterrupted run's, not that of the rounds after the resume alone.
TEST(PrivateSamplingTest, AResumedRunContinuesTheCheckpointsAccount) {
  const RunConfig config = PrivateRun(PrivacyMode::kCentral, 0.5f, 1.5f, 30);
  const std::vector<float> initial(kDim, 0.0f);
  const ServerOptions options = FleetOptions(6, 0xACC0);
  const auto make = [&] {
    auto cluster = std::make_unique<Cluster>(config, options, Targets(6, kDim), initial,
                                             WorkerOptions{}, GiveNoiseKey);
    cluster->net().SetLatencyAll(kMs);
    return cluster;
  };
  const std::unique_ptr<Cluster> whole = make();
  whole->Start();
  ASSERT_TRUE(whole->RunUntilFinished(100000 * kSecond));

  std::vector<std::byte> checkpoint;
  {
    const std::unique_ptr<Cluster> first = make();
    first->Start();
    ASSERT_TRUE(first->RunUntilRound(20, 100000 * kSecond));
    checkpoint.resize(first->server().StateBytes());
    ASSERT_TRUE(first->server().SaveState(checkpoint).ok());
    EXPECT_GT(first->server().privacy_ledger().rounds(), 0u);
  }
  const std::unique_ptr<Cluster> resumed = make();
  ASSERT_TRUE(resumed->server().RestoreState(checkpoint).ok());
  resumed->Start();
  ASSERT_TRUE(resumed->RunUntilFinished(100000 * kSecond));
  const double delta = static_cast<double>(config.privacy.delta);
  EXPECT_EQ(resumed->server().privacy_ledger().rounds(), whole->server().privacy_ledger().rounds());
  EXPECT_DOUBLE_EQ(resumed->server().privacy_ledger().Epsilon(delta)->epsilon,
                   whole->server().privacy_ledger().Epsilon(delta)->epsilon);
}

// A driver that saves less often than every round keeps the account of the rounds in between
// and hands it back before the resumed session starts; afterwards it is refused.
TEST(PrivateSamplingTest, AnAccountKeptOutsideTheCheckpointIsRestoredBeforeStart) {
  const RunConfig config = PrivateRun(PrivacyMode::kCentral, 0.5f, 1.5f, 10);
  const std::vector<float> initial(kDim, 0.0f);
  Cluster cluster(config, FleetOptions(4, 0xACC1), Targets(4, kDim), initial, {}, GiveNoiseKey);
  PrivacyLedger kept;
  for (int round = 0; round < 7; ++round) ASSERT_TRUE(kept.Charge(0.5, 1.5).ok());
  std::vector<double> bad(kept.rdp().begin(), kept.rdp().end());
  bad[3] = -1.0;
  EXPECT_EQ(cluster.server().RestorePrivacyLedger(bad, 7).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(cluster.server().RestorePrivacyLedger(kept.rdp(), kept.rounds()).ok());
  EXPECT_EQ(cluster.server().privacy_ledger().rounds(), 7u);
  cluster.Start();
  EXPECT_EQ(cluster.server().RestorePrivacyLedger(kept.rdp(), kept.rounds()).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(cluster.RunUntilFinished(100000 * kSecond));
  EXPECT_GT(cluster.server().privacy_ledger().rounds(), 7u);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
