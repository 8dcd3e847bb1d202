#pragma once

// What the data-file readers share above the file: which rows to load, numbers in a binary
// array's element type turned into features and labels with their checks, and the messages
// those checks give, so that every format reports a problem in the same words.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edgesgd/platform/data_file.h"
#include "input_file.h"

namespace edgesgd::platform::internal {

// 'text', quoted in a message: bytes outside printable ASCII as \xNN, so that text from a file
// keeps the message on one line, and cut after 40 characters ("...").
std::string Quoted(std::string_view text);

// The element type of a binary array.
enum class ElementType : std::uint8_t {
  kUint8,
  kInt8,
  kUint16,
  kInt16,
  kUint32,
  kInt32,
  kUint64,
  kInt64,
  kFloat32,
  kFloat64,
};

struct ElementFormat {
  ElementType type = ElementType::kUint8;
  bool big_endian = false;
};

std::size_t ElementBytes(ElementType type);

// Rows [first, first + count) of a file.
struct RowRange {
  std::size_t first = 0;
  std::size_t count = 0;
};

// The rows `options` asks for among a file's `rows`: kOutOfRange when none (an empty file, or a
// first row at or past its end) or when a row of options.rows lies past them.
HostResult<> ResolveRows(const DataReadOptions& options, std::size_t rows, const std::string& path,
                         RowRange& range);

// a * b, or nothing when it does not fit in a size_t.
std::optional<std::size_t> CheckedProduct(std::size_t a, std::size_t b);

// Reads exactly out.size() header bytes, the part of a header that starts `offset` bytes into
// it: a short file is "truncated: PATH ends after N of M header bytes", counted from the start.
HostResult<> ReadHeader(InputFile& file, std::span<std::byte> out, std::size_t offset = 0);

// One array of a binary file, from the reader's position on: `rows` rows of `row_values`
// elements of `format`; `what` names its contents in messages ("pixels", "labels").
struct BinaryArray {
  ElementFormat format;
  std::size_t rows = 0;
  std::size_t row_values = 0;
  const char* what = "values";
};

// Whether the array's byte size fits in a size_t (check before reading it).
bool FitsInMemoryRange(const BinaryArray& array);

// Loads the samples `options` asks for from a features array and a labels array whose headers
// `features` and `labels` have just read past, the tail every binary format shares: their
// lengths must match, every label kept is checked against options.classes, every float feature
// kept for finiteness; unsigned-byte features stay bytes. Leaves num_classes to LoadDataFile.
HostResult<LabeledData> ReadSamples(InputFile& features, const BinaryArray& values,
                                    InputFile& labels, const BinaryArray& classes,
                                    const DataReadOptions& options);

// "corrupt: label VALUE of sample SAMPLE in PATH is outside 0-(CLASSES - 1)" (classes 0: 256).
HostError LabelOutOfRange(const std::string& value, std::size_t sample, const std::string& path,
                          std::size_t classes);

// "corrupt: value VALUE of sample SAMPLE in PATH is not finite".
HostError NotFinite(const std::string& value, std::size_t sample, const std::string& path);

// "shape mismatch: FEATURES holds N samples but LABELS holds M labels".
HostError SampleCountMismatch(const std::string& features_path, std::size_t samples,
                              const std::string& labels_path, std::size_t labels);

}  // namespace edgesgd::platform::internal
