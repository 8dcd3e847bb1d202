#include "edgesgd/platform/data_file.h"

#include <algorithm>
#include <array>
#include <functional>
#include <span>

#include "data_readers.h"
#include "sample_rows.h"

#ifndef EDGESGD_HAVE_ZLIB
#define EDGESGD_HAVE_ZLIB 0
#endif

namespace edgesgd::platform {
namespace {

using internal::Quoted;

// The formats: a new one is a <format>_reader.cc and a line here.
struct DataFormat {
  const char* name;
  const char* syntax;
  std::size_t min_paths;
  std::size_t max_paths;
  HostResult<LabeledData> (*read)(std::span<const std::string> paths,
                                  const DataReadOptions& options);
};
constexpr std::array<DataFormat, 3> kDataFormats = {{
    {"idx", "idx:IMAGES[,LABELS]", 1, 2, internal::ReadIdx},
    {"csv", "csv:PATH", 1, 1, internal::ReadCsv},
    {"npy", "npy:FEATURES,LABELS", 2, 2, internal::ReadNpy},
}};

const DataFormat* FindFormat(std::string_view name) {
  for (const DataFormat& format : kDataFormats) {
    if (name == format.name) return &format;
  }
  return nullptr;
}

HostError SpecError(std::string message) {
  return HostError(Status::InvalidArgument(), std::move(message));
}

}  // namespace

DatasetView LabeledData::View() const {
  DatasetView view;
  view.features = features;
  view.feature_bytes = feature_bytes;
  view.byte_divisor = 255.0f;  // unsigned bytes stand for [0, 1]
  view.labels = labels;
  view.num_samples = num_samples;
  view.feature_dim = feature_dim;
  view.num_classes = num_classes;
  return view;
}

std::string DataFileSyntax() {
  std::string syntax;
  for (const DataFormat& format : kDataFormats) {
    if (!syntax.empty()) syntax += ", ";
    syntax += format.syntax;
  }
  return syntax;
}

HostResult<DataFileSpec> ParseDataFileSpec(std::string_view text) {
  const std::size_t colon = text.find(':');
  const DataFormat* format =
      colon == std::string_view::npos ? nullptr : FindFormat(text.substr(0, colon));
  if (format == nullptr) {
    return SpecError("unknown data format in " + Quoted(text) + " (" + DataFileSyntax() + ")");
  }
  DataFileSpec spec;
  spec.format = format->name;
  for (std::string_view rest = text.substr(colon + 1);;) {
    const std::size_t comma = rest.find(',');
    const std::string_view path = rest.substr(0, comma);
    if (path.empty()) {
      return SpecError(Quoted(text) + " has an empty path (" + format->syntax + ")");
    }
    spec.paths.emplace_back(path);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  const std::size_t count = spec.paths.size();
  if (count < format->min_paths || count > format->max_paths) {
    return SpecError(Quoted(text) + " gives " + std::to_string(count) +
                     (count == 1 ? " path" : " paths") + ", expected " + format->syntax);
  }
  return spec;
}

HostResult<LabeledData> LoadDataFile(const DataFileSpec& spec, const DataReadOptions& options) {
  const DataFormat* format = FindFormat(spec.format);
  if (format == nullptr || spec.paths.size() < format->min_paths ||
      spec.paths.size() > format->max_paths) {
    return HostError(Status::InvalidArgument(), "invalid data file spec of format '" + spec.format +
                                                    "' (" + DataFileSyntax() + ")");
  }
  if (options.classes > kMaxDataClasses) {
    return HostError(Status::InvalidArgument(),
                     "at most " + std::to_string(kMaxDataClasses) + " classes can be read");
  }
  if (std::adjacent_find(options.rows.begin(), options.rows.end(), std::greater_equal<>()) !=
      options.rows.end()) {
    return HostError(Status::InvalidArgument(), "the rows to load must ascend strictly");
  }
  HostResult<LabeledData> load = format->read(spec.paths, options);
  if (!load.ok()) return load;
  LabeledData& data = *load;
  data.num_classes =
      options.classes != 0
          ? options.classes
          : std::size_t{*std::max_element(data.labels.begin(), data.labels.end())} + 1;
  return load;
}

bool GzipAvailable() { return EDGESGD_HAVE_ZLIB != 0; }

}  // namespace edgesgd::platform
