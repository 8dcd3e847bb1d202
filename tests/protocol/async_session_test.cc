// Buffered asynchronous aggregation in ServerSession (RunConfig::async): versions close after K
// updates without waiting for slow workers, updates weigh by their staleness and the too stale
// are dropped and counted, the concurrency follows the participation, and the run survives
// workers that vanish and return.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/server_session.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

constexpr std::size_t kDim = 12;

RunConfig Buffered(std::uint32_t buffer, std::uint32_t rounds, std::uint32_t max_staleness = 100,
                   float participation = 1.0f) {
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, rounds);
  config.async = AsyncParams{.buffer = buffer, .max_staleness = max_staleness};
  config.participation = participation;
  return config;
}

ServerOptions Workers(std::uint32_t n) {
  ServerOptions options;
  options.workers = n;
  options.quorum = n;
  return options;
}

// n workers on the quadratic problem with the same target; worker n computes `slowdown` times
// slower than the others.
std::unique_ptr<Cluster> SkewedCluster(const RunConfig& config, std::uint32_t n,
                                       TimeNs slowdown) {
  auto cluster = std::make_unique<Cluster>(config, Workers(n),
                                           std::vector<std::vector<float>>(n, PseudoRandom(kDim, 3, 1.0f)),
                                           std::vector<float>(kDim, 2.0f));
  cluster->net().SetLatencyAll(kMs);
  for (PeerId w = 1; w <= n; ++w) cluster->net().SetComputeNsPerSample(w, kMs);
  cluster->net().SetComputeNsPerSample(n, slowdown * kMs);
  return cluster;
}

float DistanceToTarget(Cluster& cluster) {
  double squared = 0;
  const std::vector<float> target = cluster.MeanTarget();
  for (std::size_t i = 0; i < kDim; ++i) {
    const double diff =
        static_cast<double>(cluster.server().model()[i]) - static_cast<double>(target[i]);
    squared += diff * diff;
  }
  return static_cast<float>(std::sqrt(squared));
}

TEST(AsyncSessionTest, AVersionNeverWaitsForTheSlowestWorker) {
  // The same number of updates, 240, as 60 synchronous rounds of four.
  std::unique_ptr<Cluster> async = SkewedCluster(Buffered(2, 120), 4, 20);
  std::unique_ptr<Cluster> sync = SkewedCluster(MeanConfig(kDim, kCodecId<TopKCodec>, 60), 4, 20);
  for (Cluster* cluster : {async.get(), sync.get()}) {
    cluster->Start();
    ASSERT_TRUE(cluster->RunUntilFinished(1000 * kSecond));
    ASSERT_TRUE(cluster->server().status().ok()) << cluster->server().status().reason();
  }
  EXPECT_EQ(async->server().round(), 120u);
  const std::vector<RoundEvent> versions = async->DrainRounds();
  ASSERT_FALSE(versions.empty());
  for (const RoundEvent& version : versions) EXPECT_EQ(version.reported, 2u);
  // The synchronous run waits 160 ms of compute for worker 4 every round; the buffered run
  // closes a version as soon as two updates arrived.
  EXPECT_LT(async->net().now() * 4, sync->net().now());
  EXPECT_LT(DistanceToTarget(*async), 0.05f);
  EXPECT_EQ(async->server().counters().updates_accepted, 240u);
}

// With K = n and every worker training, each version waits for all n updates of one model:
// synchronous FedAvg, bit for bit.
TEST(AsyncSessionTest, ABufferOfEveryWorkerIsSynchronousFedAvg) {
  std::unique_ptr<Cluster> async = SkewedCluster(Buffered(4, 30), 4, 5);
  std::unique_ptr<Cluster> sync = SkewedCluster(MeanConfig(kDim, kCodecId<TopKCodec>, 30), 4, 5);
  for (Cluster* cluster : {async.get(), sync.get()}) {
    cluster->Start();
    ASSERT_TRUE(cluster->RunUntilFinished(1000 * kSecond));
  }
  EXPECT_TRUE(std::equal(async->server().model().begin(), async->server().model().end(),
                         sync->server().model().begin(), sync->server().model().end()));
}

TEST(AsyncSessionTest, UpdatesOlderThanTheBoundAreDroppedAndCounted) {
  // With no staleness allowed the slow worker's updates always arrive after the version moved.
  std::unique_ptr<Cluster> cluster = SkewedCluster(Buffered(2, 40, 0), 4, 20);
  cluster->Start();
  ASSERT_TRUE(cluster->RunUntilFinished(1000 * kSecond));
  ASSERT_TRUE(cluster->server().status().ok());
  const std::uint64_t dropped = cluster->server().counters().rejected_for(RejectReason::kStale);
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(cluster->server().counters().updates_accepted, 80u);
  // A dropped worker is sent the current version again: it keeps trying.
  EXPECT_GE(cluster->worker(4).counters().updates_sent, 2u);
  EXPECT_LT(DistanceToTarget(*cluster), 0.05f);
}

TEST(AsyncSessionTest, ConcurrencyFollowsTheParticipation) {
  // 8 workers, participation 0.25: two train at any time.
  std::unique_ptr<Cluster> cluster = SkewedCluster(Buffered(1, 30, 100, 0.25f), 8, 3);
  cluster->Start();
  std::uint32_t most_training = 0;
  ASSERT_TRUE(cluster->net().RunUntil(
      [&] {
        std::uint32_t training = 0;
        for (PeerId w = 1; w <= 8; ++w) {
          training += cluster->server().IsTraining(w) ? 1u : 0u;
        }
        most_training = std::max(most_training, training);
        return cluster->server().Finished() && cluster->net().in_flight() == 0;
      },
      1000 * kSecond));
  EXPECT_EQ(most_training, 2u);
  // Over the run the dispatches reach every worker, not just the first two.
  for (PeerId w = 1; w <= 8; ++w) EXPECT_GT(cluster->worker(w).counters().updates_sent, 0u) << w;
}

TEST(AsyncSessionTest, TheSameSeedGivesTheSameModel) {
  std::vector<std::vector<float>> models;
  for (int run = 0; run < 2; ++run) {
    std::unique_ptr<Cluster> cluster = SkewedCluster(Buffered(3, 25, 100, 0.75f), 6, 7);
    cluster->Start();
    ASSERT_TRUE(cluster->RunUntilFinished(1000 * kSecond));
    models.emplace_back(cluster->server().model().begin(), cluster->server().model().end());
  }
  EXPECT_EQ(models[0], models[1]);
}

TEST(AsyncSessionTest, AVanishedWorkerIsReplacedAndRejoins) {
  std::unique_ptr<Cluster> cluster = SkewedCluster(Buffered(2, 80), 4, 2);
  cluster->Start();
  ASSERT_TRUE(cluster->RunUntilRound(10, 1000 * kSecond));
  cluster->net().SetWorkerDown(1, true);
  cluster->net().LoseLink(1);
  ASSERT_TRUE(cluster->RunUntilRound(30, 1000 * kSecond));
  EXPECT_FALSE(cluster->server().IsLive(1));
  const std::uint64_t sent_while_down = cluster->worker(1).counters().updates_sent;
  cluster->net().SetWorkerDown(1, false);
  cluster->net().WorkerLostServer(1);
  ASSERT_TRUE(cluster->RunUntilFinished(1000 * kSecond));
  ASSERT_TRUE(cluster->server().status().ok());
  EXPECT_EQ(cluster->server().round(), 80u);
  EXPECT_GT(cluster->worker(1).counters().updates_sent, sent_while_down);
}

// A worker that goes silent while training, with no link loss the server could see, is released
// at its deadline: its version closes with the updates the others can give, and the run goes on
// without it (re-sending to it forever would stall every version that waits for it).
TEST(AsyncSessionTest, ASilentWorkerIsReleasedAtItsDeadline) {
  RunConfig config = Buffered(3, 40);
  ServerOptions options = Workers(3);
  options.round_deadline_ns = 200 * kMs;
  options.liveness_timeout_ns = kNever;
  Cluster cluster(config, options,
                  std::vector<std::vector<float>>(3, PseudoRandom(kDim, 3, 1.0f)),
                  std::vector<float>(kDim, 2.0f));
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilRound(5, 1000 * kSecond));
  cluster.net().SetWorkerDown(3, true);
  ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  EXPECT_EQ(cluster.server().round(), 40u);
  EXPECT_GE(cluster.server().counters().deadline_extensions, 1u);
  const std::vector<RoundEvent> versions = cluster.DrainRounds();
  ASSERT_FALSE(versions.empty());
  EXPECT_EQ(versions.back().reported, 2u);  // closed without the silent worker
}

TEST(AsyncSessionTest, TheServerRefusesWhatCannotRunAsynchronously) {
  const auto refused = [](const RunConfig& config, std::uint32_t workers) {
    ArenaStorage storage(1 << 16);
    ServerSession server;
    return server.Init(storage.arena, AllCodecs(), config, Workers(workers),
                       std::vector<float>(kDim)).code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused(Buffered(5, 10), 4));  // K updates per version from K different workers
  RunConfig vote = MajorityConfig(kDim, 10);
  vote.layout = TensorLayout::Single(kDim).value();
  vote.async.buffer = 2;
  EXPECT_TRUE(refused(vote, 4));
  RunConfig aggregate = Buffered(2, 10);
  aggregate.codec = IdentityParams{};
  aggregate.downlink = DownlinkKind::kAggregate;
  EXPECT_TRUE(refused(aggregate, 4));
  RunConfig robust = Buffered(2, 10);
  robust.robust.rule = RobustRule::kMedian;
  EXPECT_TRUE(refused(robust, 4));
  RunConfig poly = Buffered(2, 10);
  poly.async.staleness = StalenessKind::kPolynomial;
  poly.async.exponent = 0.0f;
  EXPECT_TRUE(refused(poly, 4));
  // The Welcome does not carry it: workers run unchanged.
  EXPECT_EQ(NormalizedRunConfig(Buffered(2, 10)).async, AsyncParams{});
}

TEST(AsyncSessionTest, StalenessWeights) {
  const AsyncParams sqrt_params{.buffer = 1};
  EXPECT_EQ(StalenessWeight(sqrt_params, 0), 1.0f);
  EXPECT_FLOAT_EQ(StalenessWeight(sqrt_params, 3), 0.5f);
  const AsyncParams constant{.buffer = 1, .staleness = StalenessKind::kConstant};
  EXPECT_EQ(StalenessWeight(constant, 50), 1.0f);
  const AsyncParams poly{.buffer = 1, .staleness = StalenessKind::kPolynomial, .exponent = 2.0f};
  EXPECT_FLOAT_EQ(StalenessWeight(poly, 1), 0.25f);
}

// The mean component of a version: x -= sum_i w(tau_i) u_i / K.
TEST(AsyncSessionTest, TheBufferWeighsEachUpdateAndDividesByK) {
  RunConfig config = Buffered(2, 10);
  config.codec = IdentityParams{};
  const AggregationDescriptor* descriptor = FindAggregation(config);
  ASSERT_NE(descriptor, nullptr);
  ArenaStorage storage(descriptor->arena_bytes(config, 4));
  Result<Aggregation*> created =
      descriptor->create(storage.arena, AggregationSetup{&AllCodecs(), &config, 4});
  ASSERT_TRUE(created.ok());
  Aggregation& buffer = *created.value();
  buffer.BeginRound(7);
  const std::vector<float> fresh(kDim, 1.0f);
  const std::vector<float> old(kDim, 4.0f);
  const CodecParams identity = IdentityParams{};
  ASSERT_TRUE(buffer.Add(identity, PayloadView({}, fresh, {}, {}), CodecContext{42, 7, 1}, {}).ok());
  // tau = 3: weight 1/sqrt(4) = 0.5.
  ASSERT_TRUE(buffer.Add(identity, PayloadView({}, old, {}, {}), CodecContext{42, 4, 2}, {}).ok());
  std::vector<float> model(kDim, 10.0f);
  ASSERT_TRUE(buffer.Apply({}, CodecContext{42, 7, 0}, model).ok());
  for (const float value : model) EXPECT_FLOAT_EQ(value, 10.0f - (1.0f + 0.5f * 4.0f) / 2.0f);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
