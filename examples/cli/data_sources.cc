#include "cli/data_sources.h"

#include <utility>

#include "cli/flag_error.h"
#include "edgesgd/platform/fashion_mnist.h"

namespace edgesgd::cli {
namespace {

bool IsBuiltIn(const std::string& data) { return data == "synthetic" || data == "fashion-mnist"; }

// A CSV label that is not a whole number is most often a feature, the file holding its labels
// in the other column: the reader's note says which column it read, this adds the flag that reads
// the other one.
void NameTheOtherColumn(platform::CsvLabelColumn column, std::string& message) {
  if (!message.ends_with(platform::CsvLabelColumnNote(column))) return;
  const std::string other = column == platform::CsvLabelColumn::kFirst ? "last" : "first";
  message.insert(message.size() - 1, "; pass --csv-label " + other + " if it is the " + other);
}

// Loads a spec the validator has accepted.
HostResult<platform::LabeledData> LoadFile(const std::string& text,
                                           const platform::DataReadOptions& options) {
  HostResult<platform::DataFileSpec> spec = platform::ParseDataFileSpec(text);
  if (!spec.ok()) return std::move(spec).error();
  HostResult<platform::LabeledData> load = platform::LoadDataFile(*spec, options);
  if (load.ok()) return load;
  std::string message = load.message();
  NameTheOtherColumn(options.csv_label, message);
  return HostError(load.status(), std::move(message));
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
        return platform::ParseDataFileSpec(value).message();
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

HostResult<> CheckDataFiles(const std::string& data, const std::string& test_data,
                            const std::string& csv_label) {
  if (csv_label == "last" && !IsCsv(data) && !IsCsv(test_data)) {
    return FlagError(
        "--csv-label last applies to CSV data files, and neither --data nor "
        "--test-data names one (csv:PATH)");
  }
  if (test_data.empty()) return {};
  if (IsBuiltIn(data)) {
    return FlagError("--test-data needs a data file in --data (" + platform::DataFileSyntax() +
                     ")");
  }
  HostResult<platform::DataFileSpec> parse = platform::ParseDataFileSpec(test_data);
  if (!parse.ok()) return std::move(parse).error().WithContext("--test-data");
  return {};
}

HostResult<LabeledSets> LoadLabeledData(const std::string& data, const std::string& test_data,
                                        platform::CsvLabelColumn csv_label, std::size_t limit,
                                        bool training_labels_only) {
  platform::DataReadOptions train_options;
  train_options.csv_label = csv_label;
  train_options.labels_only =
      training_labels_only && (data == "fashion-mnist" || !test_data.empty());
  HostResult<platform::LabeledData> train = LoadTrainingRows(data, limit, train_options);
  if (!train.ok()) return std::move(train).error();
  LabeledSets sets;
  sets.train = std::move(train).value();
  if (data == "fashion-mnist") {
    HostResult<platform::LabeledData> test =
        platform::LoadFashionMnist(platform::FashionMnistSplit::kTest);
    if (!test.ok()) return std::move(test).error();
    sets.test = std::move(test).value();
    return sets;
  }
  if (test_data.empty()) return sets;
  // The model's classes are the training set's: a test label beyond them is an error.
  platform::DataReadOptions test_options;
  test_options.classes = sets.train.num_classes;
  test_options.csv_label = csv_label;
  HostResult<platform::LabeledData> test = LoadFile(test_data, test_options);
  if (!test.ok()) return std::move(test).error();
  sets.test = std::move(test).value();
  if (sets.test.feature_dim != sets.train.feature_dim) {
    return FlagError("--test-data " + test_data + " has " + std::to_string(sets.test.feature_dim) +
                     " features per sample, --data " + data + " has " +
                     std::to_string(sets.train.feature_dim));
  }
  return sets;
}

HostResult<platform::LabeledData> LoadTrainingRows(const std::string& data, std::size_t limit,
                                                   platform::DataReadOptions options) {
  options.max_rows = limit;
  if (data == "fashion-mnist") {
    return platform::LoadFashionMnist(platform::FashionMnistDirectory(),
                                      platform::FashionMnistSplit::kTrain, options);
  }
  return LoadFile(data, options);
}

}  // namespace edgesgd::cli
