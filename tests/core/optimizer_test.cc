#include "edgesgd/core/optimizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/random.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;
using test_util::kInf;
using test_util::kNaN;

OptimizerParams Params(OptimizerKind kind, float lr, float beta, float wd) {
  OptimizerParams params;
  params.kind = kind;
  params.learning_rate = lr;
  params.momentum = beta;
  params.weight_decay = wd;
  return params;
}

// An optimizer of `params` over `d` coordinates, initialised in an arena of its own.
struct OwnedOptimizer {
  OwnedOptimizer(std::size_t d, const OptimizerParams& params)
      : box(Optimizer::StateBytes(d, params)) {
    const Status init = optimizer.Init(box.arena, d, params);
    EXPECT_TRUE(init.ok()) << init.reason();
  }
  ArenaBox box;
  Optimizer optimizer;
};

// Packs sign bits the way SignCodec does: bit 1 = non-negative, tensors start on fresh words.
std::vector<std::uint32_t> PackSigns(std::span<const float> values, const TensorLayout& layout) {
  std::vector<std::uint32_t> words;
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    const std::span<const float> x = layout.Slice(values, t);
    const std::size_t first = words.size();
    words.resize(first + (x.size() + 31) / 32, 0u);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!(x[i] < 0.0f)) words[first + i / 32] |= std::uint32_t{1} << (i % 32);
    }
  }
  return words;
}

// All values below are exact in binary, so the expected results are exact too.
TEST(OptimizerTest, SgdMatchesHandComputedStep) {
  ArenaBox box(0);
  Optimizer sgd;
  ASSERT_TRUE(sgd.Init(box.arena, 3, Params(OptimizerKind::kSgd, 0.5f, 0.0f, 0.25f)).ok());
  EXPECT_TRUE(sgd.momentum().empty());
  std::vector<float> x = {1.0f, -2.0f, 0.5f};
  const std::vector<float> g = {0.5f, 1.0f, -4.0f};
  ASSERT_TRUE(sgd.Step(x, g).ok());
  // x - 0.5 * (g + 0.25 x)
  EXPECT_EQ(x, (std::vector<float>{0.625f, -2.25f, 2.4375f}));
}

TEST(OptimizerTest, MomentumMatchesHandComputedSteps) {
  ArenaBox box(Optimizer::StateBytes(2, Params(OptimizerKind::kMomentum, 0.5f, 0.5f, 0.0f)));
  Optimizer heavy_ball;
  ASSERT_TRUE(
      heavy_ball.Init(box.arena, 2, Params(OptimizerKind::kMomentum, 0.5f, 0.5f, 0.0f)).ok());
  std::vector<float> x = {1.0f, -2.0f};
  ASSERT_TRUE(heavy_ball.Step(x, std::vector<float>{1.0f, 2.0f}).ok());
  EXPECT_EQ(x, (std::vector<float>{0.5f, -3.0f}));  // m = (1, 2)
  ASSERT_TRUE(heavy_ball.Step(x, std::vector<float>{2.0f, -2.0f}).ok());
  // m = 0.5 (1, 2) + (2, -2) = (2.5, -1); x -= 0.5 m
  EXPECT_EQ(x, (std::vector<float>{-0.75f, -2.5f}));
  EXPECT_EQ(std::vector<float>(heavy_ball.momentum().begin(), heavy_ball.momentum().end()),
            (std::vector<float>{2.5f, -1.0f}));

  // Weight decay enters the momentum: m = beta m + (g + wd x).
  ArenaBox box2(Optimizer::StateBytes(1, Params(OptimizerKind::kMomentum, 0.25f, 0.5f, 0.5f)));
  Optimizer decayed;
  ASSERT_TRUE(
      decayed.Init(box2.arena, 1, Params(OptimizerKind::kMomentum, 0.25f, 0.5f, 0.5f)).ok());
  std::vector<float> y = {2.0f};
  ASSERT_TRUE(decayed.Step(y, std::vector<float>{1.0f}).ok());
  EXPECT_EQ(y[0], 1.5f);  // m = 1 + 1 = 2
  ASSERT_TRUE(decayed.Step(y, std::vector<float>{0.0f}).ok());
  EXPECT_EQ(y[0], 1.0625f);  // m = 1 + 0.75 = 1.75

  decayed.Reset();
  EXPECT_EQ(decayed.momentum()[0], 0.0f);
}

TEST(OptimizerTest, SignumMatchesHandComputedSteps) {
  const OptimizerParams params = Params(OptimizerKind::kSignum, 0.25f, 0.5f, 0.5f);
  OwnedOptimizer owned(3, params);
  Optimizer& signum = owned.optimizer;
  std::vector<float> x = {1.0f, 1.0f, 1.0f};
  ASSERT_TRUE(signum.Step(x, std::vector<float>{2.0f, -2.0f, 0.0f}).ok());
  // m = (1, -1, 0); sign = (+1, -1, +1); x -= 0.25 (sign + 0.5 x)
  EXPECT_EQ(x, (std::vector<float>{0.625f, 1.125f, 0.625f}));
  ASSERT_TRUE(signum.Step(x, std::vector<float>{-2.0f, 2.0f, 0.0f}).ok());
  // m = (-0.5, 0.5, 0); sign = (-1, +1, +1)
  EXPECT_EQ(x, (std::vector<float>{0.796875f, 0.734375f, 0.296875f}));
}

TEST(OptimizerTest, SignumTreatsZeroAsPositive) {
  const OptimizerParams params = Params(OptimizerKind::kSignum, 0.125f, 0.9f, 0.0f);
  OwnedOptimizer owned(3, params);
  Optimizer& signum = owned.optimizer;
  std::vector<float> x = {0.0f, 0.0f, 0.0f};
  ASSERT_TRUE(signum.Step(x, std::vector<float>{0.0f, -0.0f, -1e-30f}).ok());
  // m = (0, -0, -1e-31): sign(0) = sign(-0) = +1; a tiny negative is still -1.
  EXPECT_EQ(x, (std::vector<float>{-0.125f, -0.125f, 0.125f}));
}

// Distributed Signum with one worker: momentum update, sign packing, vote application — the
// same bits as the single-device optimizer, over a multi-tensor layout with ragged words.
TEST(OptimizerTest, SignumWorkerPiecesMatchSignumStep) {
  const std::uint64_t sizes[] = {33, 1, 70};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  const std::size_t d = layout.dimension();
  const OptimizerParams params = Params(OptimizerKind::kSignum, 0.01f, 0.9f, 1e-3f);
  OwnedOptimizer owned(d, params);
  Optimizer& signum = owned.optimizer;

  const SignParams sign_codec{.scale = SignScale::kUnit};
  const PayloadShape shape = EncodedShape(sign_codec, layout).value();
  std::vector<std::uint32_t> words(shape.words);
  std::vector<float> scales(shape.scales);

  std::vector<float> x(d, 0.5f);
  std::vector<float> y = x;
  std::vector<float> state(d, 0.0f);
  std::vector<float> gradient(d);
  for (std::uint32_t step = 0; step < 40; ++step) {
    CounterRng rng(1, step, 0, StreamId(RandomPurpose::kUser));
    for (std::size_t j = 0; j < d; ++j) {
      gradient[j] = rng.NextFloat() - 0.5f + (j % 5 == 0 ? 0.0f : 0.1f * x[j]);
    }
    gradient[3] = 0.0f;
    ASSERT_TRUE(signum.Step(x, gradient).ok());

    ASSERT_TRUE(SignumMomentumUpdate(params.momentum, gradient, state).ok());
    ASSERT_TRUE(SignCodec::Encode(sign_codec, layout, {}, state, {{}, {}, words, scales}, {}).ok());
    ASSERT_EQ(words, PackSigns(state, layout));
    ASSERT_TRUE(ApplySignVote(words, layout, params.learning_rate, params.weight_decay, y).ok());
    ASSERT_EQ(std::memcmp(x.data(), y.data(), d * sizeof(float)), 0) << "step " << step;
  }
}

TEST(OptimizerTest, ApplySignVoteRejectsBadInput) {
  const std::uint64_t sizes[] = {40, 8};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  std::vector<float> x(48, 1.0f);
  std::vector<std::uint32_t> words = {0xFFFFFFFFu, 0x000000FFu, 0x0Fu};
  EXPECT_EQ(ApplySignVote(std::span(words).first(2), layout, 0.1f, 0.0f, x), Status::DataLoss());
  EXPECT_EQ(ApplySignVote(words, layout, 0.0f, 0.0f, x), Status::InvalidArgument());
  EXPECT_EQ(ApplySignVote(words, layout, kNaN, 0.0f, x), Status::InvalidArgument());
  EXPECT_EQ(ApplySignVote(words, layout, 0.1f, -1.0f, x), Status::InvalidArgument());
  EXPECT_EQ(ApplySignVote(words, layout, 0.1f, 0.0f, std::span(x).first(47)),
            Status::InvalidArgument());
  EXPECT_EQ(ApplySignVote(words, TensorLayout(), 0.1f, 0.0f, x), Status::InvalidArgument());
  std::vector<std::uint32_t> padded = words;
  padded[1] |= 0x100u;  // coordinate 40 of a 40-coordinate tensor
  EXPECT_EQ(ApplySignVote(padded, layout, 0.1f, 0.0f, x), Status::DataLoss());
  for (const float v : x) EXPECT_EQ(v, 1.0f);  // untouched by the failures

  ASSERT_TRUE(ApplySignVote(words, layout, 0.5f, 0.0f, x).ok());
  for (std::size_t j = 0; j < 48; ++j) {
    // First tensor (0..39): all +1; second tensor (40..47): +1 for its coordinates 0..3.
    const bool plus = j < 44;
    EXPECT_EQ(x[j], plus ? 0.5f : 1.5f) << j;
  }
}

// Experiment C of docs/algorithms.md (shortened): with heavy noise on one coordinate, signSGD at
// lr 1e-2 beats SGD at lr 1e-3 on f(x) = ||x||^2 / 2.
TEST(OptimizerTest, SignSgdBeatsSgdUnderSparseNoise) {
  constexpr std::size_t kDim = 100;
  constexpr int kSteps = 1000;
  constexpr int kRuns = 5;
  double sgd_loss = 0.0;
  double sign_loss = 0.0;
  for (int run = 0; run < kRuns; ++run) {
    std::mt19937 rng(static_cast<std::uint32_t>(run));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> start(kDim);
    for (float& v : start) v = normal(rng);
    for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kSignum}) {
      const float lr = kind == OptimizerKind::kSgd ? 1e-3f : 1e-2f;
      const OptimizerParams params = Params(kind, lr, 0.0f, 0.0f);  // beta 0: plain signSGD
      OwnedOptimizer owned(kDim, params);
      Optimizer& optimizer = owned.optimizer;
      std::vector<float> x = start;
      std::vector<float> g(kDim);
      for (int step = 0; step < kSteps; ++step) {
        for (std::size_t j = 0; j < kDim; ++j) g[j] = x[j];
        g[0] += 100.0f * normal(rng);
        ASSERT_TRUE(optimizer.Step(x, g).ok());
      }
      double f = 0.0;
      for (const float v : x) f += 0.5 * static_cast<double>(v) * static_cast<double>(v);
      (kind == OptimizerKind::kSgd ? sgd_loss : sign_loss) += f / kRuns;
    }
  }
  EXPECT_LT(sign_loss, sgd_loss);
  EXPECT_LT(sign_loss, 2.0);
}

TEST(OptimizerTest, StateBytesMatchesArenaUsage) {
  for (const OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kSignum}) {
    for (const std::size_t d : {std::size_t{1}, std::size_t{5}, std::size_t{1000}}) {
      const OptimizerParams params = Params(kind, 0.1f, 0.9f, 0.0f);
      const std::size_t bytes = Optimizer::StateBytes(d, params);
      EXPECT_EQ(bytes, kind == OptimizerKind::kSgd ? 0u : ArenaBytesFor<float>(d));
      ArenaBox box(bytes);
      Optimizer optimizer;
      ASSERT_TRUE(optimizer.Init(box.arena, d, params).ok());
      EXPECT_EQ(box.arena.used_bytes(), bytes);
    }
  }
  static_assert(Optimizer::StateBytes(256, OptimizerParams{}) == 0);
}

TEST(OptimizerTest, RejectsBadParameters) {
  for (const OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kSignum}) {
    for (const float lr : {0.0f, -1.0f, kInf, kNaN}) {
      EXPECT_EQ(ValidateOptimizerParams(Params(kind, lr, 0.5f, 0.0f)), Status::InvalidArgument());
    }
    for (const float wd : {-0.5f, kInf, kNaN}) {
      EXPECT_EQ(ValidateOptimizerParams(Params(kind, 0.1f, 0.5f, wd)), Status::InvalidArgument());
    }
  }
  for (const float beta : {1.0f, -0.1f, kNaN}) {
    EXPECT_EQ(ValidateOptimizerParams(Params(OptimizerKind::kMomentum, 0.1f, beta, 0.0f)),
              Status::InvalidArgument());
    EXPECT_EQ(ValidateOptimizerParams(Params(OptimizerKind::kSignum, 0.1f, beta, 0.0f)),
              Status::InvalidArgument());
    EXPECT_EQ(SignumMomentumUpdate(beta, {}, {}), Status::InvalidArgument());
  }
  // SGD does not read beta.
  EXPECT_TRUE(ValidateOptimizerParams(Params(OptimizerKind::kSgd, 0.1f, 5.0f, 0.0f)).ok());
  EXPECT_EQ(ValidateOptimizerParams(Params(static_cast<OptimizerKind>(7), 0.1f, 0.5f, 0.0f)),
            Status::InvalidArgument());

  const OptimizerParams good = Params(OptimizerKind::kMomentum, 0.1f, 0.5f, 0.0f);
  std::vector<float> x(4, 1.0f);
  std::vector<float> g(4, 1.0f);
  Optimizer optimizer;
  EXPECT_EQ(optimizer.Step(x, g), Status::FailedPrecondition());
  {
    ArenaBox box(Optimizer::StateBytes(4, good) - 1);
    EXPECT_EQ(optimizer.Init(box.arena, 4, good), Status::ResourceExhausted());
    EXPECT_EQ(box.arena.used_bytes(), 0u);
    EXPECT_EQ(optimizer.Init(box.arena, 0, good), Status::InvalidArgument());
    EXPECT_EQ(optimizer.Init(box.arena, 4, Params(OptimizerKind::kSignum, kNaN, 0.5f, 0.0f)),
              Status::InvalidArgument());
    box.arena.Seal();
    EXPECT_EQ(optimizer.Init(box.arena, 4, good), Status::FailedPrecondition());
  }
  ArenaBox box(Optimizer::StateBytes(4, good));
  ASSERT_TRUE(optimizer.Init(box.arena, 4, good).ok());
  EXPECT_EQ(optimizer.Step(std::span(x).first(3), g), Status::InvalidArgument());
  EXPECT_EQ(optimizer.Step(x, std::span(g).first(3)), Status::InvalidArgument());
  EXPECT_EQ(optimizer.SetLearningRate(0.0f), Status::InvalidArgument());
  EXPECT_EQ(optimizer.params().learning_rate, 0.1f);
  ASSERT_TRUE(optimizer.SetLearningRate(0.5f).ok());
  ASSERT_TRUE(optimizer.Step(x, g).ok());
  EXPECT_EQ(x[0], 0.5f);
  EXPECT_EQ(SignumMomentumUpdate(0.5f, g, std::span(x).first(3)), Status::InvalidArgument());
}

}  // namespace
}  // namespace edgesgd
