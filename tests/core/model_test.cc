#include "edgesgd/core/model/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/model_test_util.h"
#include "edgesgd/core/data/synthetic.h"
#include "edgesgd/core/model/linear_regression.h"
#include "edgesgd/core/model/loss_functions.h"
#include "edgesgd/core/model/mlp.h"
#include "edgesgd/core/model/softmax_regression.h"

namespace edgesgd {
namespace {

using namespace test_util;  // NOLINT: the model tests' shared helpers

// ---- Double-precision reference losses, written independently of the kernels. ----

double Dot(const std::vector<double>& params, std::size_t offset, const float* x, std::size_t n) {
  double sum = 0.0;
  for (std::size_t j = 0; j < n; ++j) sum += params[offset + j] * static_cast<double>(x[j]);
  return sum;
}

double LogSumExpCrossEntropy(const std::vector<double>& logits, std::size_t label) {
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (const double z : logits) total += std::exp(z - max_logit);
  return std::log(total) + max_logit - logits[label];
}

double ReferenceLoss(const ModelSpec& spec, const std::vector<double>& p, const OwnedData& data) {
  const std::size_t d = spec.features;
  double loss = 0.0;
  for (std::size_t i = 0; i < data.samples; ++i) {
    const float* x = data.features.data() + i * d;
    switch (spec.kind) {
      case ModelKind::kLinearRegression: {
        const double r =
            Dot(p, 0, x, d) + (spec.bias ? p[d] : 0.0) - static_cast<double>(data.targets[i]);
        loss += r * r;
        break;
      }
      case ModelKind::kLogisticRegression: {
        const double z = Dot(p, 0, x, d) + (spec.bias ? p[d] : 0.0);
        const double y = data.labels[i] != 0 ? 1.0 : 0.0;
        loss += std::log1p(std::exp(z)) - y * z;
        break;
      }
      case ModelKind::kSoftmaxRegression: {
        std::vector<double> logits(spec.classes);
        for (std::size_t c = 0; c < spec.classes; ++c) {
          logits[c] = Dot(p, c * d, x, d) + (spec.bias ? p[spec.classes * d + c] : 0.0);
        }
        loss += LogSumExpCrossEntropy(logits, data.labels[i]);
        break;
      }
      case ModelKind::kMlp: {
        const std::size_t h = spec.hidden;
        const std::size_t b1 = h * d;
        const std::size_t w2 = b1 + (spec.bias ? h : 0);
        const std::size_t b2 = w2 + spec.classes * h;
        std::vector<double> hidden(h);
        for (std::size_t j = 0; j < h; ++j) {
          const double pre = Dot(p, j * d, x, d) + (spec.bias ? p[b1 + j] : 0.0);
          hidden[j] = std::max(pre, 0.0);
        }
        std::vector<double> logits(spec.classes);
        for (std::size_t c = 0; c < spec.classes; ++c) {
          double z = spec.bias ? p[b2 + c] : 0.0;
          for (std::size_t j = 0; j < h; ++j) z += p[w2 + c * h + j] * hidden[j];
          logits[c] = z;
        }
        loss += LogSumExpCrossEntropy(logits, data.labels[i]);
        break;
      }
      case ModelKind::kSequential:
        ADD_FAILURE() << "sequential networks have their reference in sequential_test.cc";
        break;
    }
  }
  return loss / static_cast<double>(data.samples);
}

// Classes of the labels `spec` trains on (0: regression targets).
std::size_t LabelClasses(const ModelSpec& spec) {
  switch (spec.kind) {
    case ModelKind::kLinearRegression:
      return 0;
    case ModelKind::kLogisticRegression:
      return 2;
    default:
      return spec.classes;
  }
}

// Checks loss and gradient of `spec` against central finite differences of the double
// reference at random parameters.
void ExpectGradientMatchesFiniteDifferences(const ModelSpec& spec, std::uint32_t seed) {
  const OwnedData data = RandomData(9, spec.features, LabelClasses(spec), seed);
  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());

  std::mt19937 engine(seed + 1);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> params(model.parameter_count());
  for (float& value : params) value = normal(engine);
  std::vector<float> gradient(params.size(), 123.0f);
  const Result<float> loss = model.LossAndGradient(params, data.View(), gradient);
  ASSERT_TRUE(loss.ok());

  std::vector<double> reference(params.begin(), params.end());
  const double reference_loss = ReferenceLoss(spec, reference, data);
  EXPECT_NEAR(static_cast<double>(*loss), reference_loss, 1e-5 * (1.0 + reference_loss));

  const std::vector<double> numeric =
      NumericGradient([&](const std::vector<double>& at) { return ReferenceLoss(spec, at, data); },
                      reference, 1e-5);
  const double max_abs = MaxAbs(numeric);
  for (std::size_t j = 0; j < params.size(); ++j) {
    EXPECT_NEAR(static_cast<double>(gradient[j]), numeric[j], 1e-4 * (1.0 + max_abs))
        << "parameter " << j;
  }
}

TEST(ModelGradientTest, LinearRegressionMatchesFiniteDifferences) {
  ExpectGradientMatchesFiniteDifferences({ModelKind::kLinearRegression, 6, 0, 0, true}, 1);
  ExpectGradientMatchesFiniteDifferences({ModelKind::kLinearRegression, 6, 0, 0, false}, 2);
}

TEST(ModelGradientTest, LogisticRegressionMatchesFiniteDifferences) {
  ExpectGradientMatchesFiniteDifferences({ModelKind::kLogisticRegression, 5, 0, 0, true}, 3);
  ExpectGradientMatchesFiniteDifferences({ModelKind::kLogisticRegression, 5, 0, 0, false}, 4);
}

TEST(ModelGradientTest, SoftmaxRegressionMatchesFiniteDifferences) {
  ExpectGradientMatchesFiniteDifferences({ModelKind::kSoftmaxRegression, 5, 4, 0, true}, 5);
  ExpectGradientMatchesFiniteDifferences({ModelKind::kSoftmaxRegression, 3, 7, 0, false}, 6);
}

TEST(ModelGradientTest, MlpMatchesFiniteDifferences) {
  ExpectGradientMatchesFiniteDifferences({ModelKind::kMlp, 5, 3, 6, true}, 7);
  ExpectGradientMatchesFiniteDifferences({ModelKind::kMlp, 4, 4, 5, false}, 8);
}

TEST(LossFunctionsTest, SoftmaxIsStableForHugeLogits) {
  std::vector<float> logits = {1000.0f, -1000.0f, 999.0f};
  const SoftmaxCrossEntropyResult result = SoftmaxCrossEntropyInPlace(logits, 1);
  EXPECT_TRUE(std::isfinite(result.loss));
  EXPECT_NEAR(result.loss, 2000.0f + std::log1p(std::exp(-1.0f)), 1e-2f);
  EXPECT_EQ(result.argmax, 0u);
  EXPECT_NEAR(logits[0] + logits[1] + logits[2], 1.0f, 1e-6f);
}

TEST(LossFunctionsTest, LogisticIsStableForHugeLogits) {
  const LogisticLossResult big = LogisticLoss(500.0f, false);
  EXPECT_FLOAT_EQ(big.loss, 500.0f);
  EXPECT_FLOAT_EQ(big.slope, 1.0f);
  const LogisticLossResult small = LogisticLoss(-500.0f, false);
  EXPECT_FLOAT_EQ(small.loss, 0.0f);
  EXPECT_FLOAT_EQ(small.slope, 0.0f);
}

TEST(SoftmaxRegressionTest, LossAtZeroIsLnClasses) {
  const OwnedData data = RandomData(50, 784, 10, 11);
  const ModelSpec spec{ModelKind::kSoftmaxRegression, 784, 10, 0, true};
  std::vector<float> params(ParameterCount(spec));
  ASSERT_TRUE(InitModelParameters(spec, 99, params).ok());
  for (const float value : params) ASSERT_EQ(value, 0.0f);
  std::vector<float> gradient(params.size());
  std::vector<float> scratch(SoftmaxRegression::ScratchFloats(spec));
  const Result<float> loss =
      SoftmaxRegression::LossAndGradient(spec, params, data.View(), gradient, scratch);
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, std::log(10.0f), 1e-6f);
}

TEST(LogisticRegressionTest, ToyLossAtW0IsTheTopOnePlateau) {
  const ModelSpec spec{ModelKind::kLogisticRegression, 2, 0, 0, false};
  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());
  ASSERT_EQ(model.parameter_count(), 2u);
  std::vector<float> w(kToyLogisticInitialParams.begin(), kToyLogisticInitialParams.end());
  const Result<Evaluation> at_w0 = model.Evaluate(w, ToyLogisticDataset());
  ASSERT_TRUE(at_w0.ok());
  EXPECT_NEAR(at_w0->loss, 0.3133f, 5e-5f);
  EXPECT_NEAR(at_w0->loss, std::log1p(std::exp(-1.0f)), 1e-6f);
  EXPECT_FLOAT_EQ(at_w0->loss, kToyLogisticInitialLoss);
  EXPECT_EQ(at_w0->accuracy, 1.0f);

  // Top-1 with error feedback, as in the paper's toy: each client's largest coordinate is its
  // +/-26.9 push on coordinate 0, which cancels in the mean, so the model does not move (and
  // the loss stays at 0.3133) until the accumulated coordinate-1 error overtakes it.
  std::vector<float> errors[2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
  std::vector<float> gradient(2);
  for (int iteration = 0; iteration < 90; ++iteration) {
    float update[2] = {0.0f, 0.0f};
    for (std::size_t client = 0; client < 2; ++client) {
      ASSERT_TRUE(model.LossAndGradient(w, ToyLogisticClient(client), gradient).ok());
      float accumulated[2] = {gradient[0] + errors[client][0], gradient[1] + errors[client][1]};
      const std::size_t top = std::fabs(accumulated[0]) >= std::fabs(accumulated[1]) ? 0 : 1;
      update[top] += 0.5f * accumulated[top];
      accumulated[top] = 0.0f;
      errors[client] = {accumulated[0], accumulated[1]};
    }
    w[0] -= 0.9f * update[0];
    w[1] -= 0.9f * update[1];
    const Result<Evaluation> now = model.Evaluate(w, ToyLogisticDataset());
    ASSERT_TRUE(now.ok());
    ASSERT_NEAR(now->loss, kToyLogisticInitialLoss, 1e-4f) << "iteration " << iteration;
  }
}

TEST(ModelTest, LayoutAndScratchFollowTheSpec) {
  const ModelSpec mlp{ModelKind::kMlp, 784, 10, 32, true};
  const Result<TensorLayout> layout = ModelLayout(mlp);
  ASSERT_TRUE(layout.ok());
  ASSERT_EQ(layout->tensor_count(), 4u);
  EXPECT_EQ(layout->size(0), 32u * 784u);
  EXPECT_EQ(layout->size(1), 32u);
  EXPECT_EQ(layout->size(2), 10u * 32u);
  EXPECT_EQ(layout->size(3), 10u);
  EXPECT_EQ(ParameterCount(mlp), 32u * 784u + 32u + 320u + 10u);
  EXPECT_EQ(Model::ScratchBytes(mlp), ArenaBytesFor<float>(2 * 32 + 10));
  EXPECT_EQ(Model::StateBytes(mlp), 0u);

  const ModelSpec softmax{ModelKind::kSoftmaxRegression, 784, 10, 0, false};
  ASSERT_TRUE(ModelLayout(softmax).ok());
  EXPECT_EQ(ModelLayout(softmax)->tensor_count(), 1u);
  EXPECT_EQ(ParameterCount(softmax), 7840u);

  EXPECT_EQ(ValidateModelSpec({ModelKind::kSoftmaxRegression, 784, 1, 0, true}),
            Status::InvalidArgument());
  EXPECT_EQ(ValidateModelSpec({ModelKind::kMlp, 784, 10, 0, true}), Status::InvalidArgument());
  EXPECT_EQ(ValidateModelSpec({ModelKind::kLinearRegression, 0, 0, 0, true}),
            Status::InvalidArgument());
  EXPECT_EQ(ValidateModelSpec({ModelKind::kSoftmaxRegression, 1u << 30, 10, 0, true}),
            Status::InvalidArgument());
  EXPECT_EQ(ParameterCount({ModelKind::kMlp, 784, 10, 0, true}), 0u);
}

TEST(ModelTest, RejectsBadCallsWithoutTouchingTheGradient) {
  const ModelSpec spec{ModelKind::kSoftmaxRegression, 4, 3, 0, true};
  OwnedData data = RandomData(5, 4, 3, 21);
  std::vector<float> params(ParameterCount(spec), 0.1f);
  std::vector<float> gradient(params.size(), 7.0f);

  Model uninitialised;
  EXPECT_EQ(uninitialised.LossAndGradient(params, data.View(), gradient).status(),
            Status::FailedPrecondition());
  EXPECT_EQ(uninitialised.InitParameters(1, params), Status::FailedPrecondition());

  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());
  EXPECT_EQ(model.Init(spec, arena), Status::FailedPrecondition());

  std::vector<float> short_params(params.size() - 1);
  EXPECT_EQ(model.LossAndGradient(short_params, data.View(), gradient).status(),
            Status::InvalidArgument());
  std::vector<float> short_gradient(params.size() - 1);
  EXPECT_EQ(model.LossAndGradient(params, data.View(), short_gradient).status(),
            Status::InvalidArgument());
  DatasetView wrong_dim = data.View();
  wrong_dim.feature_dim = 2;
  wrong_dim.num_samples = 10;
  EXPECT_EQ(model.LossAndGradient(params, wrong_dim, gradient).status(), Status::InvalidArgument());
  DatasetView no_labels = data.View();
  no_labels.labels = {};
  no_labels.targets = std::span<const float>(data.features.data(), 5);
  EXPECT_EQ(model.LossAndGradient(params, no_labels, gradient).status(), Status::InvalidArgument());
  data.labels[2] = 3;
  EXPECT_EQ(model.LossAndGradient(params, data.View(), gradient).status(), Status::OutOfRange());
  EXPECT_EQ(model.Evaluate(params, data.View()).status(), Status::OutOfRange());
  for (const float value : gradient) EXPECT_EQ(value, 7.0f);

  // A kernel called with a spec of another kind refuses.
  std::vector<float> scratch(8);
  EXPECT_EQ(Mlp::LossAndGradient(spec, params, data.View(), gradient, scratch).status(),
            Status::InvalidArgument());

  // Logistic labels must be 0 or 1.
  const ModelSpec logistic{ModelKind::kLogisticRegression, 4, 0, 0, true};
  OwnedData binary = RandomData(5, 4, 2, 22);
  binary.labels[0] = 2;
  std::vector<float> logistic_params(5);
  std::vector<float> logistic_gradient(5);
  Model logistic_model;
  std::vector<std::byte> more(Model::ScratchBytes(logistic) + kArenaAlignment);
  Arena logistic_arena{std::span<std::byte>(more)};
  ASSERT_TRUE(logistic_model.Init(logistic, logistic_arena).ok());
  EXPECT_EQ(
      logistic_model.LossAndGradient(logistic_params, binary.View(), logistic_gradient).status(),
      Status::OutOfRange());
}

TEST(ModelTest, InitParametersIsDeterministicPerSeed) {
  const ModelSpec spec{ModelKind::kMlp, 20, 5, 16, true};
  std::vector<float> a(ParameterCount(spec));
  std::vector<float> b(a.size());
  std::vector<float> c(a.size());
  ASSERT_TRUE(InitModelParameters(spec, 42, a).ok());
  ASSERT_TRUE(InitModelParameters(spec, 42, b).ok());
  ASSERT_TRUE(InitModelParameters(spec, 43, c).ok());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const TensorLayout layout = *ModelLayout(spec);
  const float w1_limit = std::sqrt(6.0f / 20.0f);
  for (const float value : layout.Slice(std::span<const float>(a), 0)) {
    EXPECT_LE(std::fabs(value), w1_limit);
  }
  for (const float value : layout.Slice(std::span<const float>(a), 1)) EXPECT_EQ(value, 0.0f);
  for (const float value : layout.Slice(std::span<const float>(a), 3)) EXPECT_EQ(value, 0.0f);
  // Weights are not all equal (symmetry broken).
  EXPECT_NE(a[0], a[1]);
  std::vector<float> wrong(a.size() + 1);
  EXPECT_EQ(InitModelParameters(spec, 1, wrong), Status::InvalidArgument());
}

TEST(LinearRegressionTest, ExperimentAOptimumZeroesTheGradient) {
  LinearRegressionTaskParams task;
  task.clients = 4;
  task.dimension = 10;
  task.samples_per_client = 50;
  std::vector<float> features(task.clients * task.samples_per_client * task.dimension);
  std::vector<float> targets(task.clients * task.samples_per_client);
  std::vector<float> models(task.clients * task.dimension);
  ASSERT_TRUE(GenerateLinearRegressionTask(task, features, targets, models).ok());
  const DatasetView data = LinearRegressionTaskView(task, features, targets);
  std::vector<std::byte> scratch(LeastSquaresScratchBytes(task.dimension));
  std::vector<float> optimum(task.dimension);
  ASSERT_TRUE(SolveLeastSquares(data, optimum, scratch).ok());

  const ModelSpec spec{ModelKind::kLinearRegression, task.dimension, 0, 0, false};
  std::vector<float> gradient(task.dimension);
  const Result<float> loss = LinearRegression::LossAndGradient(spec, optimum, data, gradient, {});
  ASSERT_TRUE(loss.ok());
  for (const float value : gradient) EXPECT_NEAR(value, 0.0f, 2e-4f);
  // The clients are heterogeneous: the pooled optimum beats every client's own true model.
  for (std::size_t k = 0; k < task.clients; ++k) {
    const std::span<const float> x_k(models.data() + k * task.dimension, task.dimension);
    EvaluationSums at_x_k;
    ASSERT_TRUE(LinearRegression::AddToEvaluation(spec, x_k, data, {}, at_x_k).ok());
    EXPECT_LT(*loss, at_x_k.loss / static_cast<double>(at_x_k.samples));
  }
  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());
  const Result<Evaluation> evaluation = model.Evaluate(optimum, data);
  ASSERT_TRUE(evaluation.ok());
  EXPECT_FLOAT_EQ(evaluation->loss, *loss);
  EXPECT_TRUE(std::isnan(evaluation->accuracy));
}

// Plain SGD on a Gaussian mixture: both classifiers must reach high held-out accuracy.
void ExpectSgdLearnsMixture(const ModelSpec& spec, float learning_rate, int steps) {
  GaussianMixtureParams train;
  train.classes = spec.classes;
  train.dimension = spec.features;
  train.samples = 2000;
  train.seed = 5;
  GaussianMixtureParams test = train;
  test.samples = 1000;
  test.split = 1;
  std::vector<float> train_x(train.samples * train.dimension);
  std::vector<std::uint8_t> train_y(train.samples);
  std::vector<float> test_x(test.samples * test.dimension);
  std::vector<std::uint8_t> test_y(test.samples);
  ASSERT_TRUE(GenerateGaussianMixture(train, train_x, train_y).ok());
  ASSERT_TRUE(GenerateGaussianMixture(test, test_x, test_y).ok());
  const DatasetView train_view = GaussianMixtureView(train, train_x, train_y);
  const DatasetView test_view = GaussianMixtureView(test, test_x, test_y);

  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());
  arena.Seal();
  std::vector<float> params(model.parameter_count());
  ASSERT_TRUE(model.InitParameters(3, params).ok());
  std::vector<float> gradient(params.size());
  constexpr std::size_t kBatch = 32;
  std::vector<float> batch_x(kBatch * spec.features);
  std::vector<std::uint8_t> batch_y(kBatch);
  const BatchBuffers buffers{batch_x, batch_y, {}};
  const float initial_loss = model.Evaluate(params, test_view)->loss;
  for (int step = 0; step < steps; ++step) {
    CounterRng rng(17, static_cast<std::uint32_t>(step), 0,
                   StreamId(RandomPurpose::kDataSampling, 0));
    const Result<DatasetView> batch = SampleBatch(train_view, {}, kBatch, rng, buffers);
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(model.LossAndGradient(params, *batch, gradient).ok());
    for (std::size_t j = 0; j < params.size(); ++j) params[j] -= learning_rate * gradient[j];
  }
  const Result<Evaluation> result = model.Evaluate(params, test_view);
  ASSERT_TRUE(result.ok());
  EXPECT_GE(result->accuracy, 0.95f);
  EXPECT_LT(result->loss, 0.25f * initial_loss);
}

TEST(SoftmaxRegressionTest, SgdReachesHighAccuracyOnGaussianMixture) {
  ExpectSgdLearnsMixture({ModelKind::kSoftmaxRegression, 20, 10, 0, true}, 0.5f, 300);
}

TEST(MlpTest, SgdReachesHighAccuracyOnGaussianMixture) {
  ExpectSgdLearnsMixture({ModelKind::kMlp, 20, 10, 32, true}, 0.2f, 400);
}

}  // namespace
}  // namespace edgesgd

namespace edgesgd {
namespace {

// A test set stored as bytes scores the same bits as its float copy, whatever the staging size.
void ExpectByteEvaluationMatchesFloats(const ModelSpec& spec) {
  constexpr std::size_t kSamples = 103;
  std::vector<std::uint8_t> bytes(kSamples * spec.features), labels(kSamples);
  std::vector<float> floats(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::uint8_t>((i * 131 + i / 7) % 256);
    floats[i] = static_cast<float>(bytes[i]) / 255.0f;
  }
  for (std::size_t i = 0; i < kSamples; ++i) {
    labels[i] = static_cast<std::uint8_t>((i * 5) % spec.classes);
  }
  const DatasetView as_floats{floats, labels, {}, kSamples, spec.features, spec.classes};
  DatasetView as_bytes = as_floats;
  as_bytes.features = {};
  as_bytes.feature_bytes = bytes;

  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());
  std::vector<float> params(model.parameter_count());
  ASSERT_TRUE(model.InitParameters(3, params).ok());
  for (std::size_t j = 0; j < params.size(); ++j) params[j] += 0.01f * static_cast<float>(j % 13);
  const Result<Evaluation> expected = model.Evaluate(params, as_floats);
  ASSERT_TRUE(expected.ok());
  for (const std::size_t rows : {std::size_t{1}, std::size_t{10}, kSamples, kSamples + 5}) {
    std::vector<float> staging_x(rows * spec.features);
    std::vector<std::uint8_t> staging_y(rows);
    const Result<Evaluation> scored = model.Evaluate(params, as_bytes, {staging_x, staging_y, {}});
    ASSERT_TRUE(scored.ok()) << rows;
    EXPECT_EQ(scored->loss, expected->loss) << rows;
    EXPECT_EQ(scored->accuracy, expected->accuracy) << rows;
  }
  // A model reads floats: bytes without staging, or as a batch, are refused.
  EXPECT_EQ(model.Evaluate(params, as_bytes).status(), Status::InvalidArgument());
  std::vector<float> gradient(params.size());
  EXPECT_EQ(model.LossAndGradient(params, as_bytes, gradient).status(), Status::InvalidArgument());
}

TEST(ModelTest, SoftmaxScoresByteFeaturesAsTheirFloats) {
  ExpectByteEvaluationMatchesFloats({ModelKind::kSoftmaxRegression, 24, 10, 0, true});
}

TEST(ModelTest, MlpScoresByteFeaturesAsTheirFloats) {
  ExpectByteEvaluationMatchesFloats({ModelKind::kMlp, 24, 10, 8, true});
}

}  // namespace
}  // namespace edgesgd
