// End-to-end training through the sessions on the quadratic problem: error feedback with top_k
// (and every codec against a direct computation with the core components), majority vote (also
// with sign-flip attackers), and the aggregate downlink — payload sums, votes and the server's
// re-compressed mean — keeping every worker's model bit-identical to the server's.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/downlink_feedback.h"
#include "edgesgd/core/error_feedback.h"
#include "core/test_util.h"
#include "edgesgd/wire/frame_decoder.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

class ProtocolTopKTest : public ::testing::TestWithParam<DownlinkKind> {};

// With the aggregate downlink the broadcast is top_k of the server's residual plus the mean
// (two-way error feedback): it must reach the optimum as closely as the model downlink.
TEST_P(ProtocolTopKTest, MeanErrorFeedbackTopKConverges) {
  constexpr std::size_t kDim = 32;
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 400);
  config.downlink = GetParam();
  config.feedback.learning_rate = 0.05f;
  config.feedback.momentum = 0.0f;
  ServerOptions options;
  options.workers = 4;
  options.quorum = 4;
  const std::vector<float> initial(kDim, 3.0f);
  Cluster cluster(config, options, Targets(4, kDim), initial);
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));

  // Top-k with error feedback on heterogeneous targets settles near, not at, the optimum
  // (docs/algorithms.md); a 100-fold reduction of the distance is the protocol working.
  const std::vector<float> optimum = cluster.MeanTarget();
  const float start = Distance(initial, optimum);
  const float end = Distance(cluster.server().model(), optimum);
  EXPECT_LT(end, 0.01f * start) << "start " << start << " end " << end;
  EXPECT_EQ(cluster.server().counters().rounds_completed, 400u);
  EXPECT_EQ(cluster.server().counters().updates_accepted, 1600u);
  EXPECT_EQ(cluster.server().counters().total_rejected(), 0u);
  EXPECT_TRUE(cluster.server().status().ok());
  for (PeerId w = 1; w <= 4; ++w) {
    EXPECT_TRUE(cluster.worker(w).Finished());
    EXPECT_EQ(cluster.worker(w).leave_reason(), wire::LeaveReason::kDone);
  }
  const std::vector<RoundEvent> rounds = cluster.DrainRounds();
  ASSERT_FALSE(rounds.empty());
  EXPECT_EQ(rounds.back().round, 399u);
  EXPECT_EQ(rounds.back().reported, 4u);
}

INSTANTIATE_TEST_SUITE_P(Downlinks, ProtocolTopKTest,
                         ::testing::Values(DownlinkKind::kModel, DownlinkKind::kAggregate),
                         [](const ::testing::TestParamInfo<DownlinkKind>& param_info) {
                           return std::string(param_info.param == DownlinkKind::kModel
                                                  ? "model"
                                                  : "aggregate");
                         });

TEST(ProtocolTrainingTest, IdenticalTargetsConvergeToTheTarget) {
  constexpr std::size_t kDim = 24;
  RunConfig config = MeanConfig(kDim, kCodecId<TopKCodec>, 300);
  config.feedback.learning_rate = 0.1f;
  config.feedback.momentum = 0.5f;
  ServerOptions options;
  options.workers = 3;
  const std::vector<float> target = PseudoRandom(kDim, 5, 1.0f);
  Cluster cluster(config, options, {target, target, target}, std::vector<float>(kDim, -2.0f));
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  EXPECT_LT(Distance(cluster.server().model(), target), 1e-4f);
}

// What the core components compute when wired together by hand, without the protocol.
// Updates reach the server in worker order (equal latencies), so the reference adds them in that
// order too. A re-compressed downlink (RecompressesDownlink) goes through DownlinkFeedback.
// With `learn_aggregates` every worker reports the model change to its error-feedback worker
// after each round (what WorkerSession does on the next broadcast), so a stateful selector
// (reg_top_k) sees the aggregate; without it, it never does. Payloads use the parameters the
// codec picks for the round from each worker's gradient (qsgd's quantization schedule).
struct DirectRun {
  std::vector<float> model;
  std::vector<std::uint64_t> payload_bits;  // per round, summed over workers
};

DirectRun RunDirectly(const RunConfig& config, const std::vector<std::vector<float>>& targets,
                      const std::vector<float>& initial, bool learn_aggregates) {
  const std::size_t workers_count = targets.size();
  const std::size_t d = config.layout.dimension();
  std::vector<std::uint64_t> storage(1 << 16);
  Arena arena(std::as_writable_bytes(std::span(storage)));
  std::vector<ErrorFeedbackWorker> workers(workers_count);
  for (auto& worker : workers) {
    EXPECT_TRUE(worker.Init(arena, AllCodecs(), config.layout, config.codec, config.feedback).ok());
  }
  MeanAggregator aggregator;
  EXPECT_TRUE(aggregator.Init(arena, AllCodecs(), config.layout, config.codec).ok());
  DownlinkFeedback downlink;
  std::span<std::byte> downlink_scratch;
  if (RecompressesDownlink(config)) {
    EXPECT_TRUE(downlink.Init(arena, AllCodecs(), config.layout, config.codec).ok());
    downlink_scratch =
        arena.AllocateBytes(CodecScratchBytes(config.codec, config.layout)).value();
  }
  const PayloadShape shape = EncodedShape(config.codec, config.layout).value();
  std::vector<std::uint32_t> indices(shape.indices), words(shape.words);
  std::vector<float> values(shape.values), scales(shape.scales), gradient(d);
  const PayloadSpans out{indices, values, words, scales};
  DirectRun run{initial, std::vector<std::uint64_t>(config.rounds, 0)};
  for (std::uint32_t round = 0; round < config.rounds; ++round) {
    aggregator.Reset();
    for (std::uint32_t w = 0; w < workers_count; ++w) {
      EXPECT_TRUE(workers[w].BeginRound(run.model).ok());
      for (std::uint32_t step = 0; step < config.feedback.local_steps; ++step) {
        const std::span<const float> point = workers[w].GradientPoint();
        for (std::size_t i = 0; i < d; ++i) gradient[i] = point[i] - targets[w][i];
        EXPECT_TRUE(workers[w].LocalStep(gradient).ok());
      }
      const Result<CodecParams> round_params =
          AllCodecs().RoundParams(config.codec, round, config.rounds, gradient);
      EXPECT_TRUE(round_params.ok());
      EXPECT_TRUE(workers[w].SetRoundParams(round_params.value()).ok());
      const CodecContext context{config.seed, round, w + 1};
      const Result<PayloadShape> sent = workers[w].Compress(context, out);
      EXPECT_TRUE(sent.ok());
      const PayloadView view(out, *sent);
      EXPECT_TRUE(aggregator.AddWithParams(workers[w].codec(), view, context).ok());
      run.payload_bits[round] += 32u * (view.indices.size() + view.values.size() +
                                        view.words.size() + view.scales.size());
    }
    const std::vector<float> before = run.model;
    if (RecompressesDownlink(config)) {
      const CodecContext context{config.seed, round, 0};
      const Result<PayloadShape> sent =
          downlink.Compress(aggregator.Mean().value(), context, out);
      EXPECT_TRUE(sent.ok());
      EXPECT_TRUE(AllCodecs()
                      .DecodeAdd(config.codec, config.layout, context, PayloadView(out, *sent),
                                 -1.0f, run.model, downlink_scratch)
                      .ok());
    } else {
      EXPECT_TRUE(aggregator.AddScaledMean(-1.0f, run.model).ok());
    }
    if (learn_aggregates) {
      for (auto& worker : workers) {
        EXPECT_TRUE(worker
                        .ObserveModelChange(before, run.model,
                                            static_cast<std::uint32_t>(workers_count))
                        .ok());
      }
    }
  }
  return run;
}

// The protocol must compute exactly what the core components compute when wired together by
// hand: same payloads, same aggregation order, same model, bit for bit. Returns the payload bits
// the reference sent per round, for checks of the server's round events.
std::vector<std::uint64_t> ExpectMatchesDirectComputation(const RunConfig& config,
                                                          std::vector<RoundEvent>& rounds) {
  constexpr std::size_t kWorkers = 3;
  ServerOptions options;
  options.workers = kWorkers;
  const std::size_t d = config.layout.dimension();
  const std::vector<float> initial = PseudoRandom(d, 3, 2.0f);
  const auto targets = Targets(kWorkers, d);
  Cluster cluster(config, options, targets, initial);
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  EXPECT_EQ(cluster.server().counters().updates_accepted, kWorkers * config.rounds);
  rounds = cluster.DrainRounds();

  const DirectRun reference = RunDirectly(config, targets, initial, true);
  const std::span<const float> served = cluster.server().model();
  EXPECT_EQ(served.size(), reference.model.size());
  EXPECT_EQ(std::memcmp(served.data(), reference.model.data(), d * sizeof(float)), 0)
      << "codec " << CodecName(config.codec);
  if (std::holds_alternative<RegTopKParams>(config.codec)) {
    // The workers did learn from the broadcasts: never seeing an aggregate gives another run.
    const DirectRun blind = RunDirectly(config, targets, initial, false);
    EXPECT_NE(std::memcmp(served.data(), blind.model.data(), d * sizeof(float)), 0);
  }
  return reference.payload_bits;
}

// A layout of two tensors and DEF with two local steps: every part of the worker is exercised.
RunConfig DirectComputationConfig(CodecId codec) {
  const std::uint64_t sizes[] = {20, 45};
  RunConfig config = MeanConfig(65, codec, 25);
  config.layout = TensorLayout::FromSizes(sizes).value();
  if (std::holds_alternative<QsgdParams>(config.codec)) {
    config.codec = QsgdParams{.levels = 7, .bucket = 16};
  }
  config.feedback.kind = FeedbackKind::kDef;
  config.feedback.detach = 0.3f;
  config.feedback.local_steps = 2;
  config.feedback.learning_rate = 0.05f;
  config.feedback.momentum = 0.9f;
  config.feedback.weight_decay = 1e-3f;
  return config;
}

class ProtocolCodecTest : public ::testing::TestWithParam<CodecId> {};

TEST_P(ProtocolCodecTest, MatchesDirectComputation) {
  std::vector<RoundEvent> rounds;
  const std::vector<std::uint64_t> bits =
      ExpectMatchesDirectComputation(DirectComputationConfig(GetParam()), rounds);
  // Fixed payload shapes: every round sends the same bits.
  ASSERT_EQ(rounds.size(), bits.size());
  for (std::size_t t = 0; t < rounds.size(); ++t) EXPECT_EQ(rounds[t].payload_bits, bits[0]);
}

// DQ-SGD: the level count follows each worker's gradient norm and the rounds left, the frames
// carry it, and the server decodes each with its own count: still bit for bit the reference.
TEST(ProtocolTrainingTest, DynamicQuantizationMatchesDirectComputation) {
  RunConfig config = DirectComputationConfig(kCodecId<QsgdCodec>);
  config.codec = QsgdParams{.bucket = 16,
                            .schedule = QuantScheduleKind::kDq,
                            .bits_min = 2,
                            .bits_max = 6,
                            .dq_k = 4.0f,
                            .dq_rho = 0.8f};
  ASSERT_TRUE(ValidateRunConfig(config).ok()) << ValidateRunConfig(config).reason();
  std::vector<RoundEvent> rounds;
  const std::vector<std::uint64_t> bits = ExpectMatchesDirectComputation(config, rounds);
  ASSERT_EQ(rounds.size(), bits.size());
  std::uint64_t fewest = bits[0], most = bits[0];
  for (std::size_t t = 0; t < rounds.size(); ++t) {
    EXPECT_EQ(rounds[t].payload_bits, bits[t]) << "round " << t;
    fewest = std::min(fewest, bits[t]);
    most = std::max(most, bits[t]);
  }
  // The schedule really changed the width, and never beyond the 6-bit frames it was sized for.
  EXPECT_LT(fewest, most);
  const PayloadShape widest = EncodedShape(config.codec, config.layout).value();
  EXPECT_LE(most, 3u * 32u * (widest.words + widest.scales));
}

// The server's re-compression of the mean (two-way error feedback) is DownlinkFeedback's,
// applied from the broadcast frame: bit for bit the reference, for every codec it supports.
TEST_P(ProtocolCodecTest, RecompressedDownlinkMatchesDirectComputation) {
  RunConfig config = DirectComputationConfig(GetParam());
  config.downlink = DownlinkKind::kAggregate;
  if (!RecompressesDownlink(config) || !TraitsOf(config.codec).downlink_recompress) {
    // Summable codecs broadcast the payload mean (tested below); reg_top_k has no server-side
    // re-compression and the configuration is refused.
    EXPECT_EQ(ValidateRunConfig(config).ok(), TraitsOf(config.codec).payload_sum);
    return;
  }
  ASSERT_TRUE(ValidateRunConfig(config).ok()) << ValidateRunConfig(config).reason();
  std::vector<RoundEvent> rounds;
  ExpectMatchesDirectComputation(config, rounds);
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, ProtocolCodecTest,
                         ::testing::ValuesIn(test_util::CodecIds()), test_util::CodecIdName);

std::vector<float> CoordinateMedian(const std::vector<std::vector<float>>& targets) {
  std::vector<float> median(targets[0].size());
  for (std::size_t i = 0; i < median.size(); ++i) {
    std::vector<float> column;
    for (const auto& target : targets) column.push_back(target[i]);
    std::sort(column.begin(), column.end());
    median[i] = column[column.size() / 2];
  }
  return median;
}

float MaxAbsDifference(std::span<const float> a, std::span<const float> b) {
  float worst = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

TEST(ProtocolTrainingTest, MajorityVoteConvergesToTheMedian) {
  constexpr std::size_t kDim = 40;  // two sign words, the second with padding bits
  RunConfig config = MajorityConfig(kDim, 500);
  ServerOptions options;
  options.workers = 5;
  const auto targets = Targets(5, kDim);
  Cluster cluster(config, options, targets, std::vector<float>(kDim, 3.0f));
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  ASSERT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  // sign(sum_i sign(x - t_i)) is zero-crossing at the coordinate-wise median; Signum with
  // a constant step ends within a few steps of it.
  const std::vector<float> median = CoordinateMedian(targets);
  EXPECT_LT(MaxAbsDifference(cluster.server().model(), median), 5 * config.optimizer.learning_rate);
  EXPECT_EQ(cluster.server().counters().total_rejected(), 0u);
  EXPECT_EQ(cluster.server().counters().rounds_completed, 500u);
}

// Distance to the common center after a majority-vote run in which `attackers` of 9 workers
// compute negated gradients (the sign-flip attack).
float MajorityDistanceWithSignFlips(std::uint32_t attackers, float* start) {
  constexpr std::size_t kDim = 16;
  constexpr std::size_t kWorkers = 9;
  RunConfig config = MajorityConfig(kDim, 800);
  ServerOptions options;
  options.workers = kWorkers;
  const std::vector<float> center = PseudoRandom(kDim, 77, 1.0f);
  std::vector<std::vector<float>> targets;
  for (std::size_t w = 0; w < kWorkers; ++w) {
    std::vector<float> target = PseudoRandom(kDim, static_cast<std::uint32_t>(300 + w), 0.05f);
    for (std::size_t i = 0; i < kDim; ++i) target[i] += center[i];
    targets.push_back(target);
  }
  const std::vector<float> initial(kDim, 3.0f);
  *start = Distance(initial, center);
  Cluster cluster(config, options, targets, initial, WorkerOptions{},
                  [attackers](PeerId id, WorkerOptions& worker) {
                    if (id > kWorkers - attackers) worker.gradient = &NegatedQuadraticGradient;
                  });
  cluster.net().SetLatencyAll(kMs);
  cluster.Start();
  EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
  return Distance(cluster.server().model(), center);
}

TEST(ProtocolTrainingTest, MajorityVoteToleratesSignFlipAttackers) {
  // A third of the workers negate their gradients, so their Signum momentum and their votes are
  // negated (docs/algorithms.md): the vote still trains. Their data is like everyone else's, so
  // the equilibrium stays where it was; they only slow it.
  float start = 0.0f;
  const float with_minority = MajorityDistanceWithSignFlips(3, &start);
  EXPECT_LT(with_minority, 0.05f * start);
  // A majority of attackers drives the model away: the negation is real.
  const float with_majority = MajorityDistanceWithSignFlips(5, &start);
  EXPECT_GT(with_majority, start);
}

// Steps `cluster` to the end, checking after every step that each worker holding the model of
// the server's current round holds it bit for bit. Returns the number of checks made.
int RunCheckingModels(Cluster& cluster) {
  int checks = 0;
  const std::size_t d = cluster.config().layout.dimension();
  while (!cluster.server().Finished()) {
    if (!cluster.net().Step(1000 * kSecond)) {
      ADD_FAILURE() << "run stalled";
      return checks;
    }
    if (cluster.server().phase() != ServerPhase::kTraining) continue;
    const std::span<const float> served = cluster.server().model();
    for (PeerId w = 1; w <= cluster.size(); ++w) {
      if (cluster.worker(w).model_round() != cluster.server().round()) continue;
      const std::span<const float> held = cluster.worker(w).model();
      if (std::memcmp(held.data(), served.data(), d * sizeof(float)) != 0) {
        ADD_FAILURE() << "worker " << w << " differs from the server in round "
                      << cluster.server().round();
        return checks;
      }
      ++checks;
    }
  }
  return checks;
}

// Counts the broadcast kinds the server sends.
struct BroadcastCounter : Interceptor {
  Verdict OnSend(PeerId from, PeerId, std::span<const std::byte> frame, TimeNs) override {
    if (from != kServerPeer) return {};
    const Result<wire::FrameView> view = wire::DecodeFrame(frame);
    if (view.ok() && view.value().kind == wire::MessageKind::kModelBroadcast) {
      if (view.value().message.broadcast.content == wire::BroadcastContent::kAggregate) {
        ++aggregates;
      } else {
        ++models;
      }
    }
    return {};
  }
  int aggregates = 0;
  int models = 0;
};

class ProtocolDownlinkTest : public ::testing::TestWithParam<CodecId> {};

TEST_P(ProtocolDownlinkTest, AggregateDownlinkKeepsModelsBitIdentical) {
  constexpr std::size_t kDim = 50;
  RunConfig config = MeanConfig(kDim, GetParam(), 60);
  config.downlink = DownlinkKind::kAggregate;
  config.participation = 0.6f;  // workers drop in and out: both broadcast kinds occur
  config.feedback.learning_rate = 0.1f;
  ServerOptions options;
  options.workers = 5;
  Cluster cluster(config, options, Targets(5, kDim), PseudoRandom(kDim, 9, 1.0f));
  cluster.net().SetLatencyAll(kMs);
  BroadcastCounter counter;
  cluster.net().SetInterceptor(&counter);
  cluster.Start();
  EXPECT_GT(RunCheckingModels(cluster), 60);
  EXPECT_GT(counter.aggregates, 20);
  EXPECT_GT(counter.models, 5);
  EXPECT_EQ(cluster.server().counters().rounds_completed, 60u);
  EXPECT_EQ(cluster.server().counters().total_rejected(), 0u);
  for (PeerId w = 1; w <= 5; ++w) EXPECT_EQ(cluster.worker(w).counters().resyncs, 0u);
}

INSTANTIATE_TEST_SUITE_P(SummableAndRecompressedCodecs, ProtocolDownlinkTest,
                         ::testing::ValuesIn(test_util::CodecIds([](const CodecTraits& traits) {
                           return traits.payload_sum || traits.downlink_recompress;
                         })),
                         test_util::CodecIdName);

TEST(ProtocolTrainingTest, MajorityAggregateDownlinkKeepsModelsBitIdentical) {
  constexpr std::size_t kDim = 70;
  RunConfig config = MajorityConfig(kDim, 50);
  config.downlink = DownlinkKind::kAggregate;
  config.optimizer.weight_decay = 0.01f;
  ServerOptions options;
  options.workers = 4;  // even: ties occur and resolve by the tie rule on every machine
  Cluster cluster(config, options, Targets(4, kDim), PseudoRandom(kDim, 1, 1.0f));
  cluster.net().SetLatencyAll(kMs);
  BroadcastCounter counter;
  cluster.net().SetInterceptor(&counter);
  cluster.Start();
  EXPECT_GT(RunCheckingModels(cluster), 150);
  EXPECT_EQ(counter.models, 4);  // round 0 only; afterwards 1-bit votes
  EXPECT_EQ(counter.aggregates, 4 * 49);
  EXPECT_EQ(cluster.server().counters().total_rejected(), 0u);
}

}  // namespace
}  // namespace edgesgd::protocol::testing
