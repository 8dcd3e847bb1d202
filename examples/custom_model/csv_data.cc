#include "csv_data.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numbers>
#include <random>
#include <string_view>

namespace custom_model {
namespace {

using edgesgd::HostError;
using edgesgd::HostResult;
using edgesgd::Status;

// Labels are class indices, and the model has one output per class: a typo such as 10000
// would otherwise build a huge model.
constexpr std::uint32_t kMaxClasses = 1000;

std::string_view Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    const auto comma = line.find(',');
    fields.push_back(Trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

// std::from_chars over the whole of `text`: "1.5x" is not a number.
template <typename T>
bool ParseWhole(std::string_view text, T& value) {
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  return error == std::errc() && stop == end;
}

HostError CannotWrite(const std::string& path) {
  return HostError(Status::Unavailable(), "cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace

std::uint32_t Dataset::class_count() const {
  return labels.empty() ? 0 : *std::max_element(labels.begin(), labels.end()) + 1;
}

Dataset Rows(const Dataset& data, std::size_t begin, std::size_t end) {
  Dataset part;
  part.feature_count = data.feature_count;
  const auto feature = [&data](std::size_t row) {
    return data.features.begin() + static_cast<std::ptrdiff_t>(row * data.feature_count);
  };
  part.features.assign(feature(begin), feature(end));
  part.labels.assign(data.labels.begin() + static_cast<std::ptrdiff_t>(begin),
                     data.labels.begin() + static_cast<std::ptrdiff_t>(end));
  return part;
}

HostResult<> WriteTwoMoonsCsv(const std::string& path, std::size_t rows, float noise,
                              std::uint64_t seed) {
  std::ofstream file(path);
  if (!file) return CannotWrite(path);
  std::mt19937_64 random(seed);
  std::bernoulli_distribution upper_moon(0.5);
  std::uniform_real_distribution<float> angle(0.0f, std::numbers::pi_v<float>);
  std::normal_distribution<float> jitter(0.0f, noise);
  file << "label,x,y\n";
  for (std::size_t i = 0; i < rows; ++i) {
    const bool upper = upper_moon(random);
    const float t = angle(random);
    // The upper moon is the top half of the unit circle; the lower one is the bottom half,
    // shifted right by 1 and down by 0.5, so each moon's tip reaches into the other's hollow.
    float x = upper ? std::cos(t) : 1.0f - std::cos(t);
    float y = upper ? std::sin(t) : 0.5f - std::sin(t);
    x += jitter(random);
    y += jitter(random);
    file << (upper ? 0 : 1) << ',' << x << ',' << y << '\n';
  }
  file.close();
  if (!file) return CannotWrite(path);
  return {};
}

HostResult<Dataset> ReadCsv(const std::string& path, bool label_last) {
  std::ifstream file(path);
  if (!file) {
    return HostError(Status::Unavailable(), "cannot open " + path + ": " + std::strerror(errno));
  }
  const auto fail = [&path](std::size_t line_number, const std::string& reason) {
    return HostError(Status::DataLoss(), path + ":" + std::to_string(line_number) + ": " + reason);
  };

  std::string line;
  if (!std::getline(file, line)) return fail(1, "empty file (expected a header line)");
  const std::size_t columns = SplitFields(line).size();
  if (columns < 2) return fail(1, "the header has one column; expected a label and features");

  const std::size_t label_field = label_last ? columns - 1 : 0;
  // A label that is not a class index is most often a feature: the label is in the other column.
  const std::string read = label_last ? "last" : "first";
  const std::string other = label_last ? "first" : "last";
  const std::string label_hint = " (the label is read from the " + read +
                                 " column; pass --csv-label " + other + " if it is the " + other +
                                 ")";
  Dataset data;
  data.feature_count = columns - 1;
  for (std::size_t line_number = 2; std::getline(file, line); ++line_number) {
    if (Trim(line).empty()) continue;
    const std::vector<std::string_view> fields = SplitFields(line);
    if (fields.size() != columns) {
      return fail(line_number, "expected " + std::to_string(columns) + " fields, found " +
                                   std::to_string(fields.size()));
    }
    for (std::size_t i = 0; i < columns; ++i) {
      if (i == label_field) continue;
      float value = 0;
      if (!ParseWhole(fields[i], value) || !std::isfinite(value)) {
        return fail(line_number, "field " + std::to_string(i + 1) + " is not a finite number: '" +
                                     std::string(fields[i]) + "'");
      }
      data.features.push_back(value);
    }
    std::uint32_t label = 0;
    if (!ParseWhole(fields[label_field], label) || label >= kMaxClasses) {
      return fail(line_number, "the label '" + std::string(fields[label_field]) +
                                   "' is not a class index from 0 to " +
                                   std::to_string(kMaxClasses - 1) + label_hint);
    }
    data.labels.push_back(label);
  }
  if (file.bad()) {
    return HostError(Status::Unavailable(), "cannot read " + path + ": " + std::strerror(errno));
  }
  if (data.rows() == 0) {
    return HostError(Status::DataLoss(), path + ": no data rows after the header");
  }
  return data;
}

}  // namespace custom_model
