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

// A CSV label that is not a whole number is most often a feature, the file holding its labels
// in the other column: the reader's note says which column it read, this adds the flag that reads
// the other one.
void NameTheOtherColumn(platform::CsvLabelColumn column, std::string& message) {
  if (!message.ends_with(platform::CsvLabelColumnNote(column))) return;
  const std::string other = column == platform::CsvLabelColumn::kFirst ? "last" : "first";
  message.insert(message.size() - 1, "; pass --csv-label " + other + " if it is the " + other);
}

// Loads a spec the validator has accepted.
bool LoadFile(const std::string& text, const platform::DataReadOptions& options,
              platform::LabeledData& out, std::string& error) {
  if (Loaded(platform::LoadDataFile(platform::ParseDataFileSpec(text).spec, options), out, error)) {
    return true;
  }
  NameTheOtherColumn(options.csv_label, error);
  return false;
}

bool IsCsv(const std::string& data) { return data.starts_with("csv:"); }

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

void AddCsvLabelFlag(CLI::App& command, std::string& column) {
  command.add_option("--csv-label", column,
                     "CSV data files (csv:PATH in --data and --test-data): the column that holds "
                     "each sample's label, first or last; the features are the other columns")
      ->capture_default_str()
      ->check(CLI::IsMember({"first", "last"}));
}

platform::CsvLabelColumn CsvLabelColumnOf(const std::string& column) {
  return column == "last" ? platform::CsvLabelColumn::kLast : platform::CsvLabelColumn::kFirst;
}

std::string CheckDataFiles(const std::string& data, const std::string& test_data,
                           const std::string& csv_label) {
  if (csv_label == "last" && !IsCsv(data) && !IsCsv(test_data)) {
    return "--csv-label last applies to CSV data files, and neither --data nor --test-data names "
           "one (csv:PATH)";
  }
  if (test_data.empty()) return "";
  if (IsBuiltIn(data)) {
    return "--test-data needs a data file in --data (" + platform::DataFileSyntax() + ")";
  }
  const platform::DataFileSpecParse parse = platform::ParseDataFileSpec(test_data);
  return parse.ok() ? "" : "--test-data: " + parse.message;
}

bool LoadLabeledData(const std::string& data, const std::string& test_data,
                     platform::CsvLabelColumn csv_label, std::size_t limit, LabeledSets& sets,
                     std::string& error, bool training_labels_only) {
  platform::LabeledData& train = sets.train;
  platform::LabeledData& test = sets.test;
  test = {};
  platform::DataReadOptions train_options;
  train_options.csv_label = csv_label;
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
  test_options.csv_label = csv_label;
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
