// Zero heap allocation in the protocol's steady state: a server and four workers run 200 rounds
// after a warm-up (joins, Welcomes, first rounds) through the protocol tests' in-memory network,
// which preallocates its frame slots. Frames built, decoded, aggregated, applied, heartbeats and
// round/reject logs: not one operator new or malloc.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "alloc/allocation_counter.h"
#include "protocol/protocol_harness.h"

namespace edgesgd {
namespace {

using protocol::testing::Cluster;
using protocol::testing::kMs;
using protocol::testing::kSecond;

struct SteadyStateCase {
  const char* name;
  protocol::RunConfig config;
};

std::vector<SteadyStateCase> Cases() {
  using protocol::testing::MajorityConfig;
  using protocol::testing::MeanConfig;
  std::vector<SteadyStateCase> cases;
  protocol::RunConfig top_k = MeanConfig(300, kCodecId<TopKCodec>, 1000);
  top_k.feedback.kind = FeedbackKind::kDef;
  top_k.feedback.local_steps = 2;
  top_k.feedback.learning_rate = 0.02f;
  cases.push_back({"mean_top_k_model_downlink", top_k});
  protocol::RunConfig two_way = top_k;
  two_way.downlink = protocol::DownlinkKind::kAggregate;
  cases.push_back({"mean_top_k_recompressed_downlink", two_way});
  protocol::RunConfig rand_k = MeanConfig(300, kCodecId<RandKCodec>, 1000);
  rand_k.downlink = protocol::DownlinkKind::kAggregate;
  rand_k.participation = 0.75f;
  rand_k.feedback.learning_rate = 0.02f;
  cases.push_back({"mean_rand_k_aggregate_downlink", rand_k});
  protocol::RunConfig qsgd = MeanConfig(300, kCodecId<QsgdCodec>, 1000);
  qsgd.codec = QsgdParams{.levels = 15, .bucket = 64};
  qsgd.feedback.learning_rate = 0.02f;
  cases.push_back({"mean_qsgd_model_downlink", qsgd});
  // The workers learn RegTop-k's posterior from every broadcast; quorum 3 of 4 and partial
  // participation make some of them forget it now and then.
  protocol::RunConfig reg_top_k = MeanConfig(300, kCodecId<RegTopKCodec>, 1000);
  reg_top_k.participation = 0.75f;
  reg_top_k.feedback.learning_rate = 0.02f;
  cases.push_back({"mean_reg_top_k_model_downlink", reg_top_k});
  protocol::RunConfig dq = qsgd;
  dq.codec = QsgdParams{.bucket = 64,
                        .schedule = QuantScheduleKind::kDq,
                        .bits_min = 2,
                        .bits_max = 6,
                        .dq_k = 2.0f,
                        .dq_rho = 0.99f};
  cases.push_back({"mean_qsgd_dq_schedule", dq});
  protocol::RunConfig majority = MajorityConfig(300, 1000);
  majority.downlink = protocol::DownlinkKind::kAggregate;
  cases.push_back({"majority_aggregate_downlink", majority});
  // Each robust rule sorts, selects or clips in its own Init-time scratch.
  for (const RobustRule rule : {RobustRule::kMedian, RobustRule::kTrimmedMean,
                                RobustRule::kMultiKrum, RobustRule::kCenteredClipping}) {
    protocol::RunConfig robust = qsgd;
    robust.robust = RobustParams{.rule = rule, .byzantine = 1};
    cases.push_back({"robust_mean", robust});
  }
  // A server optimizer steps from the change it keeps in the arena.
  protocol::RunConfig adam = top_k;
  adam.server_optimizer =
      ServerOptimizerParams{.kind = ServerOptimizerKind::kFedAdam, .learning_rate = 0.01f};
  cases.push_back({"mean_top_k_fedadam", adam});
  return cases;
}

TEST(ProtocolSteadyStateTest, RoundsDoNotAllocate) {
  for (const SteadyStateCase& test : Cases()) {
    protocol::ServerOptions options;
    options.workers = 4;
    options.quorum = 3;
    options.round_deadline_ns = kSecond;
    options.liveness_timeout_ns = 10 * kSecond;
    protocol::WorkerOptions worker_options;
    worker_options.heartbeat_interval_ns = 200 * kMs;
    Cluster cluster(test.config, options,
                    protocol::testing::Targets(4, test.config.layout.dimension()),
                    std::vector<float>(test.config.layout.dimension(), 1.0f), worker_options);
    cluster.net().SetLatencyAll(kMs);
    for (protocol::PeerId w = 1; w <= 4; ++w) cluster.net().SetComputeNsPerSample(w, kMs);
    cluster.Start();
    ASSERT_TRUE(cluster.RunUntilRound(10, 1000 * kSecond)) << test.name;
    // Round and reject logs are drained by drivers; draining allocates nothing either.
    protocol::RoundEvent round_event;
    protocol::RejectEvent reject_event;

    const std::size_t before = testing::HeapAllocationCount();
    for (std::uint32_t round = 11; round <= 210; ++round) {
      if (!cluster.RunUntilRound(round, 1000 * kSecond)) break;
      while (cluster.server().PollRoundEvent(round_event)) {
      }
      while (cluster.server().PollRejectEvent(reject_event)) {
      }
    }
    const std::size_t allocations = testing::HeapAllocationCount() - before;
    EXPECT_EQ(allocations, 0u) << test.name << " allocated in steady state";
    EXPECT_GE(cluster.server().round(), 210u) << test.name;
    EXPECT_EQ(cluster.server().counters().total_rejected(), 0u) << test.name;
    EXPECT_GT(cluster.server().counters().frames_received, 600u) << test.name;
  }
}

}  // namespace
}  // namespace edgesgd
