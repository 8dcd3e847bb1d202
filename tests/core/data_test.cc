#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/data/partition.h"
#include "edgesgd/core/data/random_variates.h"
#include "edgesgd/core/data/synthetic.h"

namespace edgesgd {
namespace {

// Labels 0..classes-1, `per_class` of each, interleaved (so sorting is not a no-op).
std::vector<std::uint8_t> InterleavedLabels(std::size_t classes, std::size_t per_class) {
  std::vector<std::uint8_t> labels(classes * per_class);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    labels[i] = static_cast<std::uint8_t>((i * 7 + i / classes) % classes);
  }
  return labels;
}

DatasetView LabelsOnly(const std::vector<std::uint8_t>& labels, std::size_t classes,
                       const std::vector<float>& features) {
  DatasetView view;
  view.features = features;
  view.labels = labels;
  view.num_samples = labels.size();
  view.feature_dim = 1;
  view.num_classes = classes;
  return view;
}

void ExpectDisjointCover(const std::vector<std::uint32_t>& indices,
                         const std::vector<std::size_t>& offsets, std::size_t samples) {
  ASSERT_EQ(offsets.front(), 0u);
  ASSERT_EQ(offsets.back(), samples);
  for (std::size_t w = 0; w + 1 < offsets.size(); ++w) ASSERT_LE(offsets[w], offsets[w + 1]);
  std::vector<std::uint32_t> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < samples; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(DatasetTest, ValidateChecksShapesAndLabels) {
  std::vector<float> features(6, 0.0f);
  std::vector<std::uint8_t> labels = {0, 1, 2};
  DatasetView view{features, labels, {}, 3, 2, 3};
  EXPECT_TRUE(ValidateDataset(view).ok());
  view.num_classes = 2;
  EXPECT_EQ(ValidateDataset(view), Status::OutOfRange());
  view.num_classes = 3;
  view.feature_dim = 4;
  EXPECT_EQ(ValidateDataset(view), Status::InvalidArgument());
  view.feature_dim = 2;
  view.labels = {};
  EXPECT_EQ(ValidateDataset(view), Status::InvalidArgument());
  std::vector<float> targets = {1.0f, 2.0f};
  view.targets = targets;
  EXPECT_EQ(ValidateDataset(view), Status::InvalidArgument());
}

TEST(DatasetTest, GatherAndSliceCopyTheRightRows) {
  std::vector<float> features = {0, 0, 1, 1, 2, 2, 3, 3};
  std::vector<std::uint8_t> labels = {0, 1, 0, 1};
  const DatasetView data{features, labels, {}, 4, 2, 2};
  std::vector<float> out_x(6);
  std::vector<std::uint8_t> out_y(3);
  const std::vector<std::uint32_t> rows = {3, 0, 3};
  const Result<DatasetView> batch = GatherRows(data, rows, {out_x, out_y, {}});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->num_samples, 3u);
  EXPECT_EQ(out_x, (std::vector<float>{3, 3, 0, 0, 3, 3}));
  EXPECT_EQ(out_y, (std::vector<std::uint8_t>{1, 0, 1}));
  const std::vector<std::uint32_t> bad = {4};
  EXPECT_EQ(GatherRows(data, bad, {out_x, out_y, {}}).status(), Status::OutOfRange());
  const std::vector<std::uint32_t> too_many = {0, 1, 2, 3};
  EXPECT_EQ(GatherRows(data, too_many, {out_x, out_y, {}}).status(), Status::InvalidArgument());

  const Result<DatasetView> slice = SliceRows(data, 1, 2);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->Row(0)[0], 1.0f);
  EXPECT_EQ(slice->labels[1], 0);
  EXPECT_EQ(SliceRows(data, 3, 2).status(), Status::OutOfRange());
}

TEST(DatasetTest, GatherWithoutIndicesCopiesEveryRowInOrder) {
  std::vector<float> features = {0, 0, 1, 1, 2, 2};
  std::vector<std::uint8_t> labels = {0, 1, 0};
  const DatasetView data{features, labels, {}, 3, 2, 2};
  std::vector<float> out_x(6);
  std::vector<std::uint8_t> out_y(3);
  const Result<DatasetView> all = GatherRows(data, {}, {out_x, out_y, {}});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->num_samples, 3u);
  EXPECT_EQ(out_x, features);
  EXPECT_EQ(out_y, labels);
  EXPECT_EQ(GatherRows(data, {}, {std::span(out_x).first(4), out_y, {}}).status(),
            Status::InvalidArgument());
}

// Every byte value, in rows of 16, and the floats a reader scaling b / 255 would give.
struct ByteAndFloatCopies {
  std::vector<std::uint8_t> bytes, labels;
  std::vector<float> floats;
  DatasetView bytes_view, floats_view;

  ByteAndFloatCopies() : bytes(256), labels(16), floats(256) {
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<std::uint8_t>((i * 37) % 256);
      floats[i] = static_cast<float>(bytes[i]) / 255.0f;
    }
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::uint8_t>(i % 3);
    floats_view = {floats, labels, {}, 16, 16, 3};
    bytes_view = floats_view;
    bytes_view.features = {};
    bytes_view.feature_bytes = bytes;
  }
};

TEST(DatasetTest, ByteFeaturesGatherToTheBitsOfTheirFloatCopy) {
  const ByteAndFloatCopies data;
  ASSERT_TRUE(ValidateDataset(data.bytes_view).ok());
  const std::vector<std::uint32_t> rows = {15, 0, 7, 7};
  std::vector<float> from_bytes(rows.size() * 16), from_floats(rows.size() * 16);
  std::vector<std::uint8_t> labels_a(rows.size()), labels_b(rows.size());
  ASSERT_TRUE(GatherRows(data.bytes_view, rows, {from_bytes, labels_a, {}}).ok());
  ASSERT_TRUE(GatherRows(data.floats_view, rows, {from_floats, labels_b, {}}).ok());
  EXPECT_EQ(from_bytes, from_floats);  // exact: the same division
  EXPECT_EQ(labels_a, labels_b);

  const std::vector<std::uint32_t> pool = {3, 9, 12};
  CounterRng rng_a(5, 1, 0, StreamId(RandomPurpose::kDataSampling, 2));
  CounterRng rng_b = rng_a;
  ASSERT_TRUE(SampleBatch(data.bytes_view, pool, 4, rng_a, {from_bytes, labels_a, {}}).ok());
  ASSERT_TRUE(SampleBatch(data.floats_view, pool, 4, rng_b, {from_floats, labels_b, {}}).ok());
  EXPECT_EQ(from_bytes, from_floats);
  EXPECT_EQ(labels_a, labels_b);

  const Result<DatasetView> slice = SliceRows(data.bytes_view, 2, 3);
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->feature_bytes.data(), data.bytes.data() + 2 * 16);
  EXPECT_EQ(slice->feature_bytes.size(), 3u * 16u);
  EXPECT_TRUE(slice->features.empty());
}

TEST(DatasetTest, ByteFeaturesComeAloneWithAPositiveDivisor) {
  const ByteAndFloatCopies data;
  DatasetView both = data.bytes_view;
  both.features = data.floats;
  EXPECT_EQ(ValidateDataset(both), Status::InvalidArgument());
  DatasetView zero = data.bytes_view;
  zero.byte_divisor = 0.0f;
  EXPECT_EQ(ValidateDataset(zero), Status::InvalidArgument());
  DatasetView short_bytes = data.bytes_view;
  short_bytes.feature_bytes = short_bytes.feature_bytes.first(255);
  EXPECT_EQ(ValidateDataset(short_bytes), Status::InvalidArgument());
}

TEST(DatasetTest, SampleBatchDrawsFromThePoolDeterministically) {
  std::vector<float> features(100);
  std::iota(features.begin(), features.end(), 0.0f);
  std::vector<float> targets(100);
  std::iota(targets.begin(), targets.end(), 0.0f);
  const DatasetView data{features, {}, targets, 100, 1, 0};
  const std::vector<std::uint32_t> pool = {5, 17, 42};
  std::vector<float> x1(64), y1(64), x2(64), y2(64);
  CounterRng rng1(9, 3, 0, StreamId(RandomPurpose::kDataSampling, 2));
  CounterRng rng2(9, 3, 0, StreamId(RandomPurpose::kDataSampling, 2));
  ASSERT_TRUE(SampleBatch(data, pool, 64, rng1, {x1, {}, y1}).ok());
  ASSERT_TRUE(SampleBatch(data, pool, 64, rng2, {x2, {}, y2}).ok());
  EXPECT_EQ(x1, x2);
  std::set<float> seen(x1.begin(), x1.end());
  EXPECT_EQ(seen, (std::set<float>{5.0f, 17.0f, 42.0f}));
  EXPECT_EQ(x1, y1);
  const std::vector<std::uint32_t> bad_pool = {100};
  EXPECT_EQ(SampleBatch(data, bad_pool, 4, rng1, {x1, {}, y1}).status(), Status::OutOfRange());
  EXPECT_EQ(SampleBatch(data, {}, 0, rng1, {x1, {}, y1}).status(), Status::InvalidArgument());
  EXPECT_EQ(SampleBatch(data, {}, 65, rng1, {x1, {}, y1}).status(), Status::InvalidArgument());
}

TEST(DatasetTest, ShuffleIsADeterministicPermutation) {
  std::vector<std::uint32_t> a(1000);
  std::iota(a.begin(), a.end(), 0u);
  std::vector<std::uint32_t> b = a;
  CounterRng rng_a(1, 0, 0, 0);
  CounterRng rng_b(1, 0, 0, 0);
  ASSERT_TRUE(ShuffleIndices(a, rng_a).ok());
  ASSERT_TRUE(ShuffleIndices(b, rng_b).ok());
  EXPECT_EQ(a, b);
  std::vector<std::uint32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_FALSE(std::is_sorted(a.begin(), a.end()));
}

TEST(PartitionTest, IidIsADeterministicEqualSplit) {
  constexpr std::size_t kSamples = 1003;
  constexpr std::size_t kWorkers = 8;
  std::vector<std::uint32_t> indices(kSamples), again(kSamples), other(kSamples);
  std::vector<std::size_t> offsets(kWorkers + 1), offsets2(kWorkers + 1);
  ASSERT_TRUE(PartitionIid(kSamples, kWorkers, 7, indices, offsets).ok());
  ASSERT_TRUE(PartitionIid(kSamples, kWorkers, 7, again, offsets2).ok());
  ASSERT_TRUE(PartitionIid(kSamples, kWorkers, 8, other, offsets2).ok());
  ExpectDisjointCover(indices, offsets, kSamples);
  EXPECT_EQ(indices, again);
  EXPECT_NE(indices, other);
  for (std::size_t w = 0; w < kWorkers; ++w) {
    const std::size_t size = offsets[w + 1] - offsets[w];
    EXPECT_TRUE(size == 125 || size == 126) << size;
  }
  EXPECT_EQ(PartitionIid(kSamples, 0, 7, indices, offsets), Status::InvalidArgument());
  std::vector<std::size_t> short_offsets(kWorkers);
  EXPECT_EQ(PartitionIid(kSamples, kWorkers, 7, indices, short_offsets), Status::InvalidArgument());
}

TEST(PartitionTest, SortedSplitGivesSixteenWorkersAtMostTwoClasses) {
  const std::vector<std::uint8_t> labels = InterleavedLabels(10, 6000);
  const std::vector<float> features(labels.size());
  const DatasetView data = LabelsOnly(labels, 10, features);
  constexpr std::size_t kWorkers = 16;
  std::vector<std::uint32_t> indices(labels.size());
  std::vector<std::size_t> offsets(kWorkers + 1);
  ASSERT_TRUE(PartitionSortedByLabel(data, kWorkers, indices, offsets).ok());
  ExpectDisjointCover(indices, offsets, labels.size());
  const PartitionView partition{indices, offsets};
  ASSERT_EQ(partition.num_workers(), kWorkers);
  std::size_t previous_label = 0;
  for (std::size_t w = 0; w < kWorkers; ++w) {
    std::set<std::uint8_t> classes;
    const std::span<const std::uint32_t> shard = partition.Worker(w);
    EXPECT_EQ(shard.size(), 3750u);
    for (std::size_t k = 0; k < shard.size(); ++k) {
      classes.insert(labels[shard[k]]);
      ASSERT_GE(labels[shard[k]], previous_label);  // sorted by label
      previous_label = labels[shard[k]];
      if (k > 0 && labels[shard[k]] == labels[shard[k - 1]]) {
        ASSERT_GT(shard[k], shard[k - 1]);  // stable within a label
      }
    }
    EXPECT_GE(classes.size(), 1u);
    EXPECT_LE(classes.size(), 2u);
  }
  std::vector<std::uint8_t> bad = labels;
  bad[5] = 10;
  EXPECT_EQ(PartitionSortedByLabel(LabelsOnly(bad, 10, features), kWorkers, indices, offsets),
            Status::OutOfRange());
}

// Mean over workers of the total-variation distance between a worker's label distribution
// and the global one (0 = IID).
double MeanLabelSkew(const std::vector<std::uint8_t>& labels, std::size_t classes,
                     const PartitionView& partition) {
  std::vector<double> global(classes, 0.0);
  for (const auto label : labels) global[label] += 1.0 / static_cast<double>(labels.size());
  double total = 0.0;
  std::size_t counted = 0;
  for (std::size_t w = 0; w < partition.num_workers(); ++w) {
    const auto shard = partition.Worker(w);
    if (shard.empty()) continue;
    std::vector<double> local(classes, 0.0);
    for (const auto index : shard) local[labels[index]] += 1.0 / static_cast<double>(shard.size());
    double distance = 0.0;
    for (std::size_t c = 0; c < classes; ++c) distance += std::fabs(local[c] - global[c]);
    total += 0.5 * distance;
    ++counted;
  }
  return total / static_cast<double>(counted);
}

TEST(PartitionTest, DirichletSkewFollowsAlpha) {
  const std::vector<std::uint8_t> labels = InterleavedLabels(10, 1000);
  const std::vector<float> features(labels.size());
  const DatasetView data = LabelsOnly(labels, 10, features);
  constexpr std::size_t kWorkers = 10;
  std::vector<std::byte> scratch(DirichletScratchBytes(10, kWorkers));
  std::vector<std::uint32_t> skewed(labels.size()), uniform(labels.size()), again(labels.size());
  std::vector<std::size_t> skewed_offsets(kWorkers + 1), uniform_offsets(kWorkers + 1),
      again_offsets(kWorkers + 1);
  ASSERT_TRUE(PartitionDirichlet(data, kWorkers, 0.1f, 3, skewed, skewed_offsets, scratch).ok());
  ASSERT_TRUE(
      PartitionDirichlet(data, kWorkers, 1000.0f, 3, uniform, uniform_offsets, scratch).ok());
  ASSERT_TRUE(PartitionDirichlet(data, kWorkers, 0.1f, 3, again, again_offsets, scratch).ok());
  ExpectDisjointCover(skewed, skewed_offsets, labels.size());
  ExpectDisjointCover(uniform, uniform_offsets, labels.size());
  EXPECT_EQ(skewed, again);
  EXPECT_EQ(skewed_offsets, again_offsets);

  const double small_alpha_skew = MeanLabelSkew(labels, 10, {skewed, skewed_offsets});
  const double large_alpha_skew = MeanLabelSkew(labels, 10, {uniform, uniform_offsets});
  EXPECT_GT(small_alpha_skew, 0.5);
  EXPECT_LT(large_alpha_skew, 0.05);
  for (std::size_t w = 0; w < kWorkers; ++w) {
    const std::size_t size = uniform_offsets[w + 1] - uniform_offsets[w];
    EXPECT_NEAR(static_cast<double>(size), 1000.0, 60.0);
  }

  std::vector<std::byte> small(DirichletScratchBytes(10, kWorkers) - 1);
  EXPECT_EQ(PartitionDirichlet(data, kWorkers, 0.1f, 3, skewed, skewed_offsets, small),
            Status::ResourceExhausted());
  EXPECT_EQ(PartitionDirichlet(data, kWorkers, 0.0f, 3, skewed, skewed_offsets, scratch),
            Status::InvalidArgument());
  EXPECT_EQ(PartitionDirichlet(data, kWorkers, NAN, 3, skewed, skewed_offsets, scratch),
            Status::InvalidArgument());
}

TEST(RandomVariatesTest, NormalHasUnitMomentsAndIsDeterministic) {
  NormalRng a(CounterRng(1, 2, 3, 4));
  NormalRng b(CounterRng(1, 2, 3, 4));
  double sum = 0.0;
  double squares = 0.0;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) {
    const float value = a.Next();
    ASSERT_EQ(value, b.Next());
    ASSERT_TRUE(std::isfinite(value));
    sum += static_cast<double>(value);
    squares += static_cast<double>(value) * static_cast<double>(value);
  }
  EXPECT_NEAR(sum / kDraws, 0.0, 0.01);
  EXPECT_NEAR(squares / kDraws, 1.0, 0.015);
  EXPECT_GT(OpenUniformFloat(0), 0.0f);
  EXPECT_LT(OpenUniformFloat(0xFFFFFFFFu), 1.0f);
}

TEST(RandomVariatesTest, GammaHasMeanEqualToShape) {
  for (const float shape : {0.05f, 0.5f, 1.0f, 2.5f, 40.0f}) {
    NormalRng normal(CounterRng(11, 0, 0, 0));
    double sum = 0.0;
    constexpr int kDraws = 50000;
    for (int i = 0; i < kDraws; ++i) {
      const float log_value = SampleLogGamma(shape, normal);
      ASSERT_FALSE(std::isnan(log_value));
      sum += std::exp(static_cast<double>(log_value));
    }
    EXPECT_NEAR(sum / kDraws, static_cast<double>(shape), 0.05 * static_cast<double>(shape) + 0.005)
        << "shape " << shape;
  }
}

TEST(SyntheticTest, ExperimentAOptimumSatisfiesTheNormalEquations) {
  LinearRegressionTaskParams task;  // the paper's size: 20 clients, d = 100, 500 each
  std::vector<float> features(task.clients * task.samples_per_client * task.dimension);
  std::vector<float> targets(task.clients * task.samples_per_client);
  std::vector<float> models(task.clients * task.dimension);
  ASSERT_TRUE(GenerateLinearRegressionTask(task, features, targets, models).ok());
  std::vector<float> features2(features.size()), targets2(targets.size()), models2(models.size());
  ASSERT_TRUE(GenerateLinearRegressionTask(task, features2, targets2, models2).ok());
  EXPECT_EQ(features, features2);
  EXPECT_EQ(targets, targets2);

  const DatasetView data = LinearRegressionTaskView(task, features, targets);
  ASSERT_TRUE(ValidateDataset(data).ok());
  std::vector<std::byte> scratch(LeastSquaresScratchBytes(task.dimension));
  std::vector<float> optimum(task.dimension);
  ASSERT_TRUE(SolveLeastSquares(data, optimum, scratch).ok());

  // A^T (A x* - y) = 0, checked in double relative to |A^T y|.
  const std::size_t d = task.dimension;
  std::vector<double> normal_residual(d, 0.0);
  std::vector<double> rhs(d, 0.0);
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    double prediction = 0.0;
    for (std::size_t j = 0; j < d; ++j) {
      prediction += static_cast<double>(features[i * d + j]) * static_cast<double>(optimum[j]);
    }
    const double residual = prediction - static_cast<double>(targets[i]);
    for (std::size_t j = 0; j < d; ++j) {
      normal_residual[j] += static_cast<double>(features[i * d + j]) * residual;
      rhs[j] += static_cast<double>(features[i * d + j]) * static_cast<double>(targets[i]);
    }
  }
  double residual_norm = 0.0;
  double rhs_norm = 0.0;
  for (std::size_t j = 0; j < d; ++j) {
    residual_norm += normal_residual[j] * normal_residual[j];
    rhs_norm += rhs[j] * rhs[j];
  }
  EXPECT_LT(std::sqrt(residual_norm), 1e-6 * std::sqrt(rhs_norm));

  // Too little scratch, and a rank-deficient system.
  std::vector<std::byte> small(LeastSquaresScratchBytes(d) - 1);
  EXPECT_EQ(SolveLeastSquares(data, optimum, small), Status::ResourceExhausted());
  const Result<DatasetView> few_rows = SliceRows(data, 0, d / 2);
  ASSERT_TRUE(few_rows.ok());
  EXPECT_EQ(SolveLeastSquares(*few_rows, optimum, scratch), Status::FailedPrecondition());
}

TEST(SyntheticTest, ExperimentAReadsNZeroFiveAsVarianceFive) {
  // One coordinate, one sample per client: x_k = m_k + N(0,1) has variance 5 + 1 = 6, and
  // y - a x_k is the N(0, 0.5) noise.
  LinearRegressionTaskParams task;
  task.clients = 8000;
  task.dimension = 1;
  task.samples_per_client = 1;
  std::vector<float> features(task.clients), targets(task.clients), models(task.clients);
  ASSERT_TRUE(GenerateLinearRegressionTask(task, features, targets, models).ok());
  double model_squares = 0.0;
  double noise_squares = 0.0;
  for (std::size_t k = 0; k < task.clients; ++k) {
    model_squares += static_cast<double>(models[k]) * static_cast<double>(models[k]);
    const double noise = static_cast<double>(targets[k] - features[k] * models[k]);
    noise_squares += noise * noise;
  }
  EXPECT_NEAR(model_squares / 8000.0, 6.0, 0.4);
  EXPECT_NEAR(noise_squares / 8000.0, 0.5, 0.04);
}

TEST(SyntheticTest, ToyLogisticDataIsThePapersTwoClients) {
  const DatasetView all = ToyLogisticDataset();
  ASSERT_TRUE(ValidateDataset(all).ok());
  EXPECT_EQ(all.num_samples, 2u);
  const DatasetView second = ToyLogisticClient(1);
  EXPECT_EQ(second.num_samples, 1u);
  EXPECT_EQ(second.Row(0)[0], -100.0f);
  EXPECT_EQ(second.Row(0)[1], 1.0f);
  EXPECT_EQ(second.labels[0], 1);
}

TEST(SyntheticTest, SparseNoiseQuadraticPerturbsOnlyCoordinateZero) {
  std::vector<float> x(SparseNoiseQuadratic::kDimension);
  ASSERT_TRUE(SparseNoiseQuadratic::InitialPoint(4, 0, x).ok());
  std::vector<float> y(x.size());
  ASSERT_TRUE(SparseNoiseQuadratic::InitialPoint(4, 1, y).ok());
  EXPECT_NE(x, y);
  double half_norm = 0.0;
  for (const float value : x) half_norm += 0.5 * static_cast<double>(value * value);
  EXPECT_NEAR(static_cast<double>(SparseNoiseQuadratic::Loss(x)), half_norm, 1e-3);

  NormalRng normal(CounterRng(4, 0, 0, StreamId(RandomPurpose::kUser)));
  std::vector<float> gradient(x.size());
  double noise_squares = 0.0;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    ASSERT_TRUE(SparseNoiseQuadratic::StochasticGradient(x, normal, gradient).ok());
    for (std::size_t j = 1; j < x.size(); ++j) ASSERT_EQ(gradient[j], x[j]);
    const double noise = static_cast<double>(gradient[0] - x[0]);
    noise_squares += noise * noise;
  }
  EXPECT_NEAR(std::sqrt(noise_squares / kDraws), 100.0, 2.0);
  std::vector<float> wrong(3);
  EXPECT_EQ(SparseNoiseQuadratic::StochasticGradient(x, normal, wrong), Status::InvalidArgument());
}

TEST(SyntheticTest, GaussianMixtureIsDeterministicAndSplitsShareCentres) {
  GaussianMixtureParams params;
  params.classes = 3;
  params.dimension = 4;
  params.samples = 3000;
  params.noise_std = 0.0f;  // samples are exactly the centres
  std::vector<float> x(params.samples * params.dimension), x2(x.size());
  std::vector<std::uint8_t> y(params.samples), y2(params.samples);
  ASSERT_TRUE(GenerateGaussianMixture(params, x, y).ok());
  ASSERT_TRUE(GenerateGaussianMixture(params, x2, y2).ok());
  EXPECT_EQ(x, x2);
  EXPECT_EQ(y, y2);
  GaussianMixtureParams test = params;
  test.split = 1;
  ASSERT_TRUE(GenerateGaussianMixture(test, x2, y2).ok());
  EXPECT_NE(y, y2);
  std::vector<std::size_t> counts(3, 0);
  for (std::size_t i = 0; i < params.samples; ++i) {
    ++counts[y[i]];
    // Same label -> same centre, in either split.
    const std::size_t j =
        static_cast<std::size_t>(std::find(y2.begin(), y2.end(), y[i]) - y2.begin());
    ASSERT_LT(j, params.samples);
    for (std::size_t k = 0; k < params.dimension; ++k) {
      ASSERT_EQ(x[i * params.dimension + k], x2[j * params.dimension + k]);
    }
  }
  for (const std::size_t count : counts) EXPECT_NEAR(static_cast<double>(count), 1000.0, 100.0);
  std::vector<std::uint8_t> short_labels(10);
  EXPECT_EQ(GenerateGaussianMixture(params, x, short_labels), Status::InvalidArgument());
}

}  // namespace
}  // namespace edgesgd
