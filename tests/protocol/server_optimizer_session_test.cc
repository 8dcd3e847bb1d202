// Server optimizers in ServerSession (RunConfig::server_optimizer): the server moves its model by
// the optimizer's step from the aggregation component's change, keeps the optimizer's state in
// its arena and its checkpoints, and keeps the choice to itself.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "edgesgd/protocol/server_session.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

RunConfig WithServerOptimizer(RunConfig config, ServerOptimizerKind kind, float lr) {
  config.server_optimizer = ServerOptimizerParams{.kind = kind, .learning_rate = lr};
  return config;
}

std::vector<float> FinalModel(const RunConfig& config, std::size_t dimension) {
  Cluster cluster(config, FourWorkers(), Targets(4, dimension), std::vector<float>(dimension, 2.0f));
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  EXPECT_TRUE(cluster.server().status().ok()) << cluster.server().status().reason();
  return {cluster.server().model().begin(), cluster.server().model().end()};
}

TEST(ServerOptimizerSessionTest, ArenaBytesAreExactForEveryOptimizer) {
  constexpr std::size_t kDim = 100;
  const std::size_t plain = ServerSession::ArenaBytes(MeanConfig(kDim, kCodecId<TopKCodec>, 3),
                                                      FourWorkers());
  for (const ServerOptimizerKind kind :
       {ServerOptimizerKind::kFedAvg, ServerOptimizerKind::kFedAvgM,
        ServerOptimizerKind::kFedAdagrad, ServerOptimizerKind::kFedAdam,
        ServerOptimizerKind::kFedYogi}) {
    SCOPED_TRACE(std::string(ServerOptimizerName(kind)));
    const RunConfig config = WithServerOptimizer(MeanConfig(kDim, kCodecId<TopKCodec>, 3), kind, 0.5f);
    const std::size_t bytes = ServerSession::ArenaBytes(config, FourWorkers());
    // The change, plus m (and v for the adaptive kinds).
    const std::size_t vectors = kind == ServerOptimizerKind::kFedAvg     ? 1
                                : kind == ServerOptimizerKind::kFedAvgM ? 2
                                                                          : 3;
    EXPECT_EQ(bytes, plain + vectors * ArenaBytesFor<float>(kDim));
    ArenaStorage storage(bytes);
    ServerSession server;
    ASSERT_TRUE(server.Init(storage.arena, AllCodecs(), config, FourWorkers(),
                            std::vector<float>(kDim)).ok());
    EXPECT_EQ(storage.arena.used_bytes(), bytes);
  }
}

// FedAvgM without momentum at learning rate 1 is FedAvg: the path through the change buffer
// moves the model by exactly the bits the component would have added to it, for the mean and
// for a robust rule.
TEST(ServerOptimizerSessionTest, TheChangePathReproducesFedAvgBitForBit) {
  constexpr std::size_t kDim = 24;
  RunConfig mean = MeanConfig(kDim, kCodecId<TopKCodec>, 15);
  RunConfig median = mean;
  median.robust = RobustParams{.rule = RobustRule::kMedian};
  for (const RunConfig& plain : {mean, median}) {
    RunConfig through_optimizer = plain;
    through_optimizer.server_optimizer = ServerOptimizerParams{
        .kind = ServerOptimizerKind::kFedAvgM, .learning_rate = 1.0f, .beta1 = 0.0f};
    ASSERT_TRUE(ChangesFedAvg(through_optimizer.server_optimizer));
    const std::vector<float> expected = FinalModel(plain, kDim);
    EXPECT_EQ(FinalModel(through_optimizer, kDim), expected);
    EXPECT_NE(expected, std::vector<float>(kDim, 2.0f));
  }
}

// Every optimizer trains the quadratic problem to its optimum, the mean of the targets.
TEST(ServerOptimizerSessionTest, EveryOptimizerReachesTheOptimum) {
  constexpr std::size_t kDim = 16;
  const struct {
    ServerOptimizerKind kind;
    float lr;
  } cases[] = {{ServerOptimizerKind::kFedAvg, 0.5f},
               {ServerOptimizerKind::kFedAvgM, 0.1f},
               {ServerOptimizerKind::kFedAdagrad, 0.5f},
               {ServerOptimizerKind::kFedAdam, 0.02f},
               {ServerOptimizerKind::kFedYogi, 0.02f}};
  for (const auto& test : cases) {
    SCOPED_TRACE(std::string(ServerOptimizerName(test.kind)));
    const RunConfig config =
        WithServerOptimizer(MeanConfig(kDim, kCodecId<IdentityCodec>, 200), test.kind, test.lr);
    Cluster cluster(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 2.0f));
    const std::vector<float> start(kDim, 2.0f);
    const float initial = Distance(start, cluster.MeanTarget());
    cluster.Start();
    ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
    EXPECT_LT(Distance(cluster.server().model(), cluster.MeanTarget()), 0.05f * initial);
  }
}

// A FedAdam run stopped at round 12 and resumed from its checkpoint ends bit-identical to the
// uninterrupted run: the checkpoint keeps m and v. (The workers keep no state of their own here:
// a resumed run's workers start afresh.)
TEST(ServerOptimizerSessionTest, ACheckpointKeepsTheOptimizerState) {
  constexpr std::size_t kDim = 32;
  RunConfig config =
      WithServerOptimizer(MeanConfig(kDim, kCodecId<TopKCodec>, 25), ServerOptimizerKind::kFedAdam,
                          0.05f);
  config.feedback.kind = FeedbackKind::kNone;
  config.feedback.momentum = 0.0f;
  const std::vector<float> initial(kDim, 2.0f);
  const InterruptedRun run = RunWithCheckpointAt(config, initial, 12);
  const std::vector<std::byte>& state = run.checkpoint;
  CheckpointState stored;
  ASSERT_TRUE(ReadCheckpoint(state, config, 4, 0, stored).ok());
  ASSERT_EQ(stored.server_optimizer.size(), 2 * kDim * sizeof(float));
  const std::vector<float> resumed = ResumeToEnd(config, initial, state);
  ASSERT_EQ(resumed.size(), kDim);
  EXPECT_EQ(std::memcmp(resumed.data(), run.final_model.data(), 4 * kDim), 0);

  // The optimizer's state is covered by the checkpoint's checksum.
  std::vector<std::byte> damaged = state;
  const auto offset = static_cast<std::size_t>(stored.server_optimizer.data() - state.data());
  damaged[offset] ^= std::byte{1};
  Cluster other(config, FourWorkers(), Targets(4, kDim), initial);
  EXPECT_EQ(other.server().RestoreState(damaged), Status::DataLoss());

  // Resuming with another optimizer is refused, naming it.
  const RunConfig yogi = WithServerOptimizer(config, ServerOptimizerKind::kFedYogi, 0.05f);
  Cluster changed(yogi, FourWorkers(), Targets(4, kDim), initial);
  std::string_view differing;
  EXPECT_EQ(changed.server().RestoreState(state, &differing), Status::InvalidArgument());
  EXPECT_EQ(differing, "server_optimizer");
}

// The server optimizer is the server's: the Welcome leaves it out, and only the server checks
// it against the rest of the run.
TEST(ServerOptimizerSessionTest, TheOptimizerStaysWithTheServer) {
  const RunConfig config = WithServerOptimizer(MeanConfig(16, kCodecId<TopKCodec>, 5),
                                               ServerOptimizerKind::kFedYogi, 0.01f);
  ASSERT_TRUE(ValidateRunConfig(config).ok());
  ASSERT_TRUE(ValidateServerChoices(config).ok());
  RunConfig decoded;
  ASSERT_TRUE(FromWelcomeInfo(ToWelcomeInfo(config, 1, 4), decoded).ok());
  EXPECT_EQ(decoded.server_optimizer, ServerOptimizerParams{});
  EXPECT_EQ(decoded, NormalizedRunConfig(config));

  const auto reason = [](const RunConfig& c) {
    return std::string(ValidateServerChoices(c).reason());
  };
  RunConfig aggregate = config;
  aggregate.downlink = DownlinkKind::kAggregate;
  EXPECT_NE(reason(aggregate).find("model downlink"), std::string::npos);
  RunConfig vote = MajorityConfig(16, 5);
  vote.server_optimizer = config.server_optimizer;
  EXPECT_NE(reason(vote).find("majority vote"), std::string::npos);
  RunConfig bad_tau = config;
  bad_tau.server_optimizer.tau = 0.0f;
  EXPECT_NE(reason(bad_tau).find("tau"), std::string::npos);
  // Plain FedAvg fits every aggregation.
  RunConfig plain_vote = MajorityConfig(16, 5);
  EXPECT_TRUE(ValidateServerChoices(plain_vote).ok());
  ArenaStorage storage(1 << 16);
  ServerSession server;
  EXPECT_EQ(server.Init(storage.arena, AllCodecs(), aggregate, FourWorkers(),
                        std::vector<float>(16)),
            Status::InvalidArgument());
}

}  // namespace
}  // namespace edgesgd::protocol::testing
