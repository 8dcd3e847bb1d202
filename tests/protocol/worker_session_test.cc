// WorkerSession driven directly with frames a test crafts as the server: joining and retries,
// Welcome checks, updates computed into frames, re-sends, stale broadcasts, resync after an
// aggregate that does not fit, a sign-flipped gradient's vote, heartbeats, Leave and every
// counter.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/codecs/qsgd.h"
#include "protocol/frame_factory.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

constexpr std::size_t kDim = 40;  // two sign words per vote, the second with 24 padding bits
constexpr std::uint32_t kId = 3;

class WorkerSessionTest : public ::testing::Test {
 protected:
  void Make(const RunConfig& config, std::size_t extra_arena = 0, WorkerOptions options = {}) {
    config_ = config;
    storage_ = std::make_unique<ArenaStorage>(WorkerSession::ArenaBytes(config) + extra_arena);
    problem_.target = PseudoRandom(config.layout.dimension(), 11, 1.0f);
    options.device_id = kId;
    options.gradient = &QuadraticGradient;
    options.user = &problem_;
    if (options.codecs == nullptr) options.codecs = &AllCodecs();
    const Status init = worker_.Init(storage_->arena, options);
    ASSERT_TRUE(init.ok()) << init.reason();
  }

  // Everything the worker wants to send now.
  std::vector<std::pair<Frame, std::uint64_t>> Poll() {
    std::vector<std::pair<Frame, std::uint64_t>> frames;
    OutgoingFrame out;
    while (worker_.PollFrame(out)) {
      EXPECT_EQ(out.to, kServerPeer);
      frames.emplace_back(Frame(out.bytes), out.work_samples);
    }
    return frames;
  }

  void Feed(const Frame& frame, TimeNs now = 0, PeerId from = kServerPeer) {
    worker_.OnFrame(from, frame.bytes(), now);
  }

  Frame WelcomeFrame(std::uint32_t id = kId) {
    return factory_.Welcome(ToWelcomeInfo(config_, id, 4));
  }

  Frame ModelFrame(std::uint32_t round, std::span<const float> model) {
    return factory_.Broadcast(round, wire::BroadcastContent::kModel, CodecParams{}, config_.layout,
                              model, config_.seed);
  }

  // Start, take the Join, deliver the Welcome.
  void Join() {
    worker_.Start(0);
    ASSERT_EQ(Poll().size(), 1u);
    Feed(WelcomeFrame());
    ASSERT_TRUE(worker_.configured());
    EXPECT_TRUE(Poll().empty());
  }

  RunConfig config_;
  std::unique_ptr<ArenaStorage> storage_;
  QuadraticProblem problem_;
  WorkerSession worker_;
  FrameFactory factory_;
};

TEST_F(WorkerSessionTest, JoinsAndRetriesUntilWelcomed) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  EXPECT_EQ(worker_.NextWakeup(), kNever);
  worker_.Start(0);
  auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  wire::FrameView join = frames[0].first.View();
  ASSERT_EQ(join.kind, wire::MessageKind::kJoin);
  EXPECT_EQ(join.header.sender, kId);
  EXPECT_EQ(join.join.codecs, AllCodecs().Mask());
  EXPECT_EQ(join.join.architecture, wire::HostArchitecture());
  EXPECT_GE(join.join.memory_bytes, WorkerSession::WelcomeArenaBytes(config_));
  EXPECT_EQ(frames[0].second, 0u);
  EXPECT_EQ(worker_.NextWakeup(), kSecond);

  worker_.OnTimer(kSecond);
  frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].first.View().kind, wire::MessageKind::kJoin);
  EXPECT_EQ(frames[0].first.View().header.sequence, join.header.sequence + 1);
  EXPECT_EQ(worker_.counters().joins_sent, 2u);

  Feed(WelcomeFrame(), kSecond + 5);
  EXPECT_TRUE(worker_.configured());
  EXPECT_EQ(worker_.phase(), WorkerPhase::kTraining);
  EXPECT_EQ(worker_.config(), NormalizedRunConfig(config_));
  EXPECT_EQ(worker_.id(), kId);
  // No more joins; the next wakeup is the first heartbeat.
  EXPECT_EQ(worker_.NextWakeup(), kSecond + 5 + WorkerOptions{}.heartbeat_interval_ns);
  worker_.OnTimer(3 * kSecond);
  EXPECT_TRUE(Poll().empty());
  // Memory: exactly what the documented bounds say.
  EXPECT_EQ(storage_->arena.used_bytes(), WorkerSession::ArenaBytes(config_));
}

TEST_F(WorkerSessionTest, ChecksEveryWelcome) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  worker_.Start(0);
  Poll();
  // Another worker's id, the server itself as the id: not for this worker, which keeps joining.
  Feed(WelcomeFrame(kId + 1));
  Feed(WelcomeFrame(0));
  EXPECT_EQ(worker_.counters().rejected_welcomes, 2u);
  EXPECT_FALSE(worker_.configured());
  EXPECT_EQ(worker_.phase(), WorkerPhase::kJoining);
  // A Welcome not from the server.
  Feed(WelcomeFrame(), 0, 2);
  EXPECT_EQ(worker_.counters().unknown_sender, 1u);

  Feed(WelcomeFrame());
  ASSERT_TRUE(worker_.configured());
  // The same Welcome again is fine; a different run, or an invalid one, is not and changes
  // nothing.
  Feed(WelcomeFrame());
  EXPECT_EQ(worker_.counters().rejected_welcomes, 2u);
  RunConfig other = config_;
  other.rounds = 11;
  Feed(factory_.Welcome(ToWelcomeInfo(other, kId, 4)));
  RunConfig invalid = config_;
  invalid.feedback.local_steps = kMaxLocalSteps + 1;
  Feed(factory_.Welcome(ToWelcomeInfo(invalid, kId, 4)));
  EXPECT_EQ(worker_.counters().rejected_welcomes, 4u);
  EXPECT_EQ(worker_.config().rounds, 10u);
  EXPECT_EQ(worker_.phase(), WorkerPhase::kTraining);
}

// A well-formed Welcome for this worker whose run is invalid or outside the bounds a worker
// accepts from the wire: the worker leaves at once, giving kRefusedRun, and computes nothing,
// whatever broadcast follows. (local_steps = 134217729 was found by fuzzing: before the bound,
// the broadcast after it ran that many gradient steps inside one OnFrame.)
TEST_F(WorkerSessionTest, RefusesAWelcomeOutsideItsBoundsAndLeaves) {
  const RunConfig valid = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  struct Case {
    const char* name;
    RunConfig config;
    std::uint32_t workers;
  };
  std::vector<Case> cases;
  for (const std::uint32_t steps : {kMaxLocalSteps + 1, 134217729u, 0xFFFFFFFFu}) {
    RunConfig config = valid;
    config.feedback.local_steps = steps;
    cases.push_back({"local steps", config, 4});
  }
  RunConfig big_batch = valid;
  big_batch.batch = kMaxBatch + 1;
  cases.push_back({"batch", big_batch, 4});
  RunConfig big_round = valid;
  big_round.batch = kMaxBatch;
  big_round.feedback.local_steps = 17;  // 17 * 2^20 > 2^24 samples
  cases.push_back({"local steps times batch", big_round, 4});
  RunConfig majority_over_top_k = valid;
  majority_over_top_k.aggregation = AggregationKind::kMajority;
  cases.push_back({"majority vote over top_k", majority_over_top_k, 4});
  cases.push_back({"worker count", valid, kMaxWorkers + 1});

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    QuadraticProblem problem;
    problem.target = PseudoRandom(kDim, 11, 1.0f);
    ArenaStorage storage(WorkerSession::ArenaBytes(valid));
    WorkerSession worker;
    ASSERT_TRUE(worker.Init(storage.arena, QuadraticWorkerOptions(kId, problem)).ok());
    const auto poll = [&worker] {
      std::vector<Frame> frames;
      OutgoingFrame out;
      while (worker.PollFrame(out)) frames.emplace_back(out.bytes);
      return frames;
    };
    worker.Start(0);
    poll();
    worker.OnFrame(kServerPeer, factory_.Welcome(ToWelcomeInfo(c.config, kId, c.workers)).bytes(),
                   0);
    EXPECT_TRUE(worker.Finished());
    EXPECT_FALSE(worker.configured());
    EXPECT_EQ(worker.status(), Status::InvalidArgument());
    EXPECT_GT(std::strlen(worker.failure_reason()), 0u);
    EXPECT_EQ(worker.counters().rejected_welcomes, 1u);
    const auto frames = poll();
    ASSERT_EQ(frames.size(), 1u);
    const wire::FrameView leave = frames[0].View();
    ASSERT_EQ(leave.kind, wire::MessageKind::kLeave);
    EXPECT_EQ(leave.leave.reason, wire::LeaveReason::kRefusedRun);
    // The broadcast that used to start the unbounded work finds a finished worker.
    const std::vector<float> model = PseudoRandom(kDim, 5, 1.0f);
    worker.OnFrame(kServerPeer,
                   factory_
                       .Broadcast(0, wire::BroadcastContent::kModel, CodecParams{},
                                  valid.layout, model, valid.seed)
                       .bytes(),
                   0);
    EXPECT_TRUE(poll().empty());
    EXPECT_EQ(problem.calls, 0u);
    EXPECT_EQ(worker.NextWakeup(), kNever);
  }
}

TEST_F(WorkerSessionTest, ArenaTooSmallLeavesWithAFailure) {
  const RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  config_ = config;
  storage_ = std::make_unique<ArenaStorage>(WorkerSession::InitArenaBytes() + 256);
  ASSERT_TRUE(worker_.Init(storage_->arena, QuadraticWorkerOptions(kId, problem_)).ok());
  worker_.Start(0);
  Poll();
  Feed(WelcomeFrame());
  EXPECT_TRUE(worker_.Finished());
  EXPECT_EQ(worker_.status(), Status::ResourceExhausted());
  EXPECT_NE(std::string(worker_.failure_reason()).find("arena"), std::string::npos);
  const auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  const wire::FrameView leave = frames[0].first.View();
  ASSERT_EQ(leave.kind, wire::MessageKind::kLeave);
  EXPECT_EQ(leave.leave.reason, wire::LeaveReason::kFailure);
  EXPECT_EQ(leave.header.sender, kId);
}

TEST_F(WorkerSessionTest, ErrorWhileJoiningEndsTheSessionWithTheServersReason) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  worker_.Start(0);
  Poll();
  Feed(factory_.Error(kServerPeer, StatusCode::kResourceExhausted, "worker memory is too small"));
  EXPECT_TRUE(worker_.Finished());
  EXPECT_EQ(worker_.status(), Status::ResourceExhausted());
  EXPECT_STREQ(worker_.failure_reason(), "worker memory is too small");
  EXPECT_EQ(worker_.NextWakeup(), kNever);
}

TEST_F(WorkerSessionTest, ErrorWithoutAReasonEndsTheSessionWithAnEmptyReason) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  worker_.Start(0);
  Poll();
  // No reason string in the frame: the decoded reason has no storage behind it.
  Feed(factory_.Error(kServerPeer, StatusCode::kUnavailable, ""));
  EXPECT_TRUE(worker_.Finished());
  EXPECT_EQ(worker_.status(), Status::Unavailable());
  EXPECT_STREQ(worker_.failure_reason(), "");
}

TEST_F(WorkerSessionTest, ModelBroadcastIsAnsweredWithAnUpdateBuiltInTheFrame) {
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  config.feedback.local_steps = 3;
  Make(config);
  Join();
  const std::vector<float> model = PseudoRandom(kDim, 21, 2.0f);
  Feed(ModelFrame(0, model));
  // The round starts from the broadcast model, read in the frame: with the model downlink and a
  // codec without selection state the worker keeps no copy of its own.
  EXPECT_FALSE(WorkerSession::KeepsModelCopy(config));
  EXPECT_TRUE(worker_.model().empty());
  EXPECT_EQ(problem_.round_start, model);
  EXPECT_EQ(worker_.model_round(), 0u);
  EXPECT_EQ(problem_.calls, 3u);
  const auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  const wire::FrameView update = frames[0].first.View();
  ASSERT_EQ(update.kind, wire::MessageKind::kUpdate);
  EXPECT_EQ(update.header.round, 0u);
  EXPECT_EQ(update.header.sender, kId);
  EXPECT_EQ(update.message.update.worker, kId);
  EXPECT_EQ(update.message.update.samples, 3 * config.batch);
  EXPECT_EQ(frames[0].second, 3u * config.batch);  // work for the simulator
  EXPECT_EQ(update.payload.codec, kCodecId<TopKCodec>);
  EXPECT_EQ(update.payload.view.indices.size(),
            EncodedShape(config.codec, config.layout).value().indices);
  EXPECT_EQ(worker_.counters().updates_sent, 1u);
}

// A device whose time budget fits fewer steps than H takes its limit, and its Update says how
// many it took (samples and the simulator's work shrink with them); a limit from H up is no
// limit, and the Update names no steps.
class WorkerStepLimitTest : public WorkerSessionTest,
                            public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(WorkerStepLimitTest, TakesTheLimitAndTheUpdateSaysSo) {
  constexpr std::uint32_t kRunSteps = 5;
  const std::uint32_t limit = GetParam();
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  config.feedback.local_steps = kRunSteps;
  WorkerOptions options;
  options.local_step_limit = limit;
  Make(config, 0, options);
  Join();
  Feed(ModelFrame(0, PseudoRandom(kDim, 21, 2.0f)));
  const std::uint32_t taken = limit != 0 && limit < kRunSteps ? limit : kRunSteps;
  EXPECT_EQ(problem_.calls, taken);
  const auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  const wire::FrameView update = frames[0].first.View();
  ASSERT_EQ(update.kind, wire::MessageKind::kUpdate);
  EXPECT_EQ(update.message.update.local_steps, taken < kRunSteps ? taken : 0u);
  EXPECT_EQ(update.message.update.samples, taken * config.batch);
  EXPECT_EQ(frames[0].second, taken * config.batch);
}

INSTANTIATE_TEST_SUITE_P(Limits, WorkerStepLimitTest, ::testing::Values(0u, 1u, 2u, 5u, 9u));

// The worker keeps a model of its own only where something reads it after the round's update
// is built: the aggregate downlink (applied to it), majority vote, a codec that selects with the
// last aggregate (reg_top_k). Without one it holds d floats less.
TEST(WorkerSessionMemoryTest, KeepsAModelCopyOnlyWhereARoundReadsItLater) {
  const RunConfig mean = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  EXPECT_FALSE(WorkerSession::KeepsModelCopy(mean));
  RunConfig aggregate = mean;
  aggregate.downlink = DownlinkKind::kAggregate;
  EXPECT_TRUE(WorkerSession::KeepsModelCopy(aggregate));
  EXPECT_TRUE(WorkerSession::KeepsModelCopy(MeanConfig(kDim, kCodecId<RegTopKCodec>, 10)));
  RunConfig majority = MajorityConfig(kDim, 10);
  majority.downlink = DownlinkKind::kModel;
  EXPECT_TRUE(WorkerSession::KeepsModelCopy(majority));

  // The aggregate downlink takes the model copy and the codec's decode scratch more.
  EXPECT_EQ(
      WorkerSession::WelcomeArenaBytes(aggregate) - WorkerSession::WelcomeArenaBytes(mean),
      ArenaBytesFor<float>(kDim) + edgesgd::ArenaBytes(CodecScratchBytes(mean.codec, mean.layout)));
}

// Without a copy the round reads the model in the broadcast frame while OnFrame runs, and never
// after: a worker whose broadcast buffers are filled with NaN once delivered (a driver reusing
// them) sends the same updates, byte for byte, as one whose buffers stay intact.
TEST(WorkerSessionMemoryTest, ARoundWithoutAModelCopyReadsTheFrameOnlyWhileItIsDelivered) {
  const RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 10);
  ASSERT_FALSE(WorkerSession::KeepsModelCopy(config));
  const auto updates = [&config](bool reuse_buffers) {
    ArenaStorage storage(WorkerSession::ArenaBytes(config));
    QuadraticProblem problem;
    problem.target = PseudoRandom(kDim, 11, 1.0f);
    WorkerSession worker;
    EXPECT_TRUE(worker.Init(storage.arena, QuadraticWorkerOptions(kId, problem)).ok());
    FrameFactory factory;
    std::vector<Frame> sent;
    const auto deliver = [&](Frame frame) {
      worker.OnFrame(kServerPeer, frame.bytes(), 0);
      if (reuse_buffers) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const std::span<std::byte> bytes = frame.mutable_bytes();
        for (std::size_t at = 0; at + sizeof nan <= bytes.size(); at += sizeof nan) {
          std::memcpy(bytes.data() + at, &nan, sizeof nan);
        }
      }
      OutgoingFrame out;
      while (worker.PollFrame(out)) sent.emplace_back(out.bytes);
    };
    worker.Start(0);
    deliver(factory.Welcome(ToWelcomeInfo(config, kId, 4)));
    for (std::uint32_t round = 0; round < 3; ++round) {
      deliver(factory.Broadcast(round, wire::BroadcastContent::kModel, CodecParams{}, config.layout,
                                PseudoRandom(kDim, 30 + round, 2.0f), config.seed));
    }
    return sent;
  };
  const std::vector<Frame> intact = updates(false);
  const std::vector<Frame> reused = updates(true);
  ASSERT_EQ(intact.size(), 4u);  // the Join and three Updates
  ASSERT_EQ(reused.size(), intact.size());
  for (std::size_t i = 0; i < intact.size(); ++i) {
    ASSERT_EQ(reused[i].size(), intact[i].size()) << "frame " << i;
    EXPECT_EQ(std::memcmp(reused[i].bytes().data(), intact[i].bytes().data(), intact[i].size()), 0)
        << "frame " << i;
  }
}

// A dense update without a residual is written by the local steps straight into the Update
// frame: its values are the model's change over the H steps, and a round whose gradient fails
// leaves no half-built frame behind.
TEST_F(WorkerSessionTest, ADenseUpdateWithoutResidualIsTheLocalStepsDelta) {
  RunConfig config = MeanConfig(kDim, kCodecId<IdentityCodec>, 10);
  config.feedback.kind = FeedbackKind::kNone;
  config.feedback.local_steps = 2;
  Make(config);
  Join();
  const std::vector<float> model = PseudoRandom(kDim, 22, 2.0f);
  problem_.fail = true;
  Feed(ModelFrame(0, model));
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(worker_.counters().gradient_errors, 1u);
  problem_.fail = false;
  Feed(ModelFrame(1, model));
  const auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  const wire::FrameView update = frames[0].first.View();
  ASSERT_EQ(update.kind, wire::MessageKind::kUpdate);
  EXPECT_EQ(update.header.round, 1u);
  ASSERT_EQ(update.payload.view.values.size(), kDim);
  // Two heavy-ball steps on the quadratic from the model, in the worker's order of operations.
  const float lr = config.feedback.learning_rate;
  const float beta = config.feedback.momentum;
  for (std::size_t i = 0; i < kDim; ++i) {
    const float g0 = model[i] - problem_.target[i];
    const float m0 = beta * 0.0f + g0;
    const float y = model[i] - lr * m0;
    const float m1 = beta * m0 + (y - problem_.target[i]);
    const float delta = (0.0f + lr * m0) + lr * m1;
    ASSERT_FLOAT_EQ(update.payload.view.values[i], delta) << i;
  }
}

// DQ-SGD from the Welcome: each round's Update is quantized at the level count the schedule
// gives the worker's own gradient in that round, and a Welcome with other schedule constants
// describes another run.
TEST_F(WorkerSessionTest, QuantizationScheduleFromTheWelcomeSetsEachRoundsLevels) {
  RunConfig config = MeanConfig(kDim, kCodecId<QsgdCodec>, 10);
  const QsgdParams dq{.schedule = QuantScheduleKind::kDq,
                      .bits_min = 2,
                      .bits_max = 8,
                      .dq_k = 3.0f,
                      .dq_rho = 0.5f};
  config.codec = dq;
  config.feedback.momentum = 0.0f;
  Make(config);
  Join();
  EXPECT_EQ(worker_.config().codec, config.codec);
  const std::vector<float> model = PseudoRandom(kDim, 21, 2.0f);
  std::vector<float> gradient(kDim);
  for (std::size_t i = 0; i < kDim; ++i) gradient[i] = model[i] - problem_.target[i];
  std::vector<std::uint32_t> sent_levels;
  for (const std::uint32_t round : {0u, 8u, 9u}) {
    Feed(ModelFrame(round, model));
    const auto frames = Poll();
    ASSERT_EQ(frames.size(), 1u);
    const wire::FrameView update = frames[0].first.View();
    ASSERT_EQ(update.kind, wire::MessageKind::kUpdate);
    EXPECT_EQ(update.payload.header.levels,
              QsgdCodec::RoundParams(dq, round, 10, gradient).value().levels)
        << "round " << round;
    EXPECT_EQ(update.payload.header.bucket, dq.bucket);
    EXPECT_EQ(update.payload.view.words.size(),
              QsgdCodec::WordsFor(kDim, update.payload.header.levels));
    sent_levels.push_back(update.payload.header.levels);
  }
  // The same gradient gets more levels as the end approaches (rho = 0.5 halves the damping
  // every two rounds).
  EXPECT_LT(sent_levels.front(), sent_levels.back());
  EXPECT_EQ(worker_.counters().encode_errors, 0u);
  RunConfig other = config;
  QsgdParams other_dq = dq;
  other_dq.dq_k = 4.0f;
  other.codec = other_dq;
  Feed(factory_.Welcome(ToWelcomeInfo(other, kId, 4)));
  EXPECT_EQ(worker_.counters().rejected_welcomes, 1u);
  EXPECT_EQ(std::get<QsgdParams>(worker_.config().codec).dq_k, 3.0f);
}

TEST_F(WorkerSessionTest, RepeatedBroadcastResendsTheSameUpdateAndStaleOnesAreIgnored) {
  Make(MeanConfig(kDim, kCodecId<RandomBlockCodec>, 10));
  Join();
  const std::vector<float> model = PseudoRandom(kDim, 21, 2.0f);
  Feed(ModelFrame(1, model));
  const auto first = Poll();
  ASSERT_EQ(first.size(), 1u);
  Feed(ModelFrame(1, model));
  const auto again = Poll();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(std::memcmp(again[0].first.bytes().data(), first[0].first.bytes().data(),
                        first[0].first.size()),
            0);
  EXPECT_EQ(again[0].second, 0u);  // nothing recomputed
  EXPECT_EQ(problem_.calls, 1u);
  EXPECT_EQ(worker_.counters().duplicate_broadcasts, 1u);
  EXPECT_EQ(worker_.counters().updates_resent, 1u);

  Feed(ModelFrame(3, model));
  ASSERT_EQ(Poll().size(), 1u);
  Feed(ModelFrame(2, model));
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(worker_.counters().stale_broadcasts, 1u);
  EXPECT_EQ(worker_.model_round(), 3u);
}

TEST_F(WorkerSessionTest, AggregateIsAppliedWhenItFitsAndTriggersAResyncWhenNot) {
  RunConfig config = MeanConfig(kDim, kCodecId<RandKCodec>, 10);
  config.downlink = DownlinkKind::kAggregate;
  Make(config);
  Join();
  const std::vector<float> model = PseudoRandom(kDim, 21, 2.0f);
  Feed(ModelFrame(0, model));
  ASSERT_EQ(Poll().size(), 1u);

  // Round 1's aggregate fits the round-0 model: x -= decode(aggregate), exactly as DecodeAdd.
  const std::vector<float> aggregate_input = PseudoRandom(kDim, 5, 0.5f);
  Feed(factory_.Broadcast(1, wire::BroadcastContent::kAggregate, config.codec, config.layout,
                          aggregate_input, config.seed));
  std::vector<float> expected = model;
  {
    const Frame frame = factory_.Broadcast(1, wire::BroadcastContent::kAggregate, config.codec,
                                           config.layout, aggregate_input, config.seed);
    const std::size_t scratch_bytes = CodecScratchBytes(config.codec, config.layout);
    std::vector<std::uint64_t> scratch_words(scratch_bytes / 8 + 4);
    const std::span<std::byte> aligned = ArenaStorage::Aligned(scratch_words, scratch_bytes);
    ASSERT_TRUE(AllCodecs()
                    .DecodeAdd(config.codec, config.layout, CodecContext{config.seed, 0, 0},
                               frame.View().payload.view, -1.0f, expected, aligned)
                    .ok());
  }
  EXPECT_EQ(std::memcmp(worker_.model().data(), expected.data(), kDim * sizeof(float)), 0);
  EXPECT_EQ(worker_.model_round(), 1u);
  ASSERT_EQ(Poll().size(), 1u);

  // Round 3's aggregate needs the round-2 model, which this worker never got: skip the round
  // and join again.
  const std::uint64_t calls = problem_.calls;
  Feed(factory_.Broadcast(3, wire::BroadcastContent::kAggregate, config.codec, config.layout,
                          aggregate_input, config.seed),
       10);
  auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].first.View().kind, wire::MessageKind::kJoin);
  EXPECT_EQ(worker_.counters().resyncs, 1u);
  EXPECT_EQ(problem_.calls, calls);
  EXPECT_EQ(worker_.model_round(), 1u);
  EXPECT_EQ(worker_.NextWakeup(), 10 + kSecond);  // the Join is retried until a Welcome
  worker_.OnTimer(10 + kSecond);
  ASSERT_EQ(Poll().size(), 1u);

  // The server answers with a Welcome and the full model of the round.
  Feed(WelcomeFrame(), 20);
  EXPECT_EQ(worker_.NextWakeup(), WorkerOptions{}.heartbeat_interval_ns);
  Feed(ModelFrame(3, model), 21);
  frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].first.View().kind, wire::MessageKind::kUpdate);
  EXPECT_EQ(frames[0].first.View().header.round, 3u);
  EXPECT_EQ(worker_.model_round(), 3u);
}

TEST_F(WorkerSessionTest, BadBroadcastPayloadsAreCountedAndDropped) {
  RunConfig config = MeanConfig(kDim, kCodecId<RandomBlockCodec>, 10);
  config.downlink = DownlinkKind::kAggregate;
  Make(config);
  Join();
  // A model of the wrong size; a model that is not dense; an aggregate of another codec.
  Feed(factory_.Broadcast(0, wire::BroadcastContent::kModel, CodecParams{},
                          TensorLayout::Single(kDim - 1).value(),
                          std::vector<float>(kDim - 1, 1.0f), config.seed));
  Feed(factory_.Broadcast(0, wire::BroadcastContent::kModel, config.codec, config.layout,
                          std::vector<float>(kDim, 1.0f), config.seed));
  Feed(ModelFrame(0, std::vector<float>(kDim, 1.0f)));
  ASSERT_EQ(Poll().size(), 1u);
  Feed(factory_.Broadcast(1, wire::BroadcastContent::kAggregate, QuarterSparse(kCodecId<TopKCodec>),
                          config.layout, std::vector<float>(kDim, 1.0f), config.seed));
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(worker_.counters().bad_payloads, 3u);
  EXPECT_EQ(worker_.model_round(), 0u);
}

TEST_F(WorkerSessionTest, NegatedGradientSendsTheNegatedVote) {
  // The sign-flip attack under majority vote: Signum's momentum is linear in the gradients, so
  // every vote flips, and the padding bits stay 0 (a vote with one set is malformed).
  const RunConfig config = MajorityConfig(kDim, 10);
  std::vector<std::vector<std::uint32_t>> votes;
  for (const bool negate : {false, true}) {
    WorkerSession worker;
    ArenaStorage storage(WorkerSession::ArenaBytes(config));
    QuadraticProblem problem;
    problem.target = PseudoRandom(kDim, 11, 1.0f);
    WorkerOptions options;
    options.device_id = kId;
    options.gradient = negate ? &NegatedQuadraticGradient : &QuadraticGradient;
    options.codecs = &AllCodecs();
    options.user = &problem;
    ASSERT_TRUE(worker.Init(storage.arena, options).ok());
    worker.Start(0);
    OutgoingFrame out;
    while (worker.PollFrame(out)) {
    }
    config_ = config;
    worker.OnFrame(kServerPeer, WelcomeFrame().bytes(), 0);
    worker.OnFrame(kServerPeer, ModelFrame(0, PseudoRandom(kDim, 4, 1.0f)).bytes(), 0);
    ASSERT_TRUE(worker.PollFrame(out));
    const Frame frame(out.bytes);
    const wire::FrameView view = frame.View();
    ASSERT_EQ(view.payload.codec, kCodecId<SignCodec>);
    ASSERT_EQ(view.payload.view.scales.size(), 1u);
    EXPECT_EQ(view.payload.view.scales[0], 1.0f);
    votes.emplace_back(view.payload.view.words.begin(), view.payload.view.words.end());
  }
  ASSERT_EQ(votes[0].size(), 2u);
  EXPECT_EQ(votes[1][0], ~votes[0][0]);
  EXPECT_EQ(votes[1][1], ~votes[0][1] & 0xFFu);  // 40 - 32 = 8 coordinates, padding stays 0
  EXPECT_EQ(votes[1][1] & ~0xFFu, 0u);
}

TEST_F(WorkerSessionTest, MalformedUnknownAndUnexpectedFramesAreCounted) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  worker_.Start(0);
  Poll();
  const std::vector<float> model(kDim, 1.0f);
  Feed(ModelFrame(0, model));  // before the Welcome
  EXPECT_EQ(worker_.counters().unexpected, 1u);
  Feed(WelcomeFrame());
  std::vector<std::uint64_t> noise(6, 0xDEADBEEFCAFEF00Dull);
  worker_.OnFrame(kServerPeer, std::as_bytes(std::span(noise)), 0);
  EXPECT_EQ(worker_.counters().malformed, 1u);
  Feed(factory_.Join(kServerPeer));  // a Join from the server makes no sense
  EXPECT_EQ(worker_.counters().unexpected, 2u);
  Feed(ModelFrame(0, model), 0, 5);  // from another peer
  EXPECT_EQ(worker_.counters().unknown_sender, 1u);
  Feed(factory_.Error(kServerPeer, StatusCode::kInternal, "late error"));
  EXPECT_EQ(worker_.counters().unexpected, 3u);
  EXPECT_FALSE(worker_.Finished());
  EXPECT_TRUE(Poll().empty());
}

TEST_F(WorkerSessionTest, HeartbeatsKeepTheServerInformed) {
  WorkerOptions options;
  options.heartbeat_interval_ns = kSecond;
  options.codecs = &AllCodecs();
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10), 0, options);
  Join();
  EXPECT_EQ(worker_.NextWakeup(), kSecond);
  worker_.OnTimer(kSecond);
  auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].first.View().kind, wire::MessageKind::kHeartbeat);
  EXPECT_EQ(worker_.NextWakeup(), 2 * kSecond);
  EXPECT_EQ(worker_.counters().heartbeats_sent, 1u);

  WorkerSession silent;
  ArenaStorage storage(WorkerSession::ArenaBytes(config_));
  options.heartbeat_interval_ns = kNever;
  options.gradient = &QuadraticGradient;
  options.user = &problem_;
  ASSERT_TRUE(silent.Init(storage.arena, options).ok());
  silent.Start(0);
  silent.OnFrame(kServerPeer, WelcomeFrame().bytes(), 0);
  EXPECT_TRUE(silent.configured());
  EXPECT_EQ(silent.NextWakeup(), kNever);
}

TEST_F(WorkerSessionTest, LeaveEndsTheSession) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  Join();
  Feed(factory_.Leave(kServerPeer, wire::LeaveReason::kShutdown));
  EXPECT_TRUE(worker_.Finished());
  EXPECT_EQ(worker_.leave_reason(), wire::LeaveReason::kShutdown);
  EXPECT_EQ(worker_.NextWakeup(), kNever);
  Feed(ModelFrame(0, std::vector<float>(kDim, 1.0f)));
  EXPECT_TRUE(Poll().empty());
}

TEST_F(WorkerSessionTest, GradientErrorSkipsTheRoundAndTheNextOneWorks) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  Join();
  problem_.fail = true;
  Feed(ModelFrame(0, std::vector<float>(kDim, 1.0f)));
  EXPECT_TRUE(Poll().empty());
  EXPECT_EQ(worker_.counters().gradient_errors, 1u);
  problem_.fail = false;
  Feed(ModelFrame(1, std::vector<float>(kDim, 1.0f)));
  EXPECT_EQ(Poll().size(), 1u);
}

TEST_F(WorkerSessionTest, LostServerLinkMakesTheWorkerJoinAgain) {
  Make(MeanConfig(kDim, kCodecId<TopKCodec>, 10));
  Join();
  worker_.OnPeerLost(kServerPeer, 50);
  const auto frames = Poll();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].first.View().kind, wire::MessageKind::kJoin);
  EXPECT_EQ(worker_.counters().resyncs, 1u);
  worker_.OnPeerLost(7, 60);  // not the server: nothing to do
  EXPECT_TRUE(Poll().empty());
}

// RegTop-k: a full-model broadcast of round r that follows the worker's update of round r-1
// tells it the aggregate (x_{r-1} - x_r over `participants` contributors), and its next selection
// uses it; after a round it sat out, it selects without a posterior (as Top-k).
TEST_F(WorkerSessionTest, RegTopKLearnsTheAggregateOnlyRightAfterItsOwnUpdate) {
  RunConfig config = MeanConfig(kDim, kCodecId<RegTopKCodec>, 10);
  config.feedback.momentum = 0.0f;
  const std::vector<float> model0 = PseudoRandom(kDim, 31, 2.0f);

  // What the worker computes, by hand: round 0 from model0, then (learned or not) the next
  // round from model1, in which the aggregate cancelled the worker's largest contribution and
  // kept the others at this worker's own share.
  constexpr std::uint32_t kParticipants = 4;
  QuadraticProblem problem;
  problem.target = PseudoRandom(kDim, 11, 1.0f);  // as Make() sets it
  std::vector<std::uint64_t> storage(1 << 14);
  Arena arena(std::as_writable_bytes(std::span(storage)));
  const PayloadShape shape = EncodedShape(config.codec, config.layout).value();
  std::vector<std::uint32_t> indices(shape.indices);
  std::vector<float> values(shape.values), gradient(kDim), model1 = model0;
  const PayloadSpans out{indices, values, {}, {}};
  const auto round_of = [&](ErrorFeedbackWorker& reference, std::span<const float> model,
                            std::uint32_t round) {
    EXPECT_TRUE(reference.BeginRound(model).ok());
    EXPECT_TRUE(QuadraticGradient(&problem, reference.GradientPoint(), round, 0, gradient).ok());
    EXPECT_TRUE(reference.LocalStep(gradient).ok());
    EXPECT_TRUE(reference.Compress({config.seed, round, kId}, out).ok());
    return indices;
  };
  std::vector<std::uint32_t> expected_round0, expected_learned, expected_forgot;
  for (const bool learn : {true, false}) {
    ErrorFeedbackWorker reference;
    ASSERT_TRUE(
        reference.Init(arena, AllCodecs(), config.layout, config.codec, config.feedback).ok());
    expected_round0 = round_of(reference, model0, 0);
    std::size_t largest = 0;
    for (std::size_t i = 0; i < indices.size(); ++i) {
      if (std::fabs(values[i]) > std::fabs(values[largest])) largest = i;
    }
    model1 = model0;
    for (std::size_t i = 0; i < indices.size(); ++i) {
      if (i != largest) model1[indices[i]] -= values[i] / kParticipants;
    }
    if (learn) {
      ASSERT_TRUE(reference.ObserveModelChange(model0, model1, kParticipants).ok());
      expected_learned = round_of(reference, model1, 1);
    } else {
      reference.ForgetAggregate();
      expected_forgot = round_of(reference, model1, 2);
    }
  }
  ASSERT_NE(expected_learned, expected_forgot);  // otherwise this test could not tell

  const auto update_indices = [&] {
    const auto frames = Poll();
    EXPECT_EQ(frames.size(), 1u);
    if (frames.empty()) return std::vector<std::uint32_t>();
    const wire::FrameView update = frames[0].first.View();
    EXPECT_EQ(update.payload.codec, kCodecId<RegTopKCodec>);
    return std::vector<std::uint32_t>(update.payload.view.indices.begin(),
                                      update.payload.view.indices.end());
  };
  const auto broadcast = [&](std::uint32_t round, std::span<const float> model) {
    return factory_.Broadcast(round, wire::BroadcastContent::kModel, CodecParams{},
                              config.layout, model, config.seed, kParticipants);
  };
  Make(config);
  Join();
  Feed(broadcast(0, model0));
  EXPECT_EQ(update_indices(), expected_round0);
  Feed(broadcast(1, model1));
  EXPECT_EQ(update_indices(), expected_learned);

  // Another worker is not sampled in round 1: its next broadcast (round 2) does not follow its
  // update, so it selects without a posterior.
  WorkerSession second;
  ArenaStorage second_storage(WorkerSession::ArenaBytes(config));
  QuadraticProblem second_problem;
  second_problem.target = problem.target;
  ASSERT_TRUE(second.Init(second_storage.arena, QuadraticWorkerOptions(kId, second_problem)).ok());
  second.Start(0);
  OutgoingFrame sent;
  while (second.PollFrame(sent)) {
  }
  second.OnFrame(kServerPeer, WelcomeFrame().bytes(), 0);
  second.OnFrame(kServerPeer, broadcast(0, model0).bytes(), 0);
  while (second.PollFrame(sent)) {
  }
  second.OnFrame(kServerPeer, broadcast(2, model1).bytes(), 0);
  ASSERT_TRUE(second.PollFrame(sent));
  const Frame frame(sent.bytes);  // the view points into it
  const wire::FrameView update = frame.View();
  EXPECT_EQ(std::vector<std::uint32_t>(update.payload.view.indices.begin(),
                                       update.payload.view.indices.end()),
            expected_forgot);
}

TEST(WorkerInitTest, RejectsBadOptions) {
  ArenaStorage storage(1 << 16);
  QuadraticProblem problem;
  WorkerOptions options;
  WorkerSession worker;
  EXPECT_STREQ(worker.Init(storage.arena, options).reason(), "a gradient callback is required");
  options.gradient = &QuadraticGradient;
  options.user = &problem;
  const Status without_codecs = worker.Init(storage.arena, options);
  EXPECT_EQ(without_codecs, Status::InvalidArgument());
  EXPECT_NE(std::string(without_codecs.reason()).find("codec registry"), std::string::npos);
  options.codecs = &AllCodecs();
  options.device_id = 0;
  EXPECT_EQ(worker.Init(storage.arena, options), Status::InvalidArgument());
  options.device_id = 1;
  options.join_retry_ns = 0;
  EXPECT_EQ(worker.Init(storage.arena, options), Status::InvalidArgument());
  options.join_retry_ns = kSecond;
  ArenaStorage tiny(64);
  EXPECT_EQ(worker.Init(tiny.arena, options), Status::ResourceExhausted());
  storage.arena.Seal();
  EXPECT_EQ(worker.Init(storage.arena, options), Status::FailedPrecondition());
  ArenaStorage fresh(1 << 16);
  EXPECT_TRUE(worker.Init(fresh.arena, options).ok());
  EXPECT_EQ(fresh.arena.used_bytes(), WorkerSession::InitArenaBytes());
  EXPECT_EQ(worker.Init(fresh.arena, options), Status::FailedPrecondition());
}

}  // namespace
}  // namespace edgesgd::protocol::testing
