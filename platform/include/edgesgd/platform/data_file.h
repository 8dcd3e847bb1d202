#pragma once

// Labelled samples read from files: MNIST-style IDX, CSV and NumPy .npy (docs/cli.md#data-files
// gives each format's rules). Linux backend only (reads files, allocates at load time); the
// loaded arrays are viewed as an edgesgd::DatasetView, so users link edgesgd::core too.
//
// A data file is named by a spec, FORMAT:PATH[,PATH]:
//   idx:IMAGES[,LABELS]   IDX images and labels (labels beside the images by default)
//   csv:PATH              the label in the first column (or the last: DataReadOptions::
//                         csv_label), the features in the others; an optional header line
//   npy:FEATURES,LABELS   two .npy arrays, C order
// Any file may be gzip-compressed (recognised by its first bytes) when zlib is built in.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"

namespace edgesgd::platform {

// Labels are bytes in a DatasetView: at most 256 classes.
inline constexpr std::size_t kMaxDataClasses = 256;

// Owned samples, row-major with feature_dim values per sample: unsigned bytes stay bytes in
// `feature_bytes` (a quarter of the memory; the view scales them by 1/255 into [0, 1] as rows
// are gathered into float batches), other types are floats in `features`, kept as read. Labels
// each below num_classes. A load of labels alone has neither features nor feature bytes.
struct LabeledData {
  std::vector<float> features;
  std::vector<std::uint8_t> feature_bytes;
  std::vector<std::uint8_t> labels;
  std::size_t num_samples = 0;
  std::size_t feature_dim = 0;
  std::size_t num_classes = 0;

  // A view over the vectors (valid while this object lives; moving it keeps the view valid).
  DatasetView View() const;
};

// The errors of a load (LoadDataFile, LoadFashionMnist): a code and a one-line message naming
// the file and the problem, e.g. "corrupt: label 12 of sample 1 in /d/labels.npy is outside 0-9".
// Codes: kNotFound (missing file), kUnavailable (other open/read failures, or a gzip file in a
// build without zlib), kDataLoss (bad magic or header, truncation, trailing data, a shape
// mismatch between features and labels, a label out of range, a cell that is not a number, a
// value that is not finite, corrupt gzip), kInvalidArgument (a valid file this reader does not
// take: an unsupported value type or layout; a bad spec; rows that do not ascend), kOutOfRange
// (the rows asked for are not in the file).

// The column of a CSV file that holds the label: the first (as in the MNIST CSV files) or the
// last (as many exported tables have it).
enum class CsvLabelColumn { kFirst, kLast };

// Which rows to load and how to check labels.
struct DataReadOptions {
  std::size_t first_row = 0;  // rows before it are skipped (seeked over where the file allows)
  std::size_t max_rows = 0;   // 0: every row from first_row on
  // 0: labels below kMaxDataClasses, num_classes = 1 + the largest label read. Otherwise every
  // label must be below `classes`, and num_classes = classes.
  std::size_t classes = 0;
  // Non-empty: only these rows of the ones above are kept, numbered from first_row, strictly
  // ascending (e.g. one worker's shard). The others are read past, their values unchecked.
  std::span<const std::uint32_t> rows;
  // Labels alone (feature_dim is still set): e.g. to split the data before loading a shard.
  bool labels_only = false;
  // csv: the label's column; the features are the other columns, in their order.
  CsvLabelColumn csv_label = CsvLabelColumn::kFirst;
};

// How the message of a CSV load ends when a label cell is not a whole number: "(the label is read
// from the first column)". Such a cell is most often a feature, the file holding its labels in
// the other column; a program can add to the note how its user reads that column instead.
std::string CsvLabelColumnNote(CsvLabelColumn column);

// A parsed spec: the format's name and its paths, in the order of its syntax.
struct DataFileSpec {
  std::string format;
  std::vector<std::string> paths;
};

// Splits "FORMAT:PATH[,PATH]" and checks the format is known and takes that many paths (paths
// cannot contain commas). Reads no file. Errors: kInvalidArgument with a one-line message.
HostResult<DataFileSpec> ParseDataFileSpec(std::string_view text);

// The syntax of every format, for help texts: "idx:IMAGES[,LABELS], csv:PATH, ...".
std::string DataFileSyntax();

// Loads rows [first_row, first_row + max_rows) of the spec's files: every header is checked,
// every loaded value (finite) and label (in range), features and labels must hold the same
// number of samples, and at least one sample must be loaded. A load that reaches the end of a
// binary file also checks that nothing follows the declared data (and the gzip checksum).
HostResult<LabeledData> LoadDataFile(const DataFileSpec& spec, const DataReadOptions& options);

// Whether this build reads gzip-compressed files (zlib was found for the target).
bool GzipAvailable();

}  // namespace edgesgd::platform
