#include "cli/data_sources.h"

#include <utility>

#include "edgesgd/platform/fashion_mnist.h"

namespace edgesgd::cli {
namespace {

bool IsBuiltIn(const std::string& data) { return data == "synthetic" || data == "fashion-mnist"; }

// The data of a successful load, or its message.
bool Loaded(platform::LabeledDataLoad load, platform::LabeledData& out, std::string& error) {
  if (!load.ok()) {
    error = std::move(load.message);
    return false;
  }
  out = std::move(load.data);
  return true;
}

// Loads a spec the validator has accepted.
bool LoadFile(const std::string& text, const platform::DataReadOptions& options,
              platform::LabeledData& out, std::string& error) {
  return Loaded(platform::LoadDataFile(platform::ParseDataFileSpec(text).spec, options), out,
                error);
}

}  // namespace

CLI::Validator DataValidator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (IsBuiltIn(value)) return "";
        if (value.find(':') == std::string::npos) {
          return "'" + value + "' is not synthetic, fashion-mnist or a data file (" +
                 platform::DataFileSyntax() + ")";
        }
        const platform::DataFileSpecParse parse = platform::ParseDataFileSpec(value);
        return parse.ok() ? "" : parse.message;
      },
      "DATA");
}

std::string DataHelp() {
  return "softmax/mlp data: fashion-mnist (Debian's dataset-fashion-mnist; directory overridable "
         "with $EDGESGD_FASHION_MNIST_DIR), synthetic (a 10-class Gaussian mixture) or a file: " +
         platform::DataFileSyntax() + " (docs/cli.md#data-files)";
}

std::string TestDataHelp() {
  return "With a data file in --data: the test set, a data file too (" +
         platform::DataFileSyntax() + "); without it the training set is evaluated";
}

std::string CheckTestData(const std::string& data, const std::string& test_data) {
  if (test_data.empty()) return "";
  if (IsBuiltIn(data)) {
    return "--test-data needs a data file in --data (" + platform::DataFileSyntax() + ")";
  }
  const platform::DataFileSpecParse parse = platform::ParseDataFileSpec(test_data);
  return parse.ok() ? "" : "--test-data: " + parse.message;
}

bool LoadLabeledData(const std::string& data, const std::string& test_data, std::size_t limit,
                     LabeledSets& sets, std::string& error, bool training_labels_only) {
  platform::LabeledData& train = sets.train;
  platform::LabeledData& test = sets.test;
  test = {};
  platform::DataReadOptions train_options;
  train_options.labels_only =
      training_labels_only && (data == "fashion-mnist" || !test_data.empty());
  if (!LoadTrainingRows(data, limit, train_options, train, error)) return false;
  if (data == "fashion-mnist") {
    return Loaded(platform::LoadFashionMnist(platform::FashionMnistSplit::kTest), test, error);
  }
  if (test_data.empty()) return true;
  // The model's classes are the training set's: a test label beyond them is an error.
  platform::DataReadOptions test_options;
  test_options.classes = train.num_classes;
  if (!LoadFile(test_data, test_options, test, error)) return false;
  if (test.feature_dim != train.feature_dim) {
    error = "--test-data " + test_data + " has " + std::to_string(test.feature_dim) +
            " features per sample, --data " + data + " has " + std::to_string(train.feature_dim);
    return false;
  }
  return true;
}

bool LoadTrainingRows(const std::string& data, std::size_t limit, platform::DataReadOptions options,
                      platform::LabeledData& out, std::string& error) {
  options.max_rows = limit;
  if (data == "fashion-mnist") {
    return Loaded(platform::LoadFashionMnist(platform::FashionMnistDirectory(),
                                             platform::FashionMnistSplit::kTrain, options),
                  out, error);
  }
  return LoadFile(data, options, out, error);
}

}  // namespace edgesgd::cli
