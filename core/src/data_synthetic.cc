#include <cmath>
#include <limits>

#include "edgesgd/core/check.h"
#include "edgesgd/core/data/synthetic.h"
#include "edgesgd/core/internal/reduce.h"

namespace edgesgd {
namespace {

// Round words of the generator stream, one per generator.
constexpr std::uint32_t kLinearRegressionRound = 0x474C494Eu;  // "GLIN"
constexpr std::uint32_t kQuadraticRound = 0x47515541u;         // "GQUA"
constexpr std::uint32_t kMixtureCentresRound = 0x474D4300u;    // "GMC"
constexpr std::uint32_t kMixtureSamplesRound = 0x474D5300u;    // "GMS"
// Tensor word of the per-client true models in experiment A; clients use their index.
constexpr std::uint32_t kClientMeansTensor = 0xFFFFFFFFu;

constexpr std::uint32_t GeneratorStream() {
  return StreamId(RandomPurpose::kDataSampling, kDataSetupWorker - 1);
}

bool ValidDeviation(float value) { return value >= 0.0f && std::isfinite(value); }

// a * b, or 0 when it overflows (every caller rejects a zero size).
std::size_t CheckedProduct(std::size_t a, std::size_t b) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) return 0;
  return a * b;
}

}  // namespace

Status GenerateLinearRegressionTask(const LinearRegressionTaskParams& params,
                                    std::span<float> features, std::span<float> targets,
                                    std::span<float> true_models) {
  const std::size_t rows = CheckedProduct(params.clients, params.samples_per_client);
  const std::size_t model_floats = CheckedProduct(params.clients, params.dimension);
  if (rows == 0 || params.dimension == 0 || model_floats == 0) {
    return Status::InvalidArgument(
        "clients, samples_per_client or dimension is 0, or their product overflows");
  }
  if (params.clients > std::numeric_limits<std::uint32_t>::max() - 1) {
    return Status::InvalidArgument("more than 2^32 - 2 clients");
  }
  if (!ValidDeviation(params.mean_variance) || !ValidDeviation(params.noise_variance)) {
    return Status::InvalidArgument("a variance is negative or not finite");
  }
  if (features.size() != CheckedProduct(rows, params.dimension) || targets.size() != rows ||
      true_models.size() != model_floats) {
    return Status::InvalidArgument("an output buffer's size does not match the task");
  }
  const float mean_std = std::sqrt(params.mean_variance);
  const float noise_std = std::sqrt(params.noise_variance);
  const std::size_t d = params.dimension;
  const std::size_t m = params.samples_per_client;

  // Client means come from their own stream so changing the sample count does not change them.
  NormalRng means(
      CounterRng(params.seed, kLinearRegressionRound, kClientMeansTensor, GeneratorStream()));
  for (std::size_t k = 0; k < params.clients; ++k) {
    const float client_mean = mean_std * means.Next();
    NormalRng normal(CounterRng(params.seed, kLinearRegressionRound, static_cast<std::uint32_t>(k),
                                GeneratorStream()));
    const std::span<float> x_k = true_models.subspan(k * d, d);
    for (float& value : x_k) value = client_mean + normal.Next();
    for (std::size_t i = 0; i < m; ++i) {
      const std::span<float> row = features.subspan((k * m + i) * d, d);
      float dot = 0.0f;
      for (std::size_t j = 0; j < d; ++j) {
        row[j] = normal.Next();
        dot += row[j] * x_k[j];
      }
      targets[k * m + i] = dot + noise_std * normal.Next();
    }
  }
  return Status::Ok();
}

DatasetView LinearRegressionTaskView(const LinearRegressionTaskParams& params,
                                     std::span<const float> features,
                                     std::span<const float> targets) {
  DatasetView view;
  view.features = features;
  view.targets = targets;
  view.num_samples = params.clients * params.samples_per_client;
  view.feature_dim = params.dimension;
  view.num_classes = 0;
  return view;
}

Status SolveLeastSquares(const DatasetView& data, std::span<float> solution,
                         std::span<std::byte> scratch) {
  const std::size_t d = data.feature_dim;
  if (d == 0 || !data.has_targets() || data.targets.size() != data.num_samples ||
      data.features.size() != CheckedProduct(data.num_samples, d) || solution.size() != d) {
    return Status::InvalidArgument(
        "the data has no features or targets, or the solution's size is not feature_dim");
  }
  if (scratch.size() < LeastSquaresScratchBytes(d)) {
    return Status::ResourceExhausted("the scratch is smaller than LeastSquaresScratchBytes");
  }
  Arena arena(scratch);
  EDGESGD_TRY_ASSIGN(const std::span<double> gram, arena.Allocate<double>(d * d));
  EDGESGD_TRY_ASSIGN(const std::span<double> rhs, arena.Allocate<double>(d));

  // Lower triangle of A^T A and A^T y, in double (float would lose ~3 digits over 10^4 rows).
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const std::span<const float> row = data.Row(i);
    const double target = static_cast<double>(data.targets[i]);
    for (std::size_t r = 0; r < d; ++r) {
      const double a_r = static_cast<double>(row[r]);
      rhs[r] += a_r * target;
      double* gram_row = gram.data() + r * d;
      for (std::size_t c = 0; c <= r; ++c) gram_row[c] += a_r * static_cast<double>(row[c]);
    }
  }
  // In-place Cholesky G = L L^T on the lower triangle (a d x d SPD system; init-time, so a
  // plain loop nest beats pulling in Eigen's LDLT, whose blocked paths can allocate).
  for (std::size_t j = 0; j < d; ++j) {
    double diagonal = gram[j * d + j];
    for (std::size_t k = 0; k < j; ++k) diagonal -= gram[j * d + k] * gram[j * d + k];
    if (!(diagonal > 0.0) || !std::isfinite(diagonal)) {
      return Status::FailedPrecondition(
          "the least-squares system is singular (A^T A is not positive definite)");
    }
    const double l_jj = std::sqrt(diagonal);
    gram[j * d + j] = l_jj;
    for (std::size_t i = j + 1; i < d; ++i) {
      double value = gram[i * d + j];
      for (std::size_t k = 0; k < j; ++k) value -= gram[i * d + k] * gram[j * d + k];
      gram[i * d + j] = value / l_jj;
    }
  }
  // Forward (L z = A^T y) then backward (L^T x = z) substitution, in place in rhs.
  for (std::size_t i = 0; i < d; ++i) {
    double value = rhs[i];
    for (std::size_t k = 0; k < i; ++k) value -= gram[i * d + k] * rhs[k];
    rhs[i] = value / gram[i * d + i];
  }
  for (std::size_t i = d; i-- > 0;) {
    double value = rhs[i];
    for (std::size_t k = i + 1; k < d; ++k) value -= gram[k * d + i] * rhs[k];
    rhs[i] = value / gram[i * d + i];
  }
  for (std::size_t i = 0; i < d; ++i) solution[i] = static_cast<float>(rhs[i]);
  return Status::Ok();
}

DatasetView ToyLogisticDataset() {
  DatasetView view;
  view.features = kToyLogisticFeatures;
  view.labels = kToyLogisticLabels;
  view.num_samples = 2;
  view.feature_dim = 2;
  view.num_classes = 2;
  return view;
}

DatasetView ToyLogisticClient(std::size_t client) {
  EDGESGD_CHECK(client < 2);
  DatasetView view = ToyLogisticDataset();
  view.features = view.features.subspan(client * 2, 2);
  view.labels = view.labels.subspan(client, 1);
  view.num_samples = 1;
  return view;
}

float SparseNoiseQuadratic::Loss(std::span<const float> x) {
  return 0.5f * internal::SumSquares(x);
}

Status SparseNoiseQuadratic::StochasticGradient(std::span<const float> x, NormalRng& normal,
                                                std::span<float> gradient, float noise_std) {
  if (x.empty() || gradient.size() != x.size()) {
    return Status::InvalidArgument("x is empty or the gradient's size differs from x's");
  }
  for (std::size_t i = 0; i < x.size(); ++i) gradient[i] = x[i];
  gradient[0] += noise_std * normal.Next();
  return Status::Ok();
}

Status SparseNoiseQuadratic::InitialPoint(std::uint64_t seed, std::uint32_t run,
                                          std::span<float> x) {
  if (x.empty()) return Status::InvalidArgument("x is empty");
  NormalRng normal(CounterRng(seed, kQuadraticRound, run, GeneratorStream()));
  for (float& value : x) value = normal.Next();
  return Status::Ok();
}

Status GenerateGaussianMixture(const GaussianMixtureParams& params, std::span<float> features,
                               std::span<std::uint8_t> labels) {
  if (params.classes == 0 || params.classes > 256 || params.dimension == 0 || params.samples == 0) {
    return Status::InvalidArgument(
        "classes must be in 1..256, and dimension and samples at least 1");
  }
  if (!ValidDeviation(params.mean_std) || !ValidDeviation(params.noise_std)) {
    return Status::InvalidArgument("a standard deviation is negative or not finite");
  }
  const std::size_t d = params.dimension;
  if (features.size() != CheckedProduct(params.samples, d) || features.size() == 0 ||
      labels.size() != params.samples) {
    return Status::InvalidArgument("an output buffer's size does not match samples and dimension");
  }
  const auto classes = static_cast<std::uint32_t>(params.classes);
  CounterRng sample_rng(params.seed, kMixtureSamplesRound, params.split, GeneratorStream());
  NormalRng noise(sample_rng);
  for (std::size_t i = 0; i < params.samples; ++i) {
    const std::uint32_t label = noise.rng().NextBelow(classes);
    labels[i] = static_cast<std::uint8_t>(label);
    // Centre of the class regenerated from its own stream instead of stored: no scratch, and
    // O(d) extra draws per sample is negligible for test-sized data.
    NormalRng centre(CounterRng(params.seed, kMixtureCentresRound, label, GeneratorStream()));
    const std::span<float> row = features.subspan(i * d, d);
    for (std::size_t j = 0; j < d; ++j) {
      row[j] = params.mean_std * centre.Next() + params.noise_std * noise.Next();
    }
  }
  return Status::Ok();
}

DatasetView GaussianMixtureView(const GaussianMixtureParams& params,
                                std::span<const float> features,
                                std::span<const std::uint8_t> labels) {
  DatasetView view;
  view.features = features;
  view.labels = labels;
  view.num_samples = params.samples;
  view.feature_dim = params.dimension;
  view.num_classes = params.classes;
  return view;
}

}  // namespace edgesgd
