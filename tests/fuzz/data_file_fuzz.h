#pragma once

// What the data-file reader targets share: in-memory files the readers open by path like any
// other, the invariants every load keeps, and the harness of each input layout. Header-only, no
// GoogleTest.
//
// Invariants, for a spec loaded whole and then as rows [first_row, first_row + max_rows):
//   - loading is deterministic: the same files give the same outcome and data;
//   - a failure has a one-line message that names one of the spec's files;
//   - a success holds num_samples >= 1 rows of feature_dim >= 1 finite features and one label
//     each, below num_classes (at most 256), and is a valid DatasetView;
//   - when the whole load succeeds, the row range loads too (with the whole load's classes) and
//     equals those rows of it, or is refused as out of range when it starts past the end.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/platform/data_file.h"
#include "fuzz/fuzz_input.h"
#include "platform/data_file_writers.h"

namespace edgesgd::fuzz {

// A memfd, reached by the readers through /proc/self/fd like a regular file.
class MemoryFile {
 public:
  MemoryFile() : descriptor_(memfd_create("edgesgd-fuzz", MFD_CLOEXEC)) {
    EDGESGD_FUZZ_CHECK(descriptor_ >= 0, "the harness creates its in-memory files");
    path_ = "/proc/self/fd/" + std::to_string(descriptor_);
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  ~MemoryFile() { ::close(descriptor_); }

  // Replaces the contents with `bytes`, gzip-wrapped first when `gzip`; returns the path.
  const std::string& Hold(std::span<const std::byte> bytes, bool gzip) {
    data_files::Bytes content(reinterpret_cast<const unsigned char*>(bytes.data()),
                              reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size());
    if (gzip) content = data_files::Gzip(content);
    const bool written = ::ftruncate(descriptor_, 0) == 0 &&
                         ::pwrite(descriptor_, content.data(), content.size(), 0) ==
                             static_cast<ssize_t>(content.size());
    EDGESGD_FUZZ_CHECK(written, "the harness writes its in-memory files");
    return path_;
  }

 private:
  int descriptor_;
  std::string path_;
};

inline bool SameLoad(const HostResult<platform::LabeledData>& a,
                     const HostResult<platform::LabeledData>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok()) return a.status() == b.status() && a.message() == b.message();
  return a->features == b->features && a->feature_bytes == b->feature_bytes &&
         a->labels == b->labels && a->num_samples == b->num_samples &&
         a->feature_dim == b->feature_dim && a->num_classes == b->num_classes;
}

inline void CheckOutcome(const HostResult<platform::LabeledData>& load,
                         const platform::DataFileSpec& spec) {
  if (!load.ok()) {
    EDGESGD_FUZZ_CHECK(!load.message().empty() && load.message().find('\n') == std::string::npos,
                       "a failure is explained in one line");
    const bool names_a_file = std::any_of(
        spec.paths.begin(), spec.paths.end(),
        [&](const std::string& path) { return load.message().find(path) != std::string::npos; });
    EDGESGD_FUZZ_CHECK(names_a_file, "a failure names the file");
    return;
  }
  const platform::LabeledData& data = load.value();
  EDGESGD_FUZZ_CHECK(data.num_samples >= 1 && data.feature_dim >= 1,
                     "a load holds at least one sample of at least one feature");
  // Unsigned bytes stay bytes; every other type becomes floats.
  const std::size_t values = data.num_samples * data.feature_dim;
  EDGESGD_FUZZ_CHECK((data.features.size() == values && data.feature_bytes.empty()) ||
                         (data.feature_bytes.size() == values && data.features.empty()),
                     "features (floats or bytes, not both) hold num_samples rows");
  EDGESGD_FUZZ_CHECK(data.labels.size() == data.num_samples, "labels hold num_samples rows");
  EDGESGD_FUZZ_CHECK(data.num_classes >= 1 && data.num_classes <= platform::kMaxDataClasses,
                     "num_classes is within what byte labels hold");
  EDGESGD_FUZZ_CHECK(std::all_of(data.features.begin(), data.features.end(),
                                 [](float value) { return std::isfinite(value); }),
                     "every feature is finite");
  EDGESGD_FUZZ_CHECK(ValidateDataset(data.View()).ok(), "a load is a valid dataset");
}

// Loads `spec` whole (twice) and as rows [first_row, first_row + max_rows), checking the
// invariants above.
inline void CheckReader(const platform::DataFileSpec& spec, std::size_t first_row,
                        std::size_t max_rows) {
  const HostResult<platform::LabeledData> whole = platform::LoadDataFile(spec, {});
  CheckOutcome(whole, spec);
  EDGESGD_FUZZ_CHECK(SameLoad(whole, platform::LoadDataFile(spec, {})), "loading is deterministic");

  platform::DataReadOptions options;
  options.first_row = first_row;
  options.max_rows = max_rows;
  options.classes = whole.ok() ? whole->num_classes : 0;
  const HostResult<platform::LabeledData> rows = platform::LoadDataFile(spec, options);
  CheckOutcome(rows, spec);
  if (!whole.ok()) return;
  const platform::LabeledData& all = whole.value();
  if (first_row >= all.num_samples) {
    EDGESGD_FUZZ_CHECK(rows.status() == Status::OutOfRange(),
                       "rows past the end are refused as out of range");
    return;
  }
  EDGESGD_FUZZ_CHECK(rows.ok(), "the rows of a file that loads whole load too");
  const std::size_t count =
      std::min(all.num_samples - first_row, max_rows == 0 ? all.num_samples : max_rows);
  const std::size_t dim = all.feature_dim;
  // Row `row` of a load, floats and bytes alike, against row `whole_row` of the whole load.
  const auto same_row = [&](const platform::LabeledData& part, std::size_t row,
                            std::size_t whole_row) {
    const auto slice = [dim](const auto& values, std::size_t at) {
      return std::span(values).subspan(std::min(values.size(), at * dim),
                                       values.empty() ? 0 : dim);
    };
    const auto equal = [](auto a, auto b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); };
    return equal(slice(part.features, row), slice(all.features, whole_row)) &&
           equal(slice(part.feature_bytes, row), slice(all.feature_bytes, whole_row)) &&
           part.labels[row] == all.labels[whole_row];
  };
  bool same = rows->num_samples == count && rows->feature_dim == dim &&
              rows->num_classes == all.num_classes;
  for (std::size_t i = 0; same && i < count; ++i) same = same_row(rows.value(), i, first_row + i);
  EDGESGD_FUZZ_CHECK(same, "a row range is those rows of the whole load");

  // Chosen rows (every other one of the range, as a worker's shard) and labels alone.
  std::vector<std::uint32_t> chosen;
  for (std::size_t i = 0; i < count; i += 2) chosen.push_back(static_cast<std::uint32_t>(i));
  options.rows = chosen;
  const HostResult<platform::LabeledData> picked = platform::LoadDataFile(spec, options);
  EDGESGD_FUZZ_CHECK(picked.ok() && picked->num_samples == chosen.size(),
                     "the chosen rows of a file that loads whole load too");
  for (std::size_t i = 0; same && i < chosen.size(); ++i) {
    same = same_row(picked.value(), i, first_row + chosen[i]);
  }
  EDGESGD_FUZZ_CHECK(same, "chosen rows are those rows of the whole load");
  platform::DataReadOptions labels_only;
  labels_only.labels_only = true;
  const HostResult<platform::LabeledData> labels = platform::LoadDataFile(spec, labels_only);
  EDGESGD_FUZZ_CHECK(labels.ok() && labels->labels == all.labels && labels->feature_dim == dim,
                     "labels alone are the whole load's labels");
}

// The harness of a one-file format. Input: u8 flags (bit 0: the harness gzips the file), u8 first
// row, u8 row count (0: all), the file's bytes (the rest).
inline void FuzzOneFile(const char* format, const std::uint8_t* data, std::size_t size) {
  static MemoryFile file;
  FuzzInput in(data, size);
  const std::uint8_t flags = in.U8();
  const std::size_t first_row = in.U8();
  const std::size_t max_rows = in.U8();
  const platform::DataFileSpec spec{format, {file.Hold(in.Rest(), (flags & 1) != 0)}};
  CheckReader(spec, first_row, max_rows);
}

// The harness of a features-and-labels format. Input: u8 flags (bit 0: the harness gzips the
// features file, bit 1: the labels file), u16 length of the features file, u8 first row, u8 row
// count (0: all), the features file's bytes, the labels file's bytes (the rest).
inline void FuzzFilePair(const char* format, const std::uint8_t* data, std::size_t size) {
  static MemoryFile features;
  static MemoryFile labels;
  FuzzInput in(data, size);
  const std::uint8_t flags = in.U8();
  const std::uint16_t features_size = in.U16();
  const std::size_t first_row = in.U8();
  const std::size_t max_rows = in.U8();
  const std::string& features_path = features.Hold(in.Bytes(features_size), (flags & 1) != 0);
  const std::string& labels_path = labels.Hold(in.Rest(), (flags & 2) != 0);
  CheckReader({format, {features_path, labels_path}}, first_row, max_rows);
}

}  // namespace edgesgd::fuzz
