// Zero heap allocation in steady state: after Init, 1,000 rounds of gradient -> error feedback
// -> compress -> aggregate -> model update (and the optimizers, and the sign/majority-vote path)
// must not call operator new or malloc even once, for every codec.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "alloc/allocation_counter.h"
#include "core/test_util.h"
#include "edgesgd/core/aggregator.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/error_feedback.h"
#include "edgesgd/core/majority_vote.h"
#include "edgesgd/core/optimizer.h"

namespace edgesgd {
namespace {

constexpr int kSteadyStateRounds = 1000;
constexpr std::size_t kWorkers = 4;
constexpr std::uint64_t kTensorSizes[] = {300, 41, 700};

TensorLayout TestLayout() { return TensorLayout::FromSizes(kTensorSizes).value(); }

// Per-worker quadratic targets so gradients differ between workers: g = point - target_i.
std::vector<std::vector<float>> Targets(std::size_t dimension) {
  std::vector<std::vector<float>> targets(kWorkers, std::vector<float>(dimension));
  for (std::size_t w = 0; w < kWorkers; ++w) {
    for (std::size_t i = 0; i < dimension; ++i) {
      targets[w][i] = static_cast<float>((i * 13 + w * 7) % 29) * 0.1f - 1.4f;
    }
  }
  return targets;
}

TEST(AllocationCounterTest, CountsHeapAllocations) {
  const std::size_t before = testing::HeapAllocationCount();
  // Explicit operator new calls, unlike new-expressions, may not be elided by the compiler.
  void* block = ::operator new(16);
  ::operator delete(block);
  void* array = ::operator new[](32);
  ::operator delete[](array);
  EXPECT_EQ(testing::HeapAllocationCount(), before + 2);
  if (testing::CountsMallocCalls()) {
    const std::size_t before_malloc = testing::HeapAllocationCount();
    // Through a volatile pointer: the compiler may drop a malloc/free pair it can see.
    void* (*volatile allocate)(std::size_t) = std::malloc;
    void* c_block = allocate(16);
    std::free(c_block);
    EXPECT_EQ(testing::HeapAllocationCount(), before_malloc + 1);
  }
}

class SteadyStateTest : public ::testing::TestWithParam<CodecId> {};

TEST_P(SteadyStateTest, ErrorFeedbackRoundsDoNotAllocate) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const CodecParams codec = test_util::EveryCodec(
      {.k_ratio = 0.05f, .block_ratio = 8, .qsgd_levels = 15, .qsgd_bucket = 128})[GetParam()];
  FeedbackParams feedback;
  feedback.kind = FeedbackKind::kDef;
  feedback.detach = 0.3f;
  feedback.learning_rate = 0.05f;
  feedback.momentum = 0.9f;
  feedback.weight_decay = 1e-4f;
  OptimizerParams optimizer_params;
  optimizer_params.kind = OptimizerKind::kMomentum;

  // Odd workers run the lean form: no momentum buffer, the codec's scratch lent to Compress.
  using CodecScratch = ErrorFeedbackWorker::CodecScratch;
  FeedbackParams lean_feedback = feedback;
  lean_feedback.momentum = 0.0f;
  const auto is_lean = [](std::size_t w) { return w % 2 == 1; };

  // Init: one arena for everything, sealed before the rounds start.
  std::size_t arena_bytes = MeanAggregator::StateBytes(layout, codec) +
                            Optimizer::StateBytes(d, optimizer_params) +
                            ArenaBytes(CodecScratchBytes(codec, layout));
  for (std::size_t w = 0; w < kWorkers; ++w) {
    arena_bytes += is_lean(w) ? ErrorFeedbackWorker::StateBytes(layout, codec, lean_feedback,
                                                                CodecScratch::kLent)
                              : ErrorFeedbackWorker::StateBytes(layout, codec, feedback);
  }
  std::vector<std::byte> storage(arena_bytes + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  std::vector<ErrorFeedbackWorker> workers(kWorkers);
  for (std::size_t w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE((is_lean(w) ? workers[w].Init(arena, AllCodecs(), layout, codec, lean_feedback,
                                              CodecScratch::kLent)
                            : workers[w].Init(arena, AllCodecs(), layout, codec, feedback))
                    .ok());
  }
  // The scratch the lean workers are lent (aligned, as Compress requires).
  const std::span<std::byte> lent_scratch =
      arena.AllocateBytes(CodecScratchBytes(codec, layout)).value();
  MeanAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(arena, AllCodecs(), layout, codec).ok());
  Optimizer optimizer;
  ASSERT_TRUE(optimizer.Init(arena, d, optimizer_params).ok());
  arena.Seal();

  const PayloadShape shape = EncodedShape(codec, layout).value();
  std::vector<std::uint32_t> indices(shape.indices), words(shape.words);
  std::vector<float> values(shape.values), scales(shape.scales);
  const PayloadSpans out{indices, values, words, scales};
  const auto targets = Targets(d);
  std::vector<float> model(d, 0.0f), gradient(d), single_device(d, 0.0f);

  const std::size_t before = testing::HeapAllocationCount();
  for (int round = 0; round < kSteadyStateRounds; ++round) {
    aggregator.Reset();
    for (std::size_t w = 0; w < kWorkers; ++w) {
      ErrorFeedbackWorker& worker = workers[w];
      ASSERT_TRUE(worker.BeginRound(model).ok());
      const std::span<const float> point = worker.GradientPoint();
      for (std::size_t i = 0; i < d; ++i) gradient[i] = point[i] - targets[w][i];
      ASSERT_TRUE(worker.LocalStep(gradient).ok());
      const CodecContext context{99, static_cast<std::uint32_t>(round),
                                 static_cast<std::uint32_t>(w)};
      const Result<PayloadShape> sent = worker.Compress(context, out, lent_scratch);
      ASSERT_TRUE(sent.ok());
      ASSERT_TRUE(aggregator.Add(PayloadView(out, *sent), context).ok());
    }
    ASSERT_TRUE(aggregator.AddScaledMean(-1.0f, model).ok());
    // A stateful selector (reg_top_k) learns from the round's mean; no-op for other codecs.
    const Result<std::span<const float>> mean = aggregator.Mean();
    ASSERT_TRUE(mean.ok());
    for (ErrorFeedbackWorker& worker : workers) {
      ASSERT_TRUE(worker.ObserveAggregate(*mean, static_cast<std::uint32_t>(kWorkers)).ok());
    }
    for (std::size_t i = 0; i < d; ++i) gradient[i] = single_device[i] - targets[0][i];
    ASSERT_TRUE(optimizer.Step(single_device, gradient).ok());
  }
  EXPECT_EQ(testing::HeapAllocationCount() - before, 0u)
      << "codec " << CodecName(codec) << " allocated in steady state";
}

INSTANTIATE_TEST_SUITE_P(EveryCodec, SteadyStateTest,
                         ::testing::ValuesIn(test_util::CodecIds()), test_util::CodecIdName);

// DQ-SGD: each round a level count from qsgd's schedule (the registry's RoundParams), the worker
// quantizing with it and the aggregator decoding each payload with its own count, all inside
// the Init buffers.
TEST(SteadyStateTest, DynamicQuantizationRoundsDoNotAllocate) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const QsgdParams dq{.bucket = 128,
                      .schedule = QuantScheduleKind::kDq,
                      .bits_min = 2,
                      .bits_max = 8,
                      .dq_k = 5.0f,
                      .dq_rho = 0.98f};
  const CodecParams codec = dq;
  FeedbackParams feedback;
  feedback.kind = FeedbackKind::kEf;
  feedback.learning_rate = 0.05f;
  feedback.momentum = 0.0f;
  const std::size_t arena_bytes = kWorkers * ErrorFeedbackWorker::StateBytes(layout, codec, feedback) +
                                  MeanAggregator::StateBytes(layout, codec);
  std::vector<std::byte> storage(arena_bytes + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  std::vector<ErrorFeedbackWorker> workers(kWorkers);
  for (auto& worker : workers) {
    ASSERT_TRUE(worker.Init(arena, AllCodecs(), layout, codec, feedback).ok());
  }
  MeanAggregator aggregator;
  ASSERT_TRUE(aggregator.Init(arena, AllCodecs(), layout, codec).ok());
  arena.Seal();

  const PayloadShape shape = EncodedShape(codec, layout).value();
  std::vector<std::uint32_t> indices(shape.indices), words(shape.words);
  std::vector<float> values(shape.values), scales(shape.scales);
  const PayloadSpans out{indices, values, words, scales};
  const auto targets = Targets(d);
  std::vector<float> model(d, 0.0f), gradient(d);
  std::uint32_t fewest_levels = QsgdCodec::MaxLevels(dq), most_levels = 0;

  const std::size_t before = testing::HeapAllocationCount();
  for (int round = 0; round < kSteadyStateRounds; ++round) {
    const auto t = static_cast<std::uint32_t>(round);
    aggregator.Reset();
    for (std::size_t w = 0; w < kWorkers; ++w) {
      ErrorFeedbackWorker& worker = workers[w];
      ASSERT_TRUE(worker.BeginRound(model).ok());
      const std::span<const float> point = worker.GradientPoint();
      for (std::size_t i = 0; i < d; ++i) gradient[i] = point[i] - targets[w][i];
      ASSERT_TRUE(worker.LocalStep(gradient).ok());
      const Result<CodecParams> round_params =
          AllCodecs().RoundParams(codec, t, kSteadyStateRounds, gradient);
      ASSERT_TRUE(round_params.ok());
      const auto* chosen = std::get_if<QsgdParams>(&round_params.value());
      ASSERT_NE(chosen, nullptr);
      fewest_levels = std::min(fewest_levels, chosen->levels);
      most_levels = std::max(most_levels, chosen->levels);
      ASSERT_TRUE(worker.SetRoundParams(*chosen).ok());
      const CodecContext context{99, t, static_cast<std::uint32_t>(w)};
      const Result<PayloadShape> sent = worker.Compress(context, out);
      ASSERT_TRUE(sent.ok());
      ASSERT_TRUE(aggregator.AddWithParams(worker.codec(), PayloadView(out, *sent), context).ok());
    }
    ASSERT_TRUE(aggregator.AddScaledMean(-1.0f, model).ok());
  }
  EXPECT_EQ(testing::HeapAllocationCount() - before, 0u) << "dq allocated in steady state";
  EXPECT_LT(fewest_levels, most_levels);  // the schedule did change the width
}

TEST(SteadyStateTest, SignumMajorityVoteRoundsDoNotAllocate) {
  const TensorLayout layout = TestLayout();
  const std::size_t d = layout.dimension();
  const SignParams codec{.scale = SignScale::kUnit};
  std::vector<std::byte> storage(MajorityVote::StateBytes(layout, kWorkers) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  MajorityVote vote;
  ASSERT_TRUE(vote.Init(arena, layout, kWorkers).ok());
  arena.Seal();

  const PayloadShape shape = EncodedShape(codec, layout).value();
  std::vector<std::uint32_t> words(shape.words), vote_words(shape.words);
  std::vector<float> scales(shape.scales);
  const PayloadSpans out{{}, {}, words, scales};
  const auto targets = Targets(d);
  std::vector<std::vector<float>> momenta(kWorkers, std::vector<float>(d, 0.0f));
  std::vector<float> model(d, 0.0f), gradient(d);

  const std::size_t before = testing::HeapAllocationCount();
  for (int round = 0; round < kSteadyStateRounds; ++round) {
    vote.Reset();
    for (std::size_t w = 0; w < kWorkers; ++w) {
      for (std::size_t i = 0; i < d; ++i) gradient[i] = model[i] - targets[w][i];
      ASSERT_TRUE(SignumMomentumUpdate(0.9f, gradient, momenta[w]).ok());
      ASSERT_TRUE(SignCodec::Encode(codec, layout, {}, momenta[w], out, {}).ok());
      ASSERT_TRUE(vote.AddVote(words).ok());
    }
    ASSERT_TRUE(vote.Finish(vote_words).ok());
    ASSERT_TRUE(ApplySignVote(vote_words, layout, 1e-3f, 1e-4f, model).ok());
  }
  EXPECT_EQ(testing::HeapAllocationCount() - before, 0u);
}

}  // namespace
}  // namespace edgesgd
