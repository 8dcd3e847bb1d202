#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/data/random_variates.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

// Synthetic data for the small experiments (examples/experiments). Every generator writes into caller
// buffers and is a pure function of its parameters (including the seed); its randomness comes
// from the stream StreamId(RandomPurpose::kDataSampling, kDataSetupWorker - 1) with a
// per-generator round word and the client/part index as tensor word. Normal variates are
// NormalRng's Box-Muller (see random_variates.h for cross-libm reproducibility).

// ----------------------------------------------------------------------------------------------
// Experiment A: heterogeneous distributed linear regression (RegTop-k paper, Bereyhi et al.).
// Client k: m_k ~ N(0, mean_variance), true model x_k = m_k * 1 + N(0, I_d), rows of A_k ~
// N(0, I_d), y_k = A_k x_k + N(0, noise_variance). "N(0, 5)" is read as variance 5 (standard
// deviation sqrt 5): the authors' SynthDataSet.py draws sqrt(alpha) * randn with alpha = 5 and
// documents alpha as a variance, and likewise sqrt(0.5) * randn for the noise. Clients are
// concatenated: client k owns rows [k * samples_per_client, (k + 1) * samples_per_client).
struct LinearRegressionTaskParams {
  std::size_t clients = 20;
  std::size_t dimension = 100;
  std::size_t samples_per_client = 500;
  float mean_variance = 5.0f;
  float noise_variance = 0.5f;
  std::uint64_t seed = 1;
};

// Writes features (clients * samples_per_client * dimension floats, row-major), targets
// (clients * samples_per_client floats) and true_models (clients * dimension floats: x_k of
// client k at [k * dimension, (k + 1) * dimension)). Errors: kInvalidArgument
// for a zero size, a negative or non-finite variance, or a buffer of the wrong size.
// Does not allocate.
Status GenerateLinearRegressionTask(const LinearRegressionTaskParams& params,
                                    std::span<float> features, std::span<float> targets,
                                    std::span<float> true_models);

// A view of the generated buffers (num_classes = 0, targets only).
DatasetView LinearRegressionTaskView(const LinearRegressionTaskParams& params,
                                     std::span<const float> features,
                                     std::span<const float> targets);

// Scratch SolveLeastSquares needs for `dimension` unknowns: a d x d Gram matrix and a d-vector,
// in double.
constexpr std::size_t LeastSquaresScratchBytes(std::size_t dimension) {
  return kArenaAlignment + ArenaBytesFor<double>(dimension * dimension) +
         ArenaBytesFor<double>(dimension);
}

// The least-squares optimum x* = (A^T A)^-1 A^T y over all rows of `data` (features A,
// targets y) — for experiment A's concatenated clients this is (sum_k A_k^T A_k)^-1 sum_k
// A_k^T y_k, the optimum of the mean-squared-error model without bias. Accumulates the normal
// equations in double and solves them by an in-place Cholesky factorisation over `scratch`:
// init-time, host-side work, O(n d^2). Writes `solution` (data.feature_dim floats).
// Errors: kInvalidArgument if data has no targets or solution has the wrong size;
// kResourceExhausted if scratch is too small (LeastSquaresScratchBytes); kFailedPrecondition if
// A^T A is not numerically positive definite (fewer independent rows than unknowns).
// Does not allocate.
Status SolveLeastSquares(const DatasetView& data, std::span<float> solution,
                         std::span<std::byte> scratch);

// ----------------------------------------------------------------------------------------------
// Experiment B: the RegTop-k paper's two-client logistic toy. Client 1 holds (100, 1), client 2
// (-100, 1), both labelled 1 (labels in {0, 1}); no bias (ModelSpec::bias = false, 2
// parameters); start w0 = (0, 1). Both margins are 1 at w0, so the mean logistic loss there is
// ln(1 + e^-1) = 0.31326, where Top-1 stays while the clients' coordinate-0 pushes cancel.
inline constexpr std::array<float, 4> kToyLogisticFeatures = {100.0f, 1.0f, -100.0f, 1.0f};
inline constexpr std::array<std::uint8_t, 2> kToyLogisticLabels = {1, 1};
inline constexpr std::array<float, 2> kToyLogisticInitialParams = {0.0f, 1.0f};
inline constexpr float kToyLogisticInitialLoss = 0.31326169f;  // ln(1 + e^-1)

// Both samples (num_classes = 2) over the constants above.
DatasetView ToyLogisticDataset();
// Client `client` (0 or 1; a programmer error otherwise): its single sample.
DatasetView ToyLogisticClient(std::size_t client);

// ----------------------------------------------------------------------------------------------
// Experiment C: f(x) = 1/2 ||x||^2 with sparse, heavy gradient noise (signSGD paper): the
// stochastic gradient is x plus N(0, noise_std^2) on coordinate 0 only.
struct SparseNoiseQuadratic {
  static constexpr std::size_t kDimension = 100;
  static constexpr float kNoiseStd = 100.0f;

  // 1/2 ||x||^2, summed in a fixed order (internal::SumSquares). Does not allocate.
  static float Loss(std::span<const float> x);

  // Writes gradient = x, plus noise_std * N(0, 1) (one draw from `normal`) on coordinate 0.
  // Errors: kInvalidArgument if x is empty or gradient.size() != x.size(). Does not allocate.
  static Status StochasticGradient(std::span<const float> x, NormalRng& normal,
                                   std::span<float> gradient, float noise_std = kNoiseStd);

  // Writes x0 ~ N(0, I) for run `run` of the seed (runs are independent streams).
  // Errors: kInvalidArgument if x is empty. Does not allocate.
  static Status InitialPoint(std::uint64_t seed, std::uint32_t run, std::span<float> x);
};

// ----------------------------------------------------------------------------------------------
// Gaussian-mixture classification (fast softmax/MLP tests): class centres mu_c ~ N(0,
// mean_std^2 I) depend on the seed only; sample i gets a uniform label c and features mu_c +
// N(0, noise_std^2 I). Different `split` values draw independent samples around the same
// centres (train/test).
struct GaussianMixtureParams {
  std::size_t classes = 10;
  std::size_t dimension = 20;
  std::size_t samples = 1000;
  float mean_std = 1.0f;
  float noise_std = 1.0f;
  std::uint64_t seed = 1;
  std::uint32_t split = 0;
};

// Writes features (samples * dimension floats) and labels (samples bytes). Errors:
// kInvalidArgument for zero sizes, classes > 256, negative/non-finite deviations or buffers of
// the wrong size. Does not allocate.
Status GenerateGaussianMixture(const GaussianMixtureParams& params, std::span<float> features,
                               std::span<std::uint8_t> labels);

// A view of the generated buffers.
DatasetView GaussianMixtureView(const GaussianMixtureParams& params,
                                std::span<const float> features,
                                std::span<const std::uint8_t> labels);

}  // namespace edgesgd
