// ServerSession checkpoints: SaveState/RestoreState round-trip the committed state (round, model,
// cumulative counters, the re-compressed downlink's residual), a restored server resumes at the
// saved round and finishes the run, and damaged or foreign checkpoints are refused with a reason
// (a foreign one naming the setting that differs), leaving the session untouched.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "edgesgd/protocol/checkpoint.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

ServerOptions FourWorkers() {
  ServerOptions options;
  options.workers = 4;
  options.quorum = 4;
  return options;
}

std::vector<std::byte> Save(const ServerSession& server) {
  std::vector<std::byte> bytes(server.StateBytes());
  const Result<std::size_t> written = server.SaveState(bytes);
  EXPECT_TRUE(written.ok());
  EXPECT_EQ(written.value(), bytes.size());
  return bytes;
}

TEST(ServerCheckpointTest, RestoredServerHoldsTheSavedRoundModelAndCounters) {
  constexpr std::size_t kDim = 16;
  const RunConfig config = MajorityConfig(kDim, 40);
  Cluster cluster(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 1.0f));
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilRound(12, 1000 * kSecond));
  ASSERT_FALSE(cluster.server().Finished());
  const std::vector<std::byte> state = Save(cluster.server());

  ArenaStorage storage(ServerSession::ArenaBytes(config, FourWorkers()));
  ServerSession restored;
  ASSERT_TRUE(
      restored.Init(storage.arena, AllCodecs(), config, FourWorkers(), std::vector<float>(kDim))
          .ok());
  const Status check = restored.RestoreState(state);
  ASSERT_TRUE(check.ok()) << check.reason();
  EXPECT_EQ(restored.round(), cluster.server().round());
  ASSERT_EQ(restored.model().size(), kDim);
  EXPECT_EQ(std::memcmp(restored.model().data(), cluster.server().model().data(), kDim * 4), 0);
  EXPECT_EQ(restored.counters().bytes_received, cluster.server().counters().bytes_received);
  EXPECT_EQ(restored.counters().rounds_completed, cluster.server().counters().rounds_completed);
  // Saving the restored state gives the same bytes.
  const std::vector<std::byte> again = Save(restored);
  ASSERT_EQ(again.size(), state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    ASSERT_EQ(again[i], state[i]) << "byte " << i;
  }
}

TEST(ServerCheckpointTest, ResumedServerFinishesTheRemainingRounds) {
  constexpr std::size_t kDim = 16;
  const RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 30);
  std::vector<std::byte> state;
  {
    Cluster first(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 2.0f));
    first.net().SetLatencyAll(kMs);
    first.Start();
    ASSERT_TRUE(first.RunUntilRound(20, 1000 * kSecond));
    ASSERT_EQ(first.server().round(), 20u);
    state = Save(first.server());
  }
  // A new cluster whose server resumes from the checkpoint: only rounds 20..29 remain.
  Cluster second(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 0.0f));
  ASSERT_TRUE(second.server().RestoreState(state).ok());
  second.net().SetLatencyAll(kMs);
  second.Start();
  ASSERT_TRUE(second.RunUntilFinished(1000 * kSecond));
  EXPECT_EQ(second.server().round(), 30u);
  EXPECT_EQ(second.server().counters().rounds_completed, 30u);
  const std::vector<RoundEvent> rounds = second.DrainRounds();
  ASSERT_EQ(rounds.size(), 10u);
  EXPECT_EQ(rounds.front().round, 20u);
}

// With stateless workers (no error feedback, no momentum) the server's downlink residual is the
// run's only state across rounds besides the model: a resumed run ends bit-identical to an
// uninterrupted one only if the checkpoint carried it.
TEST(ServerCheckpointTest, RecompressedDownlinkResidualSurvivesAResume) {
  constexpr std::size_t kDim = 24;
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 30);
  config.downlink = DownlinkKind::kAggregate;
  config.feedback.kind = FeedbackKind::kNone;
  config.feedback.momentum = 0.0f;
  ASSERT_TRUE(RecompressesDownlink(config));
  const std::vector<float> initial(kDim, 2.0f);
  std::vector<std::byte> state;
  std::vector<float> uninterrupted;
  {
    Cluster cluster(config, FourWorkers(), Targets(4, kDim), initial);
    cluster.net().SetLatencyAll(kMs);
    cluster.Start();
    ASSERT_TRUE(cluster.RunUntilRound(12, 1000 * kSecond));
    state = Save(cluster.server());
    ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
    uninterrupted.assign(cluster.server().model().begin(), cluster.server().model().end());
  }
  // The checkpoint holds the model and the residual: d floats each.
  ASSERT_EQ(state.size(), CheckpointBytes(config, 4, 4 * kDim));
  CheckpointState stored;
  ASSERT_TRUE(ReadCheckpoint(state, config, 4, 4 * kDim, stored).ok());
  ASSERT_EQ(stored.aggregation.size(), 4 * kDim);
  std::vector<float> residual(kDim);
  std::memcpy(residual.data(), stored.aggregation.data(), 4 * kDim);
  EXPECT_TRUE(std::any_of(residual.begin(), residual.end(), [](float v) { return v != 0.0f; }))
      << "top_k of 25 % left nothing behind: the test would not see a lost residual";

  Cluster resumed(config, FourWorkers(), Targets(4, kDim), initial);
  const Status check = resumed.server().RestoreState(state);
  ASSERT_TRUE(check.ok()) << check.reason();
  EXPECT_EQ(Save(resumed.server()), state);
  resumed.net().SetLatencyAll(kMs);
  resumed.Start();
  ASSERT_TRUE(resumed.RunUntilFinished(1000 * kSecond));
  ASSERT_EQ(resumed.server().model().size(), kDim);
  EXPECT_EQ(std::memcmp(resumed.server().model().data(), uninterrupted.data(), 4 * kDim), 0);

  // The same checkpoint does not fit a run that broadcasts the model, and says so.
  RunConfig model_downlink = config;
  model_downlink.downlink = DownlinkKind::kModel;
  Cluster other(model_downlink, FourWorkers(), Targets(4, kDim), initial);
  std::string_view differing;
  EXPECT_EQ(other.server().RestoreState(state, &differing).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(differing, "downlink");
}

TEST(ServerCheckpointTest, DamagedOrForeignCheckpointsAreRefused) {
  constexpr std::size_t kDim = 8;
  const RunConfig config = MajorityConfig(kDim, 20);
  const std::vector<float> initial(kDim, 0.5f);
  ArenaStorage source_storage(ServerSession::ArenaBytes(config, FourWorkers()));
  ServerSession source;
  ASSERT_TRUE(source.Init(source_storage.arena, AllCodecs(), config, FourWorkers(), initial).ok());
  const std::vector<std::byte> state = Save(source);

  // The restore's status, and in `differing` the setting it names.
  std::string_view differing;
  const auto restore = [&](const RunConfig& run, const ServerOptions& options,
                           std::span<const std::byte> bytes) {
    ArenaStorage storage(ServerSession::ArenaBytes(run, options));
    ServerSession server;
    EXPECT_TRUE(server
                    .Init(storage.arena, AllCodecs(), run, options,
                          std::vector<float>(run.layout.dimension(), 0.5f))
                    .ok());
    differing = {};
    return server.RestoreState(bytes, &differing);
  };
  const auto expect_damaged = [&](std::span<const std::byte> bytes, const char* what) {
    const Status check = restore(config, FourWorkers(), bytes);
    EXPECT_EQ(check, Status::DataLoss()) << what;
    EXPECT_NE(std::string_view(check.reason()).find("damaged"), std::string_view::npos)
        << what << ": " << check.reason();
  };
  EXPECT_TRUE(restore(config, FourWorkers(), state).ok());

  CheckpointState stored;
  ASSERT_TRUE(ReadCheckpoint(state, config, 4, 0, stored).ok());
  const auto model_offset = static_cast<std::size_t>(stored.model.data() - state.data());
  std::vector<std::byte> flipped = state;
  flipped[model_offset + 3] ^= std::byte{0x40};  // a model bit
  expect_damaged(flipped, "a flipped model bit");
  expect_damaged(std::span(state).first(state.size() - 1), "one byte short");
  expect_damaged(std::span(state).first(12), "the header only");
  expect_damaged(std::vector<std::byte>(state.size()), "zeros");

  // Another format version is refused as such, before anything else is read.
  for (const std::uint32_t version : {kCheckpointVersion - 1, kCheckpointVersion + 1}) {
    std::vector<std::byte> other_version = state;
    std::memcpy(other_version.data() + 8, &version, sizeof(version));  // after the magic
    const Status check = restore(config, FourWorkers(), other_version);
    EXPECT_EQ(check, Status::DataLoss()) << version;
    EXPECT_NE(std::string_view(check.reason()).find("version"), std::string_view::npos)
        << check.reason();
  }

  RunConfig other_seed = config;
  other_seed.seed += 1;
  EXPECT_EQ(restore(other_seed, FourWorkers(), state), Status::InvalidArgument());
  EXPECT_EQ(differing, "seed");
  ServerOptions three = FourWorkers();
  three.workers = 3;
  three.quorum = 3;
  EXPECT_EQ(restore(config, three, state), Status::InvalidArgument());
  EXPECT_EQ(differing, "workers");
  EXPECT_EQ(restore(MajorityConfig(kDim + 1, 20), FourWorkers(), state), Status::InvalidArgument());
  EXPECT_EQ(differing, "model");

  // Not after Start: the run has begun from another state.
  ArenaStorage storage(ServerSession::ArenaBytes(config, FourWorkers()));
  ServerSession started;
  ASSERT_TRUE(started.Init(storage.arena, AllCodecs(), config, FourWorkers(), initial).ok());
  started.Start(0);
  EXPECT_EQ(started.RestoreState(state).code(), StatusCode::kFailedPrecondition);
}

TEST(ServerCheckpointTest, CheckpointOfAFinishedRunRestoresAsFinished) {
  constexpr std::size_t kDim = 8;
  const RunConfig config = MajorityConfig(kDim, 5);
  Cluster cluster(config, FourWorkers(), Targets(4, kDim), std::vector<float>(kDim, 1.0f));
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  const std::vector<std::byte> state = Save(cluster.server());
  ArenaStorage storage(ServerSession::ArenaBytes(config, FourWorkers()));
  ServerSession restored;
  ASSERT_TRUE(
      restored.Init(storage.arena, AllCodecs(), config, FourWorkers(), std::vector<float>(kDim))
          .ok());
  ASSERT_TRUE(restored.RestoreState(state).ok());
  EXPECT_TRUE(restored.Finished());
  EXPECT_EQ(restored.round(), 5u);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
