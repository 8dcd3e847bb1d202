// FedNova (aggregation/fednova.h): the component's normalized step, its refusals, and whole runs
// whose workers take different numbers of local steps, where FedAvg settles at the optimum
// weighted towards the workers that did more and FedNova near the federation's.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "edgesgd/protocol/aggregation/fednova.h"
#include "edgesgd/protocol/aggregation_registry.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {
namespace {

constexpr std::uint32_t kRunSteps = 10;

RunConfig FedNovaConfig(std::size_t dimension, std::uint32_t rounds) {
  RunConfig config = MeanConfig(dimension, kCodecId<IdentityCodec>, rounds);
  config.feedback.kind = FeedbackKind::kNone;
  config.feedback.momentum = 0.0f;
  config.feedback.local_steps = kRunSteps;
  config.aggregation_options = FedNovaAggregation::kOption.bit;
  return config;
}

TEST(FedNovaTest, IsTheComponentOfItsOption) {
  const RunConfig config = FedNovaConfig(8, 5);
  const AggregationDescriptor* fednova = FindAggregation(config);
  ASSERT_NE(fednova, nullptr);
  EXPECT_STREQ(fednova->name, "fednova");
  RunConfig plain = config;
  plain.aggregation_options = 0;
  const AggregationDescriptor* mean = FindAggregation(plain);
  ASSERT_NE(mean, nullptr);
  EXPECT_STREQ(mean->name, "mean");
  EXPECT_TRUE(ValidateRunConfig(config).ok());
  EXPECT_TRUE(ValidateServerChoices(config).ok()) << ValidateServerChoices(config).reason();
}

TEST(FedNovaTest, StepsByTheMeanProgressPerLocalStep) {
  constexpr std::size_t kDim = 5;
  const RunConfig config = FedNovaConfig(kDim, 5);
  const AggregationDescriptor* descriptor = FindAggregation(config);
  ASSERT_NE(descriptor, nullptr);
  ArenaStorage storage(descriptor->arena_bytes(config, 3));
  const Result<Aggregation*> created =
      descriptor->create(storage.arena, AggregationSetup{&AllCodecs(), &config, 3});
  ASSERT_TRUE(created.ok()) << created.status().reason();
  Aggregation& fednova = *created.value();

  // Three updates of 1, 4 and all 10 local steps (an Update that names none took H).
  const std::vector<std::vector<float>> deltas = {
      PseudoRandom(kDim, 1, 1.0f), PseudoRandom(kDim, 2, 1.0f), PseudoRandom(kDim, 3, 1.0f)};
  const std::uint32_t named_steps[] = {1, 4, 0};
  const double taken_steps[] = {1.0, 4.0, 10.0};
  fednova.BeginRound(7);
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    PayloadView payload;
    payload.values = deltas[i];
    wire::UpdateInfo update;
    update.worker = static_cast<std::uint32_t>(i + 1);
    update.local_steps = named_steps[i];
    ASSERT_TRUE(fednova.Add(IdentityParams{}, payload, {42, 7, update.worker}, update).ok());
  }
  std::vector<float> model(kDim, 0.5f);
  ASSERT_TRUE(fednova.Apply({}, {42, 7, 0}, model).ok());
  const double tau_eff = (1.0 + 4.0 + 10.0) / 3.0;
  for (std::size_t j = 0; j < kDim; ++j) {
    double normalized = 0.0;
    for (std::size_t i = 0; i < deltas.size(); ++i) {
      normalized += static_cast<double>(deltas[i][j]) / taken_steps[i];
    }
    EXPECT_NEAR(model[j], 0.5 - tau_eff * normalized / 3.0, 1e-5) << j;
  }

  // An update that claims more steps than H is refused, and adds nothing.
  fednova.BeginRound(8);
  PayloadView payload;
  payload.values = deltas[0];
  wire::UpdateInfo boastful;
  boastful.worker = 1;
  boastful.local_steps = kRunSteps + 1;
  EXPECT_EQ(fednova.Add(IdentityParams{}, payload, {42, 8, 1}, boastful),
            Status::InvalidArgument());
  EXPECT_FALSE(fednova.Apply({}, {42, 8, 0}, model).ok());
}

TEST(FedNovaTest, RefusesMomentumWithAReason) {
  RunConfig config = FedNovaConfig(8, 5);
  config.feedback.momentum = 0.9f;
  const Status check = ValidateServerChoices(config);
  EXPECT_EQ(check, Status::InvalidArgument());
  EXPECT_NE(std::string(check.reason()).find("--momentum"), std::string::npos);
}

// Workers 1 and 2 fit one local step of the run's ten, 3 and 4 all ten; gradient x - c_i at lr
// eta. A round moves worker i by a_i (x - c_i) with a_i = 1 - (1 - eta)^tau_i, so FedAvg settles
// at sum a_i c_i / sum a_i, and FedNova, which divides each move by tau_i, at the same average
// with weights a_i / tau_i (all near eta: the mean of the c_i).
TEST(FedNovaTest, RemovesTheLeanTowardsWorkersWithMoreSteps) {
  constexpr std::size_t kDim = 16;
  constexpr double kLr = 0.02;
  const std::uint32_t limits[] = {1, 1, 0, 0};
  const std::vector<std::vector<float>> targets = Targets(4, kDim);
  std::vector<double> fedavg_weights;
  std::vector<double> fednova_weights;
  for (const std::uint32_t limit : limits) {
    const double steps = limit == 0 ? kRunSteps : limit;
    const double moved = 1.0 - std::pow(1.0 - kLr, steps);
    fedavg_weights.push_back(moved);
    fednova_weights.push_back(moved / steps);
  }
  const auto settled = [&](const std::vector<double>& weights) {
    std::vector<float> point(kDim, 0.0f);
    double total = 0.0;
    for (const double w : weights) total += w;
    for (std::size_t j = 0; j < kDim; ++j) {
      double sum = 0.0;
      for (std::size_t i = 0; i < weights.size(); ++i) {
        sum += weights[i] * static_cast<double>(targets[i][j]);
      }
      point[j] = static_cast<float>(sum / total);
    }
    return point;
  };
  const auto run = [&](bool normalized) {
    RunConfig config = FedNovaConfig(kDim, 600);
    config.feedback.learning_rate = static_cast<float>(kLr);
    if (!normalized) config.aggregation_options = 0;
    Cluster cluster(config, FourWorkers(), targets, std::vector<float>(kDim, 0.0f), {},
                    [&limits](PeerId id, WorkerOptions& options) {
                      options.local_step_limit = limits[id - 1];
                    });
    cluster.Start();
    EXPECT_TRUE(cluster.RunUntilFinished(1000 * kSecond));
    return std::vector<float>(cluster.server().model().begin(), cluster.server().model().end());
  };
  const std::vector<float> fedavg = run(false);
  const std::vector<float> fednova = run(true);
  EXPECT_LT(Distance(fedavg, settled(fedavg_weights)), 1e-3f);
  EXPECT_LT(Distance(fednova, settled(fednova_weights)), 1e-3f);
  // Against the federation's optimum, the mean of the targets.
  std::vector<double> equal(4, 1.0);
  const std::vector<float> optimum = settled(equal);
  EXPECT_GT(Distance(fedavg, optimum), 0.5f);
  EXPECT_LT(Distance(fednova, optimum), 0.1f * Distance(fedavg, optimum));
}

}  // namespace
}  // namespace edgesgd::protocol::testing
