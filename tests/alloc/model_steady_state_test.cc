// Zero heap allocation in the layer model's kernels: loss and gradient, and evaluation, of
// networks whose conv products take each path (Eigen's blocked product with its packing on the
// stack, and the row-by-row product of layers with more weights than a stack pack holds) never
// call operator new or malloc, from the first call on.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "alloc/allocation_counter.h"
#include "edgesgd/core/model/sequential.h"

namespace edgesgd {
namespace {

struct NetworkCase {
  std::string text;
  Shape input;
};

class ModelSteadyStateTest : public ::testing::TestWithParam<NetworkCase> {};

TEST_P(ModelSteadyStateTest, LossGradientAndEvaluationDoNotAllocate) {
  const NetworkCase& network = GetParam();
  constexpr std::size_t kClasses = 10;
  constexpr std::size_t kBatch = 4;
  const Result<SequentialSpec> spec = ParseSequentialSpec(network.text, network.input, kClasses);
  ASSERT_TRUE(spec.ok()) << spec.status().reason();
  std::vector<float> params(ParameterCount(*spec));
  ASSERT_TRUE(InitSequentialParameters(*spec, 7, params).ok());
  std::vector<float> gradient(params.size());
  std::vector<float> scratch(Sequential::ScratchFloats(*spec));
  std::vector<float> features(kBatch * spec->features());
  for (std::size_t i = 0; i < features.size(); ++i) {
    features[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  }
  std::vector<std::uint8_t> labels(kBatch);
  for (std::size_t i = 0; i < kBatch; ++i) labels[i] = static_cast<std::uint8_t>(i * 3 % kClasses);
  DatasetView batch;
  batch.features = features;
  batch.labels = labels;
  batch.num_samples = kBatch;
  batch.feature_dim = spec->features();
  batch.num_classes = kClasses;

  const std::size_t before = testing::HeapAllocationCount();
  for (int call = 0; call < 3; ++call) {
    const Result<float> loss = Sequential::LossAndGradient(*spec, params, batch, gradient, scratch);
    ASSERT_TRUE(loss.ok()) << loss.status().reason();
    EvaluationSums sums;
    ASSERT_TRUE(Sequential::AddToEvaluation(*spec, params, batch, scratch, sums).ok());
  }
  EXPECT_EQ(testing::HeapAllocationCount(), before);
}

INSTANTIATE_TEST_SUITE_P(
    ConvProducts, ModelSteadyStateTest,
    ::testing::Values(
        // The small CNN: every product blocked, conv1's fields in three products.
        NetworkCase{"conv:8:3,relu,maxpool:2,conv:16:3,relu,maxpool:2,dense:10", {28, 28, 1}},
        // conv2's 64 x 288 weights: blocked products of 113 positions, the largest packs.
        NetworkCase{"conv:32:3:1:same,relu,maxpool:2,conv:64:3:1:same,relu,maxpool:2,dense:10",
                    {28, 28, 1}},
        // conv2's 64 x 576 weights exceed a stack pack: its products go row by row.
        NetworkCase{"conv:64:3:1:same,relu,conv:64:3:1:same,relu,avgpool:2,dense:10",
                    {8, 8, 1}}),
    [](const ::testing::TestParamInfo<NetworkCase>& tested) {
      return "Network" + std::to_string(tested.index);
    });

}  // namespace
}  // namespace edgesgd
