#include "sample_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>

namespace edgesgd::platform::internal {
namespace {

// Bytes converted per read: bounds the staging buffer whatever the array's size (a multiple of
// every element's size, so a chunk never splits an element).
constexpr std::size_t kChunkBytes = 1 << 16;

std::uint64_t LoadBits(const std::byte* bytes, std::size_t size, bool big_endian) {
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < size; ++i) {
    const std::size_t shift = 8 * (big_endian ? size - 1 - i : i);
    bits |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[i])} << shift;
  }
  return bits;
}

bool IsSigned(ElementType type) {
  return type == ElementType::kInt8 || type == ElementType::kInt16 || type == ElementType::kInt32 ||
         type == ElementType::kInt64;
}

// An integer element, sign-extended when its type is signed.
std::int64_t SignExtend(std::uint64_t bits, std::size_t bytes) {
  const unsigned unused = static_cast<unsigned>(64 - 8 * bytes);
  return static_cast<std::int64_t>(bits << unused) >> unused;
}

std::string FormatDouble(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// Reads rows `range` of `array` chunk by chunk, handing the elements of the rows kept (`rows`,
// numbered from range.first; all when empty) to `convert(bytes, count, first_element)` (element
// indices count from the array's start), then checks the file ends there if the range reaches
// the array's end.
template <typename Convert>
HostResult<> ReadRows(InputFile& file, const BinaryArray& array, RowRange range,
                      std::span<const std::uint32_t> rows, Convert convert) {
  const std::size_t element_bytes = ElementBytes(array.format.type);
  const std::size_t row_bytes = array.row_values * element_bytes;
  const std::size_t total = array.rows * row_bytes;  // FitsInMemoryRange was checked
  std::size_t skipped = 0;
  if (HostResult<> skip = file.Skip(range.first * row_bytes, skipped); !skip.ok()) return skip;
  if (skipped < range.first * row_bytes) return file.Truncated(array.what, total, skipped);

  const std::size_t wanted = range.count * row_bytes;
  const std::size_t chunk_bytes = std::min(wanted, kChunkBytes);
  const auto chunk = std::make_unique_for_overwrite<std::byte[]>(chunk_bytes);
  std::size_t element = range.first * array.row_values;
  std::size_t next_kept = 0;  // into `rows`
  for (std::size_t done = 0; done < wanted;) {
    const std::size_t bytes = std::min(chunk_bytes, wanted - done);
    std::size_t got = 0;
    if (HostResult<> read = file.Read(std::span(chunk.get(), bytes), got); !read.ok()) return read;
    if (got < bytes) return file.Truncated(array.what, total, skipped + done + got);
    const std::size_t count = bytes / element_bytes;
    if (rows.empty()) {
      if (HostResult<> converted = convert(chunk.get(), count, element); !converted.ok()) {
        return converted;
      }
    }
    // The parts of kept rows inside this chunk; a row may continue into the next one.
    const std::size_t chunk_end = element + count;
    while (next_kept < rows.size()) {
      const std::size_t row_begin = (range.first + rows[next_kept]) * array.row_values;
      const std::size_t row_end = row_begin + array.row_values;
      if (row_begin >= chunk_end) break;
      const std::size_t from = std::max(row_begin, element);
      const std::size_t to = std::min(row_end, chunk_end);
      if (HostResult<> converted =
              convert(chunk.get() + (from - element) * element_bytes, to - from, from);
          !converted.ok()) {
        return converted;
      }
      if (row_end > chunk_end) break;
      ++next_kept;
    }
    element = chunk_end;
    done += bytes;
  }
  if (range.first + range.count < array.rows) return {};
  bool at_end = false;
  if (HostResult<> end = file.AtEnd(at_end); !end.ok()) return end;
  if (!at_end) {
    return HostError(Status::DataLoss(), "corrupt: " + file.path() + " has data after its " +
                                             std::to_string(array.rows) + " declared items");
  }
  return {};
}

// Reads rows `range` (those of `rows` when not empty) of `array` (of unsigned bytes, float32 or
// float64) as features, appended to out.feature_bytes (bytes) or out.features (floats, required
// to be finite). Bytes are read in bounded chunks, so memory grows only with data kept.
HostResult<> ReadFeatureRows(InputFile& file, const BinaryArray& array, RowRange range,
                             std::span<const std::uint32_t> rows, LabeledData& out) {
  const ElementFormat format = array.format;
  const std::size_t element_bytes = ElementBytes(format.type);
  return ReadRows(
      file, array, range, rows,
      [&](const std::byte* bytes, std::size_t count, std::size_t first) -> HostResult<> {
        if (format.type == ElementType::kUint8) {
          const auto* values = reinterpret_cast<const std::uint8_t*>(bytes);
          out.feature_bytes.insert(out.feature_bytes.end(), values, values + count);
          return {};
        }
        for (std::size_t i = 0; i < count; ++i) {
          const std::uint64_t bits =
              LoadBits(bytes + i * element_bytes, element_bytes, format.big_endian);
          const float value = format.type == ElementType::kFloat64
                                  ? static_cast<float>(std::bit_cast<double>(bits))
                                  : std::bit_cast<float>(static_cast<std::uint32_t>(bits));
          if (!std::isfinite(value)) {
            const double read = format.type == ElementType::kFloat64 ? std::bit_cast<double>(bits)
                                                                     : static_cast<double>(value);
            return NotFinite(FormatDouble(read), (first + i) / array.row_values, file.path());
          }
          out.features.push_back(value);
        }
        return {};
      });
}

// As ReadFeatureRows for an array of integer labels (one per row), each required to be below
// `classes` (kMaxDataClasses when 0).
HostResult<> ReadLabelRows(InputFile& file, const BinaryArray& array, RowRange range,
                           std::span<const std::uint32_t> rows, std::size_t classes,
                           std::vector<std::uint8_t>& out) {
  const ElementFormat format = array.format;
  const std::size_t element_bytes = ElementBytes(format.type);
  const std::uint64_t limit = classes == 0 ? kMaxDataClasses : classes;
  return ReadRows(
      file, array, range, rows,
      [&](const std::byte* bytes, std::size_t count, std::size_t first) -> HostResult<> {
        for (std::size_t i = 0; i < count; ++i) {
          const std::uint64_t bits =
              LoadBits(bytes + i * element_bytes, element_bytes, format.big_endian);
          const std::size_t sample = (first + i) / array.row_values;
          if (IsSigned(format.type)) {
            const std::int64_t label = SignExtend(bits, element_bytes);
            if (label < 0 || static_cast<std::uint64_t>(label) >= limit) {
              return LabelOutOfRange(std::to_string(label), sample, file.path(), classes);
            }
          } else if (bits >= limit) {
            return LabelOutOfRange(std::to_string(bits), sample, file.path(), classes);
          }
          out.push_back(static_cast<std::uint8_t>(bits));
        }
        return {};
      });
}

}  // namespace

std::string Quoted(std::string_view text) {
  constexpr std::size_t kShown = 40;
  std::string quoted(1, '\'');
  for (const char c : text.substr(0, kShown)) {
    if (c >= ' ' && c <= '~') {
      quoted += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned char>(c));
      quoted += escaped;
    }
  }
  quoted += '\'';
  if (text.size() > kShown) quoted += "...";
  return quoted;
}

std::size_t ElementBytes(ElementType type) {
  switch (type) {
    case ElementType::kUint8:
    case ElementType::kInt8:
      return 1;
    case ElementType::kUint16:
    case ElementType::kInt16:
      return 2;
    case ElementType::kUint32:
    case ElementType::kInt32:
    case ElementType::kFloat32:
      return 4;
    case ElementType::kUint64:
    case ElementType::kInt64:
    case ElementType::kFloat64:
      return 8;
  }
  return 1;
}

HostResult<> ResolveRows(const DataReadOptions& options, std::size_t rows, const std::string& path,
                         RowRange& range) {
  if (options.first_row >= rows) {
    if (rows == 0) return HostError(Status::OutOfRange(), "no samples in " + path);
    return HostError(Status::OutOfRange(), "no samples in " + path + " from row " +
                                               std::to_string(options.first_row) + ": it holds " +
                                               std::to_string(rows));
  }
  range.first = options.first_row;
  range.count = rows - options.first_row;
  if (options.max_rows != 0) range.count = std::min(range.count, options.max_rows);
  if (!options.rows.empty() && options.rows.back() >= range.count) {
    return HostError(Status::OutOfRange(), "no sample " + std::to_string(options.rows.back()) +
                                               " in " + path + " from row " +
                                               std::to_string(options.first_row) + ": it holds " +
                                               std::to_string(range.count));
  }
  return {};
}

std::optional<std::size_t> CheckedProduct(std::size_t a, std::size_t b) {
  std::size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

HostResult<> ReadHeader(InputFile& file, std::span<std::byte> out, std::size_t offset) {
  std::size_t got = 0;
  if (HostResult<> read = file.Read(out, got); !read.ok()) return read;
  if (got == out.size()) return {};
  return HostError(Status::DataLoss(), "truncated: " + file.path() + " ends after " +
                                           std::to_string(offset + got) + " of " +
                                           std::to_string(offset + out.size()) + " header bytes");
}

bool FitsInMemoryRange(const BinaryArray& array) {
  const std::optional<std::size_t> values = CheckedProduct(array.rows, array.row_values);
  return values.has_value() && CheckedProduct(*values, ElementBytes(array.format.type)).has_value();
}

HostResult<LabeledData> ReadSamples(InputFile& features, const BinaryArray& values,
                                    InputFile& labels, const BinaryArray& classes,
                                    const DataReadOptions& options) {
  if (values.rows != classes.rows) {
    return SampleCountMismatch(features.path(), values.rows, labels.path(), classes.rows);
  }
  RowRange range;
  if (HostResult<> rows = ResolveRows(options, values.rows, features.path(), range); !rows.ok()) {
    return std::move(rows).error();
  }
  LabeledData data;
  if (HostResult<> read =
          ReadLabelRows(labels, classes, range, options.rows, options.classes, data.labels);
      !read.ok()) {
    return std::move(read).error();
  }
  if (!options.labels_only) {
    if (HostResult<> read = ReadFeatureRows(features, values, range, options.rows, data);
        !read.ok()) {
      return std::move(read).error();
    }
  }
  data.num_samples = options.rows.empty() ? range.count : options.rows.size();
  data.feature_dim = values.row_values;
  return data;
}

HostError LabelOutOfRange(const std::string& value, std::size_t sample, const std::string& path,
                          std::size_t classes) {
  const std::size_t limit = classes == 0 ? kMaxDataClasses : classes;
  return HostError(Status::DataLoss(), "corrupt: label " + value + " of sample " +
                                           std::to_string(sample) + " in " + path +
                                           " is outside 0-" + std::to_string(limit - 1));
}

HostError NotFinite(const std::string& value, std::size_t sample, const std::string& path) {
  return HostError(Status::DataLoss(), "corrupt: value " + value + " of sample " +
                                           std::to_string(sample) + " in " + path +
                                           " is not a finite float");
}

HostError SampleCountMismatch(const std::string& features_path, std::size_t samples,
                              const std::string& labels_path, std::size_t labels) {
  return HostError(Status::DataLoss(), "shape mismatch: " + features_path + " holds " +
                                           std::to_string(samples) + " samples but " + labels_path +
                                           " holds " + std::to_string(labels) + " labels");
}

}  // namespace edgesgd::platform::internal
