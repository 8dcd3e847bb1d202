#pragma once

// The example's data: a labelled table of numbers, written to and read from a CSV file. The
// file has a header line, then one row per sample: the class label (an integer from 0), then the
// feature columns, or the features first and the label last. edgesgd never sees this code; each
// worker reads its own rows.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/platform/result.h"

namespace custom_model {

// Samples in rows: `features` holds rows() x feature_count floats, row after row.
struct Dataset {
  std::size_t feature_count = 0;
  std::vector<float> features;
  std::vector<std::uint32_t> labels;

  std::size_t rows() const { return labels.size(); }
  std::span<const float> row(std::size_t index) const {
    return std::span<const float>(features).subspan(index * feature_count, feature_count);
  }
  // The largest label plus one.
  std::uint32_t class_count() const;
};

// Rows [begin, end) of `data`, copied.
Dataset Rows(const Dataset& data, std::size_t begin, std::size_t end);

// Writes `rows` samples of "two moons" — two interleaved half circles, one per class, blurred by
// Gaussian noise of standard deviation `noise` — in random order, so any contiguous block of
// rows is a fair sample, each row its label first. No straight line separates the classes: a
// model needs a hidden layer. The same seed writes the same file. The error names the file.
edgesgd::HostResult<> WriteTwoMoonsCsv(const std::string& path, std::size_t rows, float noise,
                                       std::uint64_t seed);

// Reads a CSV laid out as above (any number of feature columns, at least one), its label the
// first field of each row or, with `label_last`, the last. The error says why, as
// "FILE:LINE: reason" for a malformed line.
edgesgd::HostResult<Dataset> ReadCsv(const std::string& path, bool label_last);

}  // namespace custom_model
