#pragma once

// One reader per data-file format, each in its own <format>_reader.cc; data_file.cc lists them
// (the one place a new format is registered). A reader loads the rows `options` asks for from
// the spec's paths and checks labels against options.classes; data_file.cc fills in
// num_classes.

#include <span>
#include <string>

#include "edgesgd/platform/data_file.h"

namespace edgesgd::platform::internal {

// idx:IMAGES[,LABELS]
HostResult<LabeledData> ReadIdx(std::span<const std::string> paths, const DataReadOptions& options);
// csv:PATH
HostResult<LabeledData> ReadCsv(std::span<const std::string> paths, const DataReadOptions& options);
// npy:FEATURES,LABELS
HostResult<LabeledData> ReadNpy(std::span<const std::string> paths, const DataReadOptions& options);

}  // namespace edgesgd::platform::internal
