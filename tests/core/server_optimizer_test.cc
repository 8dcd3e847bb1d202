#include "edgesgd/core/server_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/test_util.h"

namespace edgesgd {
namespace {

using test_util::ArenaBox;

constexpr ServerOptimizerKind kAllKinds[] = {
    ServerOptimizerKind::kFedAvg, ServerOptimizerKind::kFedAvgM, ServerOptimizerKind::kFedAdagrad,
    ServerOptimizerKind::kFedAdam, ServerOptimizerKind::kFedYogi};

// A server optimizer in an arena of exactly its StateBytes.
struct OptimizerBox {
  OptimizerBox(std::size_t dimension, const ServerOptimizerParams& params)
      : box(ServerOptimizer::StateBytes(dimension, params)) {
    status = optimizer.Init(box.arena, dimension, params);
  }
  // `steps` steps of the same change from `start`; the final model.
  std::vector<float> Run(std::vector<float> model, const std::vector<float>& change, int steps) {
    for (int s = 0; s < steps; ++s) EXPECT_TRUE(optimizer.Step(model, change).ok());
    return model;
  }
  ArenaBox box;
  ServerOptimizer optimizer;
  Status status;
};

ServerOptimizerParams Params(ServerOptimizerKind kind, float lr = 0.1f) {
  return ServerOptimizerParams{.kind = kind, .learning_rate = lr, .beta1 = 0.9f, .beta2 = 0.99f,
                               .tau = 0.01f};
}

TEST(ServerOptimizerTest, FedAvgMovesByTheScaledChange) {
  OptimizerBox plain(2, Params(ServerOptimizerKind::kFedAvg, 1.0f));
  ASSERT_TRUE(plain.status.ok());
  EXPECT_EQ(plain.optimizer.state().size(), 0u);
  EXPECT_EQ(plain.Run({1.0f, 2.0f}, {0.5f, -0.25f}, 1), (std::vector<float>{1.5f, 1.75f}));
  OptimizerBox half(2, Params(ServerOptimizerKind::kFedAvg, 0.5f));
  EXPECT_EQ(half.Run({1.0f, 2.0f}, {0.5f, -0.25f}, 2), (std::vector<float>{1.5f, 1.75f}));
}

TEST(ServerOptimizerTest, FedAvgMAccumulatesAGeometricMomentum) {
  // With a constant change c, m_k = c (1 - beta^k) / (1 - beta), and x moves by eta sum_k m_k.
  OptimizerBox avgm(1, Params(ServerOptimizerKind::kFedAvgM, 1.0f));
  ASSERT_TRUE(avgm.status.ok());
  const std::vector<float> moved = avgm.Run({0.0f}, {1.0f}, 3);
  EXPECT_FLOAT_EQ(avgm.optimizer.state()[0], 1.0f + 0.9f + 0.81f);
  EXPECT_FLOAT_EQ(moved[0], 1.0f + 1.9f + 2.71f);
  // beta1 = 0 is FedAvg.
  ServerOptimizerParams no_momentum = Params(ServerOptimizerKind::kFedAvgM, 0.5f);
  no_momentum.beta1 = 0.0f;
  OptimizerBox plain(2, no_momentum);
  EXPECT_EQ(plain.Run({1.0f, 2.0f}, {0.5f, -0.25f}, 2), (std::vector<float>{1.5f, 1.75f}));
}

// The adaptive optimizers' moments after k steps of a constant change c, as the update rules
// give them in closed form (m_0 = 0, v_0 = tau^2).
TEST(ServerOptimizerTest, AdaptiveMomentsFollowTheirRules) {
  constexpr int kSteps = 4;
  constexpr double c = 0.5;
  constexpr double tau = 0.01;
  const double m = c * (1.0 - std::pow(0.9, kSteps));
  const double adagrad_v = tau * tau + kSteps * c * c;
  const double adam_v = tau * tau * std::pow(0.99, kSteps) + c * c * (1.0 - std::pow(0.99, kSteps));
  // Yogi with v below c^2 grows by (1 - beta2) c^2 a step.
  const double yogi_v = tau * tau + kSteps * 0.01 * c * c;
  const struct {
    ServerOptimizerKind kind;
    double v;
  } cases[] = {{ServerOptimizerKind::kFedAdagrad, adagrad_v},
               {ServerOptimizerKind::kFedAdam, adam_v},
               {ServerOptimizerKind::kFedYogi, yogi_v}};
  for (const auto& test : cases) {
    SCOPED_TRACE(std::string(ServerOptimizerName(test.kind)));
    OptimizerBox box(1, Params(test.kind));
    ASSERT_TRUE(box.status.ok());
    box.Run({0.0f}, {static_cast<float>(c)}, kSteps);
    ASSERT_EQ(box.optimizer.state().size(), 2u);
    EXPECT_NEAR(box.optimizer.state()[0], m, 1e-6);
    EXPECT_NEAR(box.optimizer.state()[1], test.v, 1e-6);
  }
}

TEST(ServerOptimizerTest, YogiMovesTheSecondMomentTowardsTheSquaredChange) {
  OptimizerBox yogi(1, Params(ServerOptimizerKind::kFedYogi));
  yogi.Run({0.0f}, {2.0f}, 1);  // v = tau^2 + 0.01 * 4, below c^2 = 4
  const float after_large = yogi.optimizer.state()[1];
  EXPECT_NEAR(after_large, 1e-4 + 0.04, 1e-6);
  yogi.Run({0.0f}, {0.1f}, 1);  // c^2 = 0.01 < v: v shrinks by (1 - beta2) c^2
  EXPECT_NEAR(yogi.optimizer.state()[1], static_cast<double>(after_large) - 0.01 * 0.01, 1e-6);
}

// The first adaptive step is about eta per coordinate whatever the change's scale (m / sqrt(v)
// = (1 - beta1) c / sqrt((1 - beta2) c^2) for FedAdam): the property that makes them robust to
// the scale of client updates.
TEST(ServerOptimizerTest, AnAdaptiveStepIsAboutTheLearningRatePerCoordinate) {
  OptimizerBox adam(3, Params(ServerOptimizerKind::kFedAdam, 0.01f));
  const std::vector<float> moved = adam.Run({0.0f, 0.0f, 0.0f}, {1000.0f, -30.0f, 50.0f}, 1);
  EXPECT_NEAR(moved[0], 0.01, 1e-4);
  EXPECT_NEAR(moved[1], -0.01, 1e-4);
  EXPECT_NEAR(moved[2], 0.01, 1e-4);
  OptimizerBox adagrad(1, Params(ServerOptimizerKind::kFedAdagrad, 0.01f));
  // m = 0.1 c, v ~ c^2: a tenth of eta.
  EXPECT_NEAR(adagrad.Run({0.0f}, {-1000.0f}, 1)[0], -0.001, 1e-5);
}

TEST(ServerOptimizerTest, StateBytesAreExactAndSmallerArenasAreRefused) {
  for (const ServerOptimizerKind kind : kAllKinds) {
    SCOPED_TRACE(std::string(ServerOptimizerName(kind)));
    const ServerOptimizerParams params = Params(kind);
    const std::size_t bytes = ServerOptimizer::StateBytes(7, params);
    const std::size_t floats = kind == ServerOptimizerKind::kFedAvg   ? 0
                               : kind == ServerOptimizerKind::kFedAvgM ? 7
                                                                       : 14;
    EXPECT_EQ(ServerOptimizer::StateFloats(7, params), floats);
    OptimizerBox exact(7, params);
    ASSERT_TRUE(exact.status.ok());
    EXPECT_EQ(exact.box.arena.remaining_bytes(), 0u);
    EXPECT_EQ(exact.optimizer.state().size(), floats);
    if (bytes == 0) continue;
    ArenaBox small(bytes - 1);
    ServerOptimizer optimizer;
    EXPECT_EQ(optimizer.Init(small.arena, 7, params).code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(small.arena.remaining_bytes(), bytes - 1);
  }
}

TEST(ServerOptimizerTest, BadParametersAndCallsAreRefused) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto refused = [](ServerOptimizerParams params) {
    return ValidateServerOptimizerParams(params).code() == StatusCode::kInvalidArgument &&
           ServerOptimizer::StateBytes(4, params) == 0;
  };
  ServerOptimizerParams p = Params(ServerOptimizerKind::kFedAdam);
  EXPECT_TRUE(ValidateServerOptimizerParams(p).ok());
  for (const float lr : {0.0f, -1.0f, nan, std::numeric_limits<float>::infinity()}) {
    p.learning_rate = lr;
    EXPECT_TRUE(refused(p)) << lr;
  }
  p = Params(ServerOptimizerKind::kFedAdam);
  p.beta1 = 1.0f;
  EXPECT_TRUE(refused(p));
  p = Params(ServerOptimizerKind::kFedYogi);
  p.beta2 = nan;
  EXPECT_TRUE(refused(p));
  p = Params(ServerOptimizerKind::kFedAdagrad);
  p.tau = 0.0f;
  EXPECT_TRUE(refused(p));
  p.kind = static_cast<ServerOptimizerKind>(9);
  EXPECT_TRUE(refused(p));
  EXPECT_EQ(ServerOptimizerName(p.kind), "unknown");
  // Fields a kind does not read are not checked, and normalize to their defaults.
  ServerOptimizerParams avg = Params(ServerOptimizerKind::kFedAvg, 0.5f);
  avg.beta1 = 7.0f;
  avg.tau = -1.0f;
  EXPECT_TRUE(ValidateServerOptimizerParams(avg).ok());
  EXPECT_EQ(NormalizedServerOptimizerParams(avg),
            (ServerOptimizerParams{.kind = ServerOptimizerKind::kFedAvg, .learning_rate = 0.5f}));
  EXPECT_FALSE(ChangesFedAvg(ServerOptimizerParams{}));
  EXPECT_TRUE(ChangesFedAvg(avg));

  ServerOptimizer uninitialized;
  std::vector<float> model(2);
  EXPECT_EQ(uninitialized.Step(model, model).code(), StatusCode::kFailedPrecondition);
  OptimizerBox box(2, Params(ServerOptimizerKind::kFedAdam));
  std::vector<float> short_change(1);
  EXPECT_EQ(box.optimizer.Step(model, short_change).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model, std::vector<float>(2));
  ArenaBox empty(0);
  ServerOptimizer zero;
  EXPECT_EQ(zero.Init(empty.arena, 0, Params(ServerOptimizerKind::kFedAvgM)).code(),
            StatusCode::kInvalidArgument);
}

// A checkpoint's state, restored into a fresh optimizer from unaligned bytes, continues the run
// bit for bit; a state of the wrong size, not finite or with a negative second moment changes
// nothing.
TEST(ServerOptimizerTest, SavedStateRestoresAndBadStateIsRefused) {
  const std::vector<float> change{0.3f, -0.7f, 1.1f};
  for (const ServerOptimizerKind kind : kAllKinds) {
    SCOPED_TRACE(std::string(ServerOptimizerName(kind)));
    OptimizerBox original(3, Params(kind));
    std::vector<float> model = original.Run({1.0f, 2.0f, 3.0f}, change, 3);
    const std::span<const float> state = original.optimizer.state();
    std::vector<std::byte> unaligned(state.size_bytes() + 1);
    if (!state.empty()) std::memcpy(unaligned.data() + 1, state.data(), state.size_bytes());
    const std::span<const std::byte> saved = std::span(unaligned).subspan(1);

    OptimizerBox resumed(3, Params(kind));
    ASSERT_TRUE(resumed.optimizer.RestoreState(saved).ok());
    std::vector<float> resumed_model = model;
    EXPECT_EQ(original.Run(model, change, 2), resumed.Run(resumed_model, change, 2));

    if (state.empty()) {
      EXPECT_EQ(resumed.optimizer.RestoreState(std::span(unaligned)).code(),
                StatusCode::kInvalidArgument);
      continue;
    }
    const std::vector<float> before(resumed.optimizer.state().begin(),
                                    resumed.optimizer.state().end());
    EXPECT_EQ(resumed.optimizer.RestoreState(saved.first(saved.size() - 1)).code(),
              StatusCode::kInvalidArgument);
    std::vector<float> bad(state.begin(), state.end());
    bad[0] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(resumed.optimizer.RestoreState(std::as_bytes(std::span(bad))).code(),
              StatusCode::kInvalidArgument);
    if (IsAdaptive(kind)) {
      bad.assign(state.begin(), state.end());
      bad.back() = -1.0f;
      EXPECT_EQ(resumed.optimizer.RestoreState(std::as_bytes(std::span(bad))).code(),
                StatusCode::kInvalidArgument);
    }
    EXPECT_EQ(std::vector<float>(resumed.optimizer.state().begin(), resumed.optimizer.state().end()),
              before);
  }
}

}  // namespace
}  // namespace edgesgd
