// The command's training problems (cli/task.h): a label-flipping worker's gradient is the one
// on its shard with every label y read as classes - 1 - y, and no other worker's changes; a task
// that only evaluates scores like a training one without holding the training features.

#include "cli/task.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace edgesgd::cli {
namespace {

constexpr std::size_t kClasses = 4;
constexpr std::size_t kFeatures = 3;
constexpr std::size_t kSamples = 40;

class TaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/edgesgd_task_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& path : written_) std::remove(path.c_str());
    ::rmdir(dir_.c_str());
  }

  // A CSV data set of every class, its labels flipped when `flipped`: the same features either
  // way. Returns its --data spec.
  std::string WriteData(const std::string& name, bool flipped) {
    const std::string path = dir_ + "/" + name;
    std::FILE* file = std::fopen(path.c_str(), "w");
    EXPECT_NE(file, nullptr) << path;
    if (file == nullptr) return "";
    written_.push_back(path);
    for (std::size_t i = 0; i < kSamples; ++i) {
      const std::size_t label = i % kClasses;
      std::fprintf(file, "%zu", flipped ? kClasses - 1 - label : label);
      for (std::size_t j = 0; j < kFeatures; ++j) std::fprintf(file, ",%zu", (i * 7 + j * 3) % 11);
      std::fprintf(file, "\n");
    }
    std::fclose(file);
    return "csv:" + path;
  }

  std::string dir_;
  std::vector<std::string> written_;
};

std::vector<float> GradientOf(Task& task, std::size_t worker, std::uint32_t round) {
  std::vector<float> point(task.dimension());
  for (std::size_t i = 0; i < point.size(); ++i) {
    point[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
  }
  std::vector<float> gradient(task.dimension());
  EXPECT_TRUE(task.Gradient(worker, point, round, 0, gradient).ok());
  return gradient;
}

TEST_F(TaskTest, LabelFlippingWorkersTrainOnFlippedLabels) {
  const std::string data = WriteData("data.csv", false);
  const std::string mirrored = WriteData("mirrored.csv", true);
  // Mini-batches and the full shard (batch 0) are gathered differently.
  for (const std::size_t batch : {std::size_t{8}, std::size_t{0}}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    TaskOptions options;
    options.workers = 2;
    options.batch = batch;
    options.data = data;
    Task honest;
    Task attacked;
    Task reference;  // every worker honest on the mirrored labels
    const HostResult<> honest_set_up = honest.Setup(options);
    ASSERT_TRUE(honest_set_up.ok()) << honest_set_up.message();
    options.label_flipped_workers = 1;
    const HostResult<> attacked_set_up = attacked.Setup(options);
    ASSERT_TRUE(attacked_set_up.ok()) << attacked_set_up.message();
    options.label_flipped_workers = 0;
    options.data = mirrored;
    const HostResult<> reference_set_up = reference.Setup(options);
    ASSERT_TRUE(reference_set_up.ok()) << reference_set_up.message();
    // The split depends on the sample count alone, so worker 0's shard and batches are the same
    // rows in both files.
    for (std::uint32_t round = 0; round < 3; ++round) {
      const std::vector<float> flipped = GradientOf(attacked, 0, round);
      EXPECT_EQ(flipped, GradientOf(reference, 0, round));
      EXPECT_NE(flipped, GradientOf(honest, 0, round));
      EXPECT_EQ(GradientOf(attacked, 1, round), GradientOf(honest, 1, round));
    }
  }
}

// The server's task: with a test set it reads the training labels alone, yet splits them and
// scores the model exactly as a training process does, and refuses to compute gradients.
TEST_F(TaskTest, EvaluatingTaskScoresLikeATrainingTaskWithoutTrainingFeatures) {
  TaskOptions options;
  options.workers = 3;
  options.batch = 0;  // the full shard: the Welcome's batch comes from the split
  options.split = SplitKind::kDirichlet;
  options.data = WriteData("train.csv", false);
  options.test_data = WriteData("test.csv", true);
  Task training;
  const HostResult<> training_set_up = training.Setup(options);
  ASSERT_TRUE(training_set_up.ok()) << training_set_up.message();
  options.evaluates_only = true;
  Task evaluating;
  const HostResult<> evaluating_set_up = evaluating.Setup(options);
  ASSERT_TRUE(evaluating_set_up.ok()) << evaluating_set_up.message();

  ASSERT_EQ(evaluating.dimension(), training.dimension());
  for (std::size_t w = 0; w < options.workers; ++w) {
    EXPECT_EQ(evaluating.samples_per_step(w), training.samples_per_step(w)) << "worker " << w;
  }
  std::vector<float> model(training.dimension());
  for (std::size_t i = 0; i < model.size(); ++i) model[i] = 0.05f * static_cast<float>(i % 5);
  const TaskEvaluation expected = training.Evaluate(model);
  const TaskEvaluation actual = evaluating.Evaluate(model);
  EXPECT_EQ(actual.loss, expected.loss);
  EXPECT_EQ(actual.accuracy, expected.accuracy);
  std::vector<float> gradient(training.dimension());
  EXPECT_EQ(evaluating.Gradient(0, model, 1, 0, gradient), Status::FailedPrecondition());
}

}  // namespace
}  // namespace edgesgd::cli
