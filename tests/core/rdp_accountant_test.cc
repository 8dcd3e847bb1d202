#include "edgesgd/core/privacy/rdp_accountant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/rdp_quadrature.h"

namespace edgesgd {
namespace {

using testing::RdpByQuadrature;

constexpr double kInf = std::numeric_limits<double>::infinity();

double SpentEpsilon(double q, double z, std::uint64_t steps, double delta) {
  RdpAccountant accountant;
  EXPECT_TRUE(accountant.Configure(q, z).ok());
  accountant.AddSteps(steps);
  const Result<PrivacySpent> spent = accountant.Epsilon(delta);
  EXPECT_TRUE(spent.ok());
  return spent->epsilon;
}

// RDP over `orders` of `steps` runs.
std::vector<double> Rdp(double q, double z, std::uint64_t steps,
                        const std::vector<double>& orders) {
  std::vector<double> rdp;
  for (const double order : orders) {
    rdp.push_back(SampledGaussianRdp(q, z, order) * static_cast<double>(steps));
  }
  return rdp;
}

// ---- Figures published by TensorFlow Privacy and Opacus in their own tests -------------------

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/rdp_privacy_accountant_test.py,
// test_compute_rdp_poisson_sampled_gaussian (checked there with rtol 1e-4): fractional orders
// 1.5 and 2.5, integer orders 5, 50 and 100.
TEST(RdpPinnedTest, TensorFlowPrivacyPoissonSampledGaussianRdp) {
  const std::vector<double> orders = {1.5, 2.5, 5, 50, 100};
  const std::vector<double> expected = {6.5007e-04, 1.0854e-03, 2.1808e-03, 2.3846e-02, 1.6742e+02};
  const std::vector<double> rdp = Rdp(0.01, 2.5, 50, orders);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    EXPECT_NEAR(rdp[k], expected[k], 1e-4 * expected[k]) << "order " << orders[k];
  }
  EXPECT_EQ(SampledGaussianRdp(0.01, 2.5, kInf), kInf);
}

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/rdp_accountant_test.py,
// test_compute_rdp_scalar (5 decimal places there).
TEST(RdpPinnedTest, TensorFlowPrivacyComputeRdpScalar) {
  EXPECT_NEAR(SampledGaussianRdp(0.1, 2, 5) * 10, 0.07737, 5e-6);
}

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/compute_dp_sgd_privacy_test.py,
// test_compute_dp_sgd_privacy: (examples, batch, noise, epochs, delta) -> (epsilon, order) of
// DP-SGD with q = batch / examples over ceil(epochs * examples / batch) steps, on the orders of
// compute_dp_sgd_privacy_lib.py, converted as here (dp_accounting's RdpAccountant).
TEST(RdpPinnedTest, TensorFlowPrivacyComputeDpSgdPrivacy) {
  std::vector<double> orders = {1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5};
  for (int order = 5; order < 64; ++order) orders.push_back(order);
  orders.insert(orders.end(), {128, 256, 512});
  struct Case {
    double q, z;
    std::uint64_t steps;
    double delta, epsilon, order;
  };
  const Case cases[] = {
      {150.0 / 60000, 1.3, 6000, 1e-5, 0.7242234026109595, 19},         // Test0
      {100.0 / 100000, 1.0, 30000, 1e-7, 1.4154988495444845, 13},       // Test1
      {1024.0 / 100000000, 0.1, 976563, 1e-7, 5907982.31138195, 1.25},  // Test2
  };
  for (const Case& c : cases) {
    const PrivacySpent spent = EpsilonFromRdp(orders, Rdp(c.q, c.z, c.steps, orders), c.delta);
    EXPECT_NEAR(spent.epsilon, c.epsilon, 1e-9 * c.epsilon) << "q " << c.q;
    EXPECT_EQ(spent.order, c.order) << "q " << c.q;
  }
}

// pytorch/opacus, opacus/tests/accountants_test.py, test_rdp_accountant: noise 1.5, sample rate
// 0.04, int(90 / 0.04) steps, delta 1e-5, on RDPAccountant.DEFAULT_ALPHAS (kRdpOrders).
TEST(RdpPinnedTest, OpacusRdpAccountant) {
  RdpAccountant accountant;
  ASSERT_TRUE(accountant.Configure(0.04, 1.5).ok());
  accountant.AddSteps(2250);
  const Result<PrivacySpent> spent = accountant.Epsilon(1e-5);
  ASSERT_TRUE(spent.ok());
  EXPECT_NEAR(spent->epsilon, 7.32911117143, 5e-8);
}

// pytorch/opacus, opacus/tests/accountants_test.py, test_get_noise_multiplier_rdp_steps and
// _rdp_epochs: epsilon 8, delta 1e-5, sample rate 0.04 over 2000 and int(90 / 0.04) steps
// (4 decimal places there). Opacus stops bisecting once its epsilon is within 0.01 below the
// target, so its multiplier can be slightly larger than the smallest one found here: they agree
// to 0.5 %, and Opacus's spends between 7.99 and 8 here too.
TEST(RdpPinnedTest, OpacusNoiseMultiplierForEpsilon) {
  const struct {
    std::uint64_t steps;
    double opacus;
  } cases[] = {{2000, 1.3562}, {2250, 1.416}};
  for (const auto& c : cases) {
    const Result<double> z = NoiseMultiplierForEpsilon(0.04, c.steps, 8, 1e-5);
    ASSERT_TRUE(z.ok());
    EXPECT_NEAR(*z, c.opacus, 0.005 * c.opacus) << c.steps << " steps";
    EXPECT_NEAR(SpentEpsilon(0.04, c.opacus, c.steps, 1e-5), 8 - 0.005, 0.006)
        << c.steps << " steps";
  }
}

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/rdp_privacy_accountant_test.py,
// test_compute_epsilon_delta_pure_dp and test_compute_epsilon_delta_gaussian: the conversion.
TEST(RdpPinnedTest, TensorFlowPrivacyConversion) {
  std::vector<double> orders;
  for (int order = 2; order < 33; ++order) orders.push_back(order);
  const std::vector<double> constant(orders.size(), 1.1);  // pure DP
  const PrivacySpent pure = EpsilonFromRdp(orders, constant, 1e-5);
  EXPECT_NEAR(pure.epsilon, 1.32783806176, 5e-8);
  EXPECT_EQ(pure.order, 32);

  // A noise multiplier chosen to give exactly (1, 1e-6)-DP, on a fine grid of orders.
  orders.clear();
  for (int i = 1000; i < 100000; ++i) orders.push_back(0.001 * i);
  const PrivacySpent gaussian = EpsilonFromRdp(orders, Rdp(1, 4.530877117, 1, orders), 1e-6);
  EXPECT_NEAR(gaussian.epsilon, 1, 5e-8);
}

// ---- Properties ---------------------------------------------------------------------------

TEST(RdpTest, MatchesNumericalIntegration) {
  const struct {
    double q, z, order;
  } cases[] = {{1e-4, 1, 1.5},   {1e-3, 1, 2},  {0.01, 10, 20}, {0.1, 100, 20.5},
               {0.04, 1.5, 3.7}, {0.5, 0.8, 7}, {0.3, 2, 10.9}, {0.99, 5, 1.1}};
  for (const auto& c : cases) {
    const double expected = RdpByQuadrature(c.q, c.z, c.order);
    EXPECT_NEAR(SampledGaussianRdp(c.q, c.z, c.order), expected, 1e-6 * expected)
        << "q " << c.q << " z " << c.z << " order " << c.order;
  }
}

TEST(RdpTest, FractionalSeriesJoinsTheIntegerSum) {
  for (const double order : {2.0, 5.0, 12.0, 40.0}) {
    const double integer = SampledGaussianRdp(0.02, 1.1, order);
    EXPECT_NEAR(SampledGaussianRdp(0.02, 1.1, order + 1e-9), integer, 1e-6 * integer);
    EXPECT_NEAR(SampledGaussianRdp(0.02, 1.1, order - 1e-9), integer, 1e-6 * integer);
  }
}

TEST(RdpTest, EdgeCasesOfTheMechanism) {
  EXPECT_EQ(SampledGaussianRdp(1, 2, 5), 5.0 / 8);  // the plain Gaussian mechanism
  EXPECT_EQ(SampledGaussianRdp(1, 0.5, 1.5), 1.5 / 0.5);
  EXPECT_EQ(SampledGaussianRdp(0, 2, 5), 0);
  EXPECT_EQ(SampledGaussianRdp(0.1, 0, 5), kInf);
  EXPECT_TRUE(std::isnan(SampledGaussianRdp(1.5, 1, 5)));
  EXPECT_TRUE(std::isnan(SampledGaussianRdp(0.1, -1, 5)));
  EXPECT_TRUE(std::isnan(SampledGaussianRdp(0.1, 1, 1)));
  EXPECT_TRUE(std::isnan(SampledGaussianRdp(std::nan(""), 1, 5)));
  // Subsampling only helps, and more at smaller rates.
  for (const double order : kRdpOrders) {
    const double full = SampledGaussianRdp(1, 1.2, order);
    const double half = SampledGaussianRdp(0.5, 1.2, order);
    const double tenth = SampledGaussianRdp(0.1, 1.2, order);
    EXPECT_LE(half, full) << order;
    EXPECT_LT(tenth, half) << order;
  }
}

TEST(RdpTest, OrdersAreTheLibrariesDefaults) {
  EXPECT_EQ(kRdpOrders.size(), 151u);
  EXPECT_EQ(kRdpOrders[0], 1.1);
  EXPECT_EQ(kRdpOrders[98], 1 + 99 / 10.0);
  EXPECT_EQ(kRdpOrders[99], 12);
  EXPECT_EQ(kRdpOrders.back(), 63);
}

TEST(RdpTest, ClassicConversionIsLooser) {
  const std::vector<double> orders(kRdpOrders.begin(), kRdpOrders.end());
  const std::vector<double> rdp = Rdp(0.01, 1.0, 1000, orders);
  double classic = kInf;
  for (std::size_t k = 0; k < orders.size(); ++k) {
    classic = std::min(classic, rdp[k] + std::log(1 / 1e-5) / (orders[k] - 1));
  }
  const double balle = EpsilonFromRdp(orders, rdp, 1e-5).epsilon;
  EXPECT_LT(balle, classic);
  EXPECT_GT(balle, 0.7 * classic);
}

TEST(RdpTest, ConversionSkipsOrdersWithoutABound) {
  const std::vector<double> orders = {0.5, 1, 2};
  const PrivacySpent spent = EpsilonFromRdp(orders, std::vector<double>{0.1, 0.1, 0.1}, 1e-5);
  EXPECT_EQ(spent.order, 2);
  const PrivacySpent none = EpsilonFromRdp(orders, std::vector<double>{kInf, kInf, kInf}, 1e-5);
  EXPECT_EQ(none.epsilon, kInf);
  EXPECT_EQ(none.order, 0);
}

TEST(RdpAccountantTest, RdpAddsUpLinearlyOverSteps) {
  const std::vector<double> orders(kRdpOrders.begin(), kRdpOrders.end());
  RdpAccountant accountant;
  ASSERT_TRUE(accountant.Configure(0.05, 1.1).ok());
  EXPECT_EQ(accountant.Epsilon(1e-5)->epsilon, 0);  // nothing released yet
  accountant.AddSteps(30);
  accountant.AddSteps(70);
  EXPECT_EQ(accountant.steps(), 100u);
  const PrivacySpent spent = *accountant.Epsilon(1e-5);
  const PrivacySpent expected = EpsilonFromRdp(orders, Rdp(0.05, 1.1, 100, orders), 1e-5);
  EXPECT_DOUBLE_EQ(spent.epsilon, expected.epsilon);
  EXPECT_EQ(spent.order, expected.order);
  double previous = spent.epsilon;
  for (int round = 0; round < 5; ++round) {
    accountant.AddSteps(100);
    const double epsilon = accountant.Epsilon(1e-5)->epsilon;
    EXPECT_GT(epsilon, previous);
    previous = epsilon;
  }
  EXPECT_TRUE(accountant.Configure(0.05, 1.1).ok());
  EXPECT_EQ(accountant.steps(), 0u);
}

TEST(RdpAccountantTest, EpsilonFallsWithNoiseAndDelta) {
  double previous = kInf;
  for (const double z : {0.6, 0.8, 1.0, 1.5, 2.0, 4.0, 8.0}) {
    const double epsilon = SpentEpsilon(0.01, z, 1000, 1e-5);
    EXPECT_LT(epsilon, previous) << "z " << z;
    previous = epsilon;
  }
  EXPECT_LT(SpentEpsilon(0.01, 1, 1000, 1e-3), SpentEpsilon(0.01, 1, 1000, 1e-5));
}

TEST(RdpAccountantTest, RejectsBadParameters) {
  RdpAccountant accountant;
  EXPECT_EQ(accountant.Epsilon(1e-5).status().code(), StatusCode::kFailedPrecondition);
  for (const double q : {0.0, -0.1, 1.01, std::nan(""), kInf}) {
    EXPECT_EQ(accountant.Configure(q, 1).code(), StatusCode::kInvalidArgument) << q;
  }
  for (const double z : {0.0, -1.0, std::nan(""), kInf}) {
    EXPECT_EQ(accountant.Configure(0.1, z).code(), StatusCode::kInvalidArgument) << z;
  }
  EXPECT_EQ(accountant.Epsilon(1e-5).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(accountant.Configure(1, 1).ok());
  for (const double delta : {0.0, 1.0, -1e-5, std::nan("")}) {
    EXPECT_EQ(accountant.Epsilon(delta).status().code(), StatusCode::kInvalidArgument) << delta;
  }
}

TEST(PrivacyLedgerTest, RoundsOfTheirOwnRateAndNoiseAddUp) {
  const std::vector<double> orders(kRdpOrders.begin(), kRdpOrders.end());
  PrivacyLedger ledger;
  EXPECT_EQ(ledger.Epsilon(1e-5)->epsilon, 0);
  const struct {
    double q, z;
  } rounds[] = {{0.1, 1.2}, {0.1, 1.2}, {0.05, 0.9}, {0.1, 1.2}, {0.2, 2.0}, {0, 1.0}};
  std::vector<double> expected(orders.size(), 0.0);
  for (const auto& round : rounds) {
    ASSERT_TRUE(ledger.Charge(round.q, round.z).ok());
    for (std::size_t k = 0; k < orders.size(); ++k) {
      expected[k] += SampledGaussianRdp(round.q, round.z, orders[k]);
    }
  }
  EXPECT_EQ(ledger.rounds(), 6u);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    EXPECT_NEAR(ledger.rdp()[k], expected[k], 1e-12 * expected[k]) << orders[k];
  }
  EXPECT_DOUBLE_EQ(ledger.Epsilon(1e-5)->epsilon, EpsilonFromRdp(orders, expected, 1e-5).epsilon);
  // Equal rounds agree with the single-rate accountant.
  PrivacyLedger equal;
  for (int round = 0; round < 40; ++round) ASSERT_TRUE(equal.Charge(0.05, 1.1).ok());
  EXPECT_NEAR(equal.Epsilon(1e-5)->epsilon, SpentEpsilon(0.05, 1.1, 40, 1e-5), 1e-9);
  // A round without noise leaves no finite bound.
  ASSERT_TRUE(equal.Charge(0.05, 0).ok());
  EXPECT_EQ(equal.Epsilon(1e-5)->epsilon, kInf);
}

TEST(PrivacyLedgerTest, RefusesBadChargesAndRestores) {
  PrivacyLedger ledger;
  for (const double q : {-0.1, 1.01, std::nan("")}) {
    EXPECT_EQ(ledger.Charge(q, 1).code(), StatusCode::kInvalidArgument) << q;
  }
  for (const double z : {-1.0, std::nan("")}) {
    EXPECT_EQ(ledger.Charge(0.1, z).code(), StatusCode::kInvalidArgument) << z;
  }
  EXPECT_EQ(ledger.rounds(), 0u);
  EXPECT_EQ(ledger.Epsilon(1.0).status().code(), StatusCode::kInvalidArgument);
  PrivacyLedger saved;
  for (int round = 0; round < 5; ++round) ASSERT_TRUE(saved.Charge(0.2, 1.5).ok());
  ASSERT_TRUE(ledger.Restore(saved.rdp(), saved.rounds()).ok());
  EXPECT_EQ(ledger.rounds(), 5u);
  EXPECT_EQ(ledger.Epsilon(1e-5)->epsilon, saved.Epsilon(1e-5)->epsilon);
  std::vector<double> bad(saved.rdp().begin(), saved.rdp().end());
  bad[0] = std::nan("");
  EXPECT_EQ(ledger.Restore(bad, 5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.Restore(std::span(bad).first(3), 5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.rounds(), 5u);  // a refused restore changes nothing
}

TEST(NoiseMultiplierForEpsilonTest, RoundTrips) {
  const struct {
    double q;
    std::uint64_t steps;
    double epsilon, delta;
  } cases[] = {
      {0.01, 1000, 1, 1e-5}, {0.1, 500, 8, 1e-5}, {1, 10, 3, 1e-6}, {0.002, 20000, 0.5, 1e-7}};
  for (const auto& c : cases) {
    const Result<double> z = NoiseMultiplierForEpsilon(c.q, c.steps, c.epsilon, c.delta);
    ASSERT_TRUE(z.ok()) << z.status().reason();
    EXPECT_LE(SpentEpsilon(c.q, *z, c.steps, c.delta), c.epsilon);
    EXPECT_GT(SpentEpsilon(c.q, *z * (1 - 1e-3), c.steps, c.delta), c.epsilon);
  }
}

TEST(NoiseMultiplierForEpsilonTest, RejectsBadInputAndUnreachableTargets) {
  EXPECT_EQ(NoiseMultiplierForEpsilon(0, 10, 1, 1e-5).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NoiseMultiplierForEpsilon(0.1, 0, 1, 1e-5).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NoiseMultiplierForEpsilon(0.1, 10, 0, 1e-5).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NoiseMultiplierForEpsilon(0.1, 10, std::nan(""), 1e-5).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NoiseMultiplierForEpsilon(0.1, 10, 1, 1).status().code(), StatusCode::kInvalidArgument);
  // A million full-participation rounds at epsilon 1e-3 need far more noise than 1e4.
  EXPECT_EQ(NoiseMultiplierForEpsilon(1, 1000000, 1e-3, 1e-5).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(NoiseMultiplierForEpsilon(0.01, 1, 1e6, 0.5).status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace edgesgd
