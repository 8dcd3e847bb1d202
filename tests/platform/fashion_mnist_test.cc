#include "edgesgd/platform/fashion_mnist.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/model/model.h"
#include "platform/data_file_writers.h"
#include "sanitizers.h"

namespace edgesgd::platform {
namespace {

using data_files::Bytes;
using data_files::Gzip;
using data_files::ImagesIdx;
using data_files::LabelsIdx;

// The set's files are gzip-compressed: a build without zlib (a cross sysroot that has none) only
// refuses them, which FashionMnistTest.IsUnavailableWithoutZlib checks.
#if EDGESGD_TEST_READS_GZIP

void WriteFile(const std::string& path, const Bytes& bytes) {
  ASSERT_TRUE(data_files::WriteBytes(path, bytes)) << path;
}

class FashionMnistFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/edgesgd_fmnist_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    std::remove(ImagesPath().c_str());
    std::remove(LabelsPath().c_str());
    ::rmdir(dir_.c_str());
  }
  std::string ImagesPath() const { return dir_ + "/t10k-images-idx3-ubyte.gz"; }
  std::string LabelsPath() const { return dir_ + "/t10k-labels-idx1-ubyte.gz"; }
  void Write(const Bytes& images, const Bytes& labels) {
    WriteFile(ImagesPath(), Gzip(images));
    WriteFile(LabelsPath(), Gzip(labels));
  }
  HostResult<LabeledData> Load(std::size_t limit = 0) const {
    return LoadFashionMnist(dir_, FashionMnistSplit::kTest, limit);
  }

  std::string dir_;
};

TEST_F(FashionMnistFilesTest, LoadsAValidSmallSetScaledToUnitRange) {
  Write(ImagesIdx(2051, 3, 28, 28, 3), LabelsIdx(2049, {9, 0, 4}));
  const HostResult<LabeledData> load = Load();
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(load->num_samples, 3u);
  ASSERT_EQ(load->feature_bytes.size(), 3u * 784u);  // pixels stay bytes
  std::vector<float> floats(3 * 784);
  std::vector<std::uint8_t> labels(3);
  ASSERT_TRUE(GatherRows(load->View(), {}, {floats, labels, {}}).ok());
  EXPECT_EQ(floats[0], 0.0f);
  EXPECT_EQ(floats[255], 1.0f);
  EXPECT_EQ(floats[1], 1.0f / 255.0f);
  EXPECT_EQ(load->labels, (std::vector<std::uint8_t>{9, 0, 4}));
  const DatasetView view = load->View();
  EXPECT_TRUE(ValidateDataset(view).ok());
  EXPECT_EQ(view.num_classes, 10u);

  const HostResult<LabeledData> limited = Load(2);
  ASSERT_TRUE(limited.ok()) << limited.message();
  EXPECT_EQ(limited->num_samples, 2u);
  EXPECT_EQ(limited->feature_bytes.size(), 2u * 784u);
}

TEST_F(FashionMnistFilesTest, ReportsAMissingFile) {
  WriteFile(ImagesPath(), Gzip(ImagesIdx(2051, 1, 28, 28, 1)));
  const HostResult<LabeledData> load = Load();
  EXPECT_EQ(load.status(), Status::NotFound());
  EXPECT_EQ(load.message(), "missing file " + LabelsPath() + ": No such file or directory");
}

TEST_F(FashionMnistFilesTest, ReportsBadMagic) {
  Write(ImagesIdx(0x00010803, 1, 28, 28, 1), LabelsIdx(2049, {1}));
  const HostResult<LabeledData> load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(),
            "corrupt: bad magic 0x00010803 in " + ImagesPath() +
                " (IDX images begin 0x0000, a type byte and at least 2 dimensions)");
  Write(ImagesIdx(2051, 1, 28, 28, 1), LabelsIdx(2051, {1}));
  const HostResult<LabeledData> labels = Load();
  EXPECT_EQ(labels.status(), Status::DataLoss());
  EXPECT_NE(labels.message().find("bad magic 0x00000803 in " + LabelsPath()), std::string::npos)
      << labels.message();
}

TEST_F(FashionMnistFilesTest, ReportsWrongDimensionsAndCountMismatch) {
  Write(ImagesIdx(2051, 1, 28, 27, 1), LabelsIdx(2049, {1}));
  HostResult<LabeledData> load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(),
            "corrupt: " + ImagesPath() + " holds images of 756 pixels, expected 28x28");
  Write(ImagesIdx(2051, 2, 28, 28, 2), LabelsIdx(2049, {1}));
  load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(), "shape mismatch: " + ImagesPath() + " holds 2 samples but " +
                                LabelsPath() + " holds 1 labels");
}

TEST_F(FashionMnistFilesTest, ReportsTruncatedData) {
  // Header promises 3 images, the (well-formed) gzip stream holds 2.
  Write(ImagesIdx(2051, 3, 28, 28, 2), LabelsIdx(2049, {1, 2, 3}));
  HostResult<LabeledData> load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(),
            "truncated: expected 2352 bytes of pixels in " + ImagesPath() + ", got 1568");

  // The gzip stream itself cut short (a partial download).
  Bytes gz = Gzip(ImagesIdx(2051, 3, 28, 28, 3));
  gz.resize(gz.size() / 2);
  WriteFile(ImagesPath(), gz);
  load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message().rfind("truncated: expected 2352 bytes of pixels in " + ImagesPath(), 0),
            0u)
      << load.message();
  EXPECT_NE(load.message().find("unexpected end of file"), std::string::npos) << load.message();

  // A header cut short.
  WriteFile(ImagesPath(), Gzip({0, 0, 8, 3, 0, 0}));
  load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(), "truncated: " + ImagesPath() + " ends after 6 of 16 header bytes");
}

TEST_F(FashionMnistFilesTest, ReportsLabelsOutOfRange) {
  Write(ImagesIdx(2051, 3, 28, 28, 3), LabelsIdx(2049, {1, 12, 3}));
  const HostResult<LabeledData> load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(), "corrupt: label 12 of sample 1 in " + LabelsPath() + " is outside 0-9");
}

TEST_F(FashionMnistFilesTest, ReportsBadChecksumAndTrailingData) {
  Bytes gz = Gzip(ImagesIdx(2051, 1, 28, 28, 1));
  gz[gz.size() - 6] ^= 0xFF;  // a CRC byte
  WriteFile(ImagesPath(), gz);
  WriteFile(LabelsPath(), Gzip(LabelsIdx(2049, {1})));
  HostResult<LabeledData> load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(), "corrupt gzip data in " + ImagesPath() + ": incorrect data check");

  Write(ImagesIdx(2051, 1, 28, 28, 2), LabelsIdx(2049, {1}));
  load = Load();
  EXPECT_EQ(load.status(), Status::DataLoss());
  EXPECT_EQ(load.message(), "corrupt: " + ImagesPath() + " has data after its 1 declared items");
}

TEST(FashionMnistTest, ReportsAMissingDirectory) {
  const HostResult<LabeledData> load =
      LoadFashionMnist("/nonexistent/edgesgd-fmnist", FashionMnistSplit::kTrain);
  EXPECT_EQ(load.status(), Status::NotFound());
  EXPECT_EQ(load.message(),
            "missing directory /nonexistent/edgesgd-fmnist: No such file or directory");
  EXPECT_EQ(LoadFashionMnist("", FashionMnistSplit::kTrain).status(), Status::InvalidArgument());
}

#else

TEST(FashionMnistTest, IsUnavailableWithoutZlib) {
  EXPECT_FALSE(GzipAvailable());
  const HostResult<LabeledData> load = LoadFashionMnist(FashionMnistSplit::kTrain);
  EXPECT_EQ(load.status(), Status::Unavailable());
  EXPECT_EQ(load.message(), "Fashion-MNIST reader unavailable: edgesgd was built without zlib");
}

#endif

TEST(FashionMnistTest, DirectoryComesFromTheEnvironment) {
  const char* saved = std::getenv(kFashionMnistDirectoryEnv);
  const std::string restore = saved != nullptr ? saved : "";
  ::setenv(kFashionMnistDirectoryEnv, "/some/where", 1);
  EXPECT_EQ(FashionMnistDirectory(), "/some/where");
  ::unsetenv(kFashionMnistDirectoryEnv);
  EXPECT_EQ(FashionMnistDirectory(), kFashionMnistDefaultDirectory);
  if (saved != nullptr) ::setenv(kFashionMnistDirectoryEnv, restore.c_str(), 1);
}

#if EDGESGD_TEST_READS_GZIP

// The real data set: Debian's package dataset-fashion-mnist, which tests/run_all.sh installs.
::testing::AssertionResult RealDataPresent() {
  const std::string dir = FashionMnistDirectory();
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    struct stat info {};
    if (::stat((dir + "/" + name).c_str(), &info) != 0) {
      return ::testing::AssertionFailure()
             << "no " << name << " in " << dir << ": install dataset-fashion-mnist";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(FashionMnistRealDataTest, LoadsBothSplitsWithBalancedLabels) {
  ASSERT_TRUE(RealDataPresent());
  const HostResult<LabeledData> train = LoadFashionMnist(FashionMnistSplit::kTrain);
  ASSERT_TRUE(train.ok()) << train.message();
  const HostResult<LabeledData> test = LoadFashionMnist(FashionMnistSplit::kTest);
  ASSERT_TRUE(test.ok()) << test.message();
  EXPECT_EQ(train->num_samples, 60000u);
  EXPECT_EQ(test->num_samples, 10000u);
  for (const HostResult<LabeledData>* load : {&train, &test}) {
    ASSERT_TRUE(ValidateDataset((*load)->View()).ok());
    std::array<std::size_t, 10> counts{};
    for (const auto label : (*load)->labels) ++counts[label];
    for (const std::size_t count : counts) EXPECT_EQ(count, (*load)->num_samples / 10);
    const auto [low, high] =
        std::minmax_element((*load)->feature_bytes.begin(), (*load)->feature_bytes.end());
    EXPECT_EQ(*low, 0);
    EXPECT_EQ(*high, 255);
  }
  const HostResult<LabeledData> limited = LoadFashionMnist(FashionMnistSplit::kTrain, 100);
  ASSERT_TRUE(limited.ok()) << limited.message();
  EXPECT_EQ(limited->num_samples, 100u);
  EXPECT_EQ(limited->labels[7], train->labels[7]);
}

// Plain single-process SGD on softmax regression: the baseline every distributed experiment
// compares against must reach the usual ~84% test accuracy. Not in sanitizer builds, where it
// takes ~80 s to check learning, not memory safety: the loader and the kernels run under the
// sanitizers in the other tests. Cross builds leave it out too (an *AccuracyTest suite: minutes
// under qemu-user, see tests/CMakeLists.txt).
#if !EDGESGD_UNDER_ASAN
TEST(FashionMnistAccuracyTest, SoftmaxSgdReachesEightyThreePercent) {
  ASSERT_TRUE(RealDataPresent());
  const HostResult<LabeledData> train = LoadFashionMnist(FashionMnistSplit::kTrain);
  ASSERT_TRUE(train.ok()) << train.message();
  const HostResult<LabeledData> test = LoadFashionMnist(FashionMnistSplit::kTest);
  ASSERT_TRUE(test.ok()) << test.message();

  const ModelSpec spec{ModelKind::kSoftmaxRegression, kFashionMnistFeatures, kFashionMnistClasses,
                       0, true};
  std::vector<std::byte> storage(Model::ScratchBytes(spec) + kArenaAlignment);
  Arena arena{std::span<std::byte>(storage)};
  Model model;
  ASSERT_TRUE(model.Init(spec, arena).ok());
  std::vector<float> params(model.parameter_count());
  ASSERT_TRUE(model.InitParameters(1, params).ok());
  std::vector<float> gradient(params.size());
  constexpr std::size_t kBatch = 64;
  // lr 0.05 x 15000 steps gave 0.840-0.843 over four sampling seeds; lr >= 0.2 ends noisy
  // (0.78-0.83) and 3000 steps at lr 0.1 ~0.835, too close to the bar.
  constexpr int kSteps = 15000;
  constexpr float kLearningRate = 0.05f;
  std::vector<float> batch_x(kBatch * kFashionMnistFeatures);
  std::vector<std::uint8_t> batch_y(kBatch);
  const DatasetView train_view = train->View();
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < kSteps; ++step) {
    CounterRng rng(2024, static_cast<std::uint32_t>(step), 0,
                   StreamId(RandomPurpose::kDataSampling, 0));
    const Result<DatasetView> batch =
        SampleBatch(train_view, {}, kBatch, rng, {batch_x, batch_y, {}});
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(model.LossAndGradient(params, *batch, gradient).ok());
    for (std::size_t j = 0; j < params.size(); ++j) params[j] -= kLearningRate * gradient[j];
  }
  const Result<Evaluation> result = model.Evaluate(params, test->View(), {batch_x, batch_y, {}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok());
  std::printf(
      "softmax SGD on Fashion-MNIST: %d steps x %zu, lr %.2f: test accuracy %.4f, "
      "loss %.4f, %.2f s training + evaluation\n",
      kSteps, kBatch, static_cast<double>(kLearningRate), static_cast<double>(result->accuracy),
      static_cast<double>(result->loss), seconds);
  EXPECT_GE(result->accuracy, 0.83f);
}
#endif  // !EDGESGD_UNDER_ASAN

#endif  // EDGESGD_TEST_READS_GZIP

}  // namespace
}  // namespace edgesgd::platform
