// SCAFFOLD in the parameter-server sessions: the scaffold aggregation component (an update and
// its control change accepted together, c the mean of the devices' changes), the worker's
// corrected steps and its Update's second payload, the Join's feature bit, and whole runs: c
// stays the mean of every device's c_i, and SCAFFOLD removes the drift FedAvg's local steps
// leave on devices of different curvatures, with its changes sent whole or compressed.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "edgesgd/protocol/aggregation_registry.h"
#include "edgesgd/protocol/checkpoint.h"
#include "protocol/frame_factory.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

RunConfig ScaffoldConfig(std::size_t dimension, CodecId codec, std::uint32_t rounds) {
  RunConfig config = MeanConfig(dimension, codec, rounds);
  config.feedback.local_steps = 3;
  config.scaffold = true;
  return config;
}

// A component of `config` in its own arena.
struct Component {
  explicit Component(const RunConfig& run, std::uint32_t workers)
      : config(run),
        descriptor(FindAggregation(run)),
        storage(descriptor == nullptr ? 0 : descriptor->arena_bytes(run, workers)) {
    if (descriptor == nullptr) {
      ADD_FAILURE() << "no component serves the run";
      return;
    }
    const Result<Aggregation*> created =
        descriptor->create(storage.arena, {&AllCodecs(), &config, workers});
    EXPECT_TRUE(created.ok()) << created.status().reason();
    if (created.ok()) aggregation = created.value();
  }
  RunConfig config;
  const AggregationDescriptor* descriptor;
  ArenaStorage storage;
  Aggregation* aggregation = nullptr;
};

TEST(ScaffoldSessionTest, AnUpdateAndItsChangeAreAcceptedTogether) {
  constexpr std::size_t kDim = 6;
  constexpr std::uint32_t kWorkers = 4;
  Component box(ScaffoldConfig(kDim, kCodecId<IdentityCodec>, 5), kWorkers);
  ASSERT_NE(box.aggregation, nullptr);
  Aggregation& scaffold = *box.aggregation;
  const CodecParams identity = IdentityParams{};
  const CodecContext context{42, 0, 1};
  const std::vector<float> update = PseudoRandom(kDim, 1, 1.0f);
  const std::vector<float> change = PseudoRandom(kDim, 2, 1.0f);
  std::vector<float> poisoned = change;
  poisoned[3] = std::numeric_limits<float>::quiet_NaN();
  const auto dense = [](const std::vector<float>& values) {
    PayloadView view;
    view.values = values;
    return view;
  };
  ASSERT_EQ(scaffold.ServerControl().size(), kDim);

  scaffold.BeginRound(0);
  // Without its change, or with a change that is not finite, nothing is added.
  EXPECT_EQ(scaffold.Add(identity, dense(update), context, {}), Status::InvalidArgument());
  EXPECT_EQ(
      scaffold.AddWithControl(identity, dense(update), identity, dense(poisoned), context, {}),
      Status::DataLoss());
  std::vector<float> model(kDim, 0.0f);
  EXPECT_EQ(scaffold.Apply({}, context, model), Status::FailedPrecondition());
  // A bad update leaves its (good) change unkept.
  const std::vector<float> short_update(kDim - 1, 1.0f);
  EXPECT_FALSE(
      scaffold.AddWithControl(identity, dense(short_update), identity, dense(change), context, {})
          .ok());
  ASSERT_TRUE(
      scaffold.AddWithControl(identity, dense(update), identity, dense(change), context, {}).ok());
  ASSERT_TRUE(scaffold.Apply({}, context, model).ok());
  for (std::size_t i = 0; i < kDim; ++i) {
    EXPECT_EQ(model[i], -update[i]);
    // c moves by the change over the federation's N = 4 devices, not over the round's one.
    EXPECT_FLOAT_EQ(scaffold.ServerControl()[i], change[i] / kWorkers);
  }
  // The components without control variates refuse a change.
  Component mean(MeanConfig(kDim, kCodecId<IdentityCodec>, 5), kWorkers);
  mean.aggregation->BeginRound(0);
  EXPECT_EQ(mean.aggregation->AddWithControl(identity, dense(update), identity, dense(change),
                                             context, {}),
            Status::InvalidArgument());
  EXPECT_TRUE(mean.aggregation->ServerControl().empty());
}

// The worker side, driven with frames the test crafts as the server.
class ScaffoldWorkerTest : public ::testing::Test {
 protected:
  static constexpr std::size_t kDim = 16;
  static constexpr std::uint32_t kId = 2;

  void SetUp() override {
    config_ = ScaffoldConfig(kDim, kCodecId<TopKCodec>, 10);
    storage_ = std::make_unique<ArenaStorage>(WorkerSession::ArenaBytes(config_));
    problem_.target = PseudoRandom(kDim, 11, 1.0f);
    ASSERT_TRUE(worker_.Init(storage_->arena, QuadraticWorkerOptions(kId, problem_)).ok());
  }

  std::vector<Frame> Poll() {
    std::vector<Frame> frames;
    OutgoingFrame out;
    while (worker_.PollFrame(out)) frames.emplace_back(out.bytes);
    return frames;
  }

  // A model broadcast of round `round`, carrying `control` as c unless it is empty.
  Frame ModelFrame(std::uint32_t round, std::span<const float> model,
                   std::span<const float> control) {
    std::vector<std::uint64_t> buffer(1 << 12);
    wire::FrameBuilder builder(std::as_writable_bytes(std::span(buffer)));
    const Result<PayloadSpans> spans = builder.BeginPayloadFrame(
        {kServerPeer, round, round + 1},
        wire::PayloadMessage::ModelBroadcast({wire::BroadcastContent::kModel, 4}), ModelCodec(),
        config_.layout);
    EXPECT_TRUE(spans.ok());
    std::copy(model.begin(), model.end(), spans.value().values.begin());
    if (!control.empty()) {
      const Result<PayloadSpans> reserved =
          builder.ReserveControlPayload(ModelCodec(), config_.layout);
      EXPECT_TRUE(reserved.ok());
      std::copy(control.begin(), control.end(), reserved.value().values.begin());
    }
    const Result<std::span<const std::byte>> frame = builder.FinishPayloadFrame();
    EXPECT_TRUE(frame.ok());
    return Frame(frame.value());
  }

  RunConfig config_;
  std::unique_ptr<ArenaStorage> storage_;
  QuadraticProblem problem_;
  WorkerSession worker_;
  FrameFactory factory_;
};

TEST_F(ScaffoldWorkerTest, TheUpdateCarriesTheChangeOfTheDevicesControl) {
  worker_.Start(0);
  const std::vector<Frame> joins = Poll();
  ASSERT_EQ(joins.size(), 1u);
  EXPECT_NE(joins[0].View().join.features & wire::kFeatureScaffold, 0u);
  worker_.OnFrame(kServerPeer, factory_.Welcome(ToWelcomeInfo(config_, kId, 4)).bytes(), 0);
  ASSERT_TRUE(worker_.configured());
  ASSERT_NE(worker_.scaffold(), nullptr);
  ASSERT_EQ(worker_.scaffold()->device_control().size(), kDim);
  Poll();

  // A model without c is refused whole: no update, and the model is not taken.
  const std::vector<float> model(kDim, 0.5f);
  worker_.OnFrame(kServerPeer, ModelFrame(0, model, {}).bytes(), 1);
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(worker_.counters().bad_payloads, 1u);
  EXPECT_EQ(worker_.model_round(), WorkerSession::kNoRound);

  // With c: the steps are corrected by c - c_i (c_i = 0 in the first round), and the Update's
  // second payload is the compressed change, which c_i now holds.
  const std::vector<float> control = PseudoRandom(kDim, 5, 0.3f);
  worker_.OnFrame(kServerPeer, ModelFrame(0, model, control).bytes(), 2);
  const std::vector<Frame> updates = Poll();
  ASSERT_EQ(updates.size(), 1u);
  const wire::FrameView update = updates[0].View();
  ASSERT_EQ(update.kind, wire::MessageKind::kUpdate);
  ASSERT_TRUE(update.has_control);
  EXPECT_EQ(update.control.codec, CodecIdOf(config_.codec));
  std::vector<float> decoded(kDim, 0.0f);
  const std::size_t scratch_bytes = CodecScratchBytes(config_.codec, config_.layout);
  ArenaStorage scratch(scratch_bytes + kArenaAlignment);
  const Result<std::span<std::byte>> lent = scratch.arena.AllocateBytes(scratch_bytes);
  ASSERT_TRUE(lent.ok()) << lent.status().reason();
  ASSERT_TRUE(AllCodecs()
                  .DecodeAdd(config_.codec, config_.layout, {config_.seed, 0, kId},
                             update.control.view, 1.0f, decoded, lent.value())
                  .ok());
  const std::span<const float> device_control = worker_.scaffold()->device_control();
  EXPECT_EQ(std::vector<float>(device_control.begin(), device_control.end()), decoded);
  EXPECT_EQ(worker_.scaffold()->server_control()[7], control[7]);

  // The corrected steps: y <- y - lr * (m) with m the heavy ball of g + c on x - target, which
  // differs from the uncorrected run's by c's pull. Replaying them by hand gives the delta.
  const FeedbackParams& feedback = config_.feedback;
  std::vector<float> y = model;
  std::vector<float> momentum(kDim, 0.0f);
  std::vector<float> delta(kDim, 0.0f);
  for (std::uint32_t step = 0; step < feedback.local_steps; ++step) {
    for (std::size_t i = 0; i < kDim; ++i) {
      const float g = (y[i] - problem_.target[i]) + (control[i] - 0.0f);
      momentum[i] = feedback.momentum * momentum[i] + g;
      y[i] -= feedback.learning_rate * momentum[i];
      delta[i] += feedback.learning_rate * momentum[i];
    }
  }
  // q = delta / (H lr) - c; top_k keeps its largest quarter, which c_i holds exactly.
  const float scale = static_cast<float>(feedback.local_steps) * feedback.learning_rate;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < kDim; ++i) {
    if (decoded[i] == 0.0f) continue;
    ++kept;
    EXPECT_NEAR(decoded[i], delta[i] / scale - control[i], 1e-5f) << i;
  }
  EXPECT_EQ(kept, kDim / 4);
}

TEST(ScaffoldSessionTest, ADeviceWithoutScaffoldIsRefused) {
  const RunConfig config = ScaffoldConfig(8, kCodecId<TopKCodec>, 5);
  wire::JoinInfo join;
  join.features = wire::kFeatureDifferentialPrivacy;
  EXPECT_EQ(CheckWorkerCanRun(config, join), Status::FailedPrecondition());
  join.features |= wire::kFeatureScaffold;
  EXPECT_TRUE(CheckWorkerCanRun(config, join).ok());
}

// The server's c, read from its checkpoint.
std::vector<float> ServerControlOf(ServerSession& server, const RunConfig& config) {
  std::vector<std::byte> bytes(server.StateBytes());
  EXPECT_TRUE(server.SaveState(bytes).ok());
  const std::size_t d = config.layout.dimension();
  CheckpointState state;
  EXPECT_TRUE(ReadCheckpoint(bytes, config, 4, d * sizeof(float), state).ok());
  std::vector<float> control(d, 0.0f);
  if (state.aggregation.size() == d * sizeof(float)) {
    std::memcpy(control.data(), state.aggregation.data(), state.aggregation.size());
  }
  return control;
}

// Sampled rounds and a compressed change: c stays the mean of all four devices' c_i, and a
// server restored from its checkpoint holds the same c.
TEST(ScaffoldSessionTest, TheServersControlIsTheMeanOfTheDevices) {
  constexpr std::size_t kDim = 24;
  for (const CodecId codec : {kCodecId<TopKCodec>, kCodecId<RandomBlockCodec>}) {
    RunConfig config = ScaffoldConfig(kDim, codec, 12);
    config.participation = 0.5f;
    ServerOptions options = FourWorkers();
    options.quorum = 2;
    const std::vector<float> initial(kDim, 1.0f);
    Cluster cluster(config, options, Targets(4, kDim), initial);
    cluster.net().SetLatencyAll(kMs);
    cluster.Start();
    ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
    ASSERT_EQ(cluster.server().counters().rounds_completed, 12u);
    const std::vector<float> control = ServerControlOf(cluster.server(), config);
    double largest = 0.0;
    for (std::size_t i = 0; i < kDim; ++i) {
      float mean = 0.0f;
      for (PeerId id = 1; id <= 4; ++id) mean += cluster.worker(id).scaffold()->device_control()[i];
      mean /= 4.0f;
      EXPECT_NEAR(control[i], mean, 1e-5f) << i;
      largest = std::max(largest, std::fabs(static_cast<double>(control[i])));
    }
    EXPECT_GT(largest, 0.01) << "c stayed near zero: the test would not see a lost change";
  }
}

// Device i's loss is a_i / 2 * |x - t_i|^2: curvatures 0.2 and 2, so local steps pull the
// devices towards their own optimum at different speeds (client drift).
struct CurvedProblem {
  float curvature = 1.0f;
  std::vector<float> target;
};
Status CurvedGradient(void* user, std::span<const float> point, std::uint32_t, std::uint32_t,
                      std::span<float> gradient) {
  const auto* problem = static_cast<const CurvedProblem*>(user);
  for (std::size_t i = 0; i < point.size(); ++i) {
    gradient[i] = problem->curvature * (point[i] - problem->target[i]);
  }
  return Status::Ok();
}

// The distance to the federation's optimum sum a_i t_i / sum a_i after a run of `config`.
float DistanceAfterRun(const RunConfig& config) {
  const std::size_t d = config.layout.dimension();
  std::vector<CurvedProblem> problems(4);
  std::vector<float> optimum(d, 0.0f);
  float curvatures = 0.0f;
  for (std::size_t w = 0; w < problems.size(); ++w) {
    problems[w].curvature = w % 2 == 0 ? 0.2f : 2.0f;
    problems[w].target = PseudoRandom(d, static_cast<std::uint32_t>(100 + w), 1.0f);
    curvatures += problems[w].curvature;
    for (std::size_t i = 0; i < d; ++i) optimum[i] += problems[w].curvature * problems[w].target[i];
  }
  for (float& value : optimum) value /= curvatures;
  Cluster cluster(config, FourWorkers(), Targets(4, d), std::vector<float>(d, 0.0f), {},
                  [&problems](PeerId id, WorkerOptions& options) {
                    options.gradient = &CurvedGradient;
                    options.user = &problems[id - 1];
                  });
  cluster.Start();
  EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  return Distance(cluster.server().model(), optimum);
}

// Ten local steps a round: FedAvg settles 0.26 from the optimum, whatever the codec, where
// SCAFFOLD reaches it, with its updates and changes sent whole or as random blocks of a quarter
// (which need more rounds).
TEST(ScaffoldSessionTest, RemovesTheDriftOfLocalSteps) {
  constexpr std::size_t kDim = 32;
  for (const CodecId codec : {kCodecId<IdentityCodec>, kCodecId<RandomBlockCodec>}) {
    RunConfig fedavg = MeanConfig(kDim, codec, 1500);
    fedavg.feedback.local_steps = 10;
    fedavg.feedback.learning_rate = 0.1f;
    fedavg.feedback.momentum = 0.0f;
    RunConfig scaffold = fedavg;
    scaffold.scaffold = true;
    EXPECT_GT(DistanceAfterRun(fedavg), 0.2f) << CodecName(fedavg.codec);
    EXPECT_LT(DistanceAfterRun(scaffold), 1e-4f) << CodecName(fedavg.codec);
  }
}

}  // namespace
}  // namespace edgesgd::protocol::testing
