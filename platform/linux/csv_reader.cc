// csv:PATH — one sample per line, comma-separated: the label (a whole number) first, then the
// features, as the MNIST CSV files have them, or the features then the label when
// DataReadOptions::csv_label says it is last. The first line is a header, and skipped, when its
// first cell is not a number; every line has the first line's number of cells. Cells are
// numbers in C syntax (no quotes); spaces around a cell, blank lines, '\r' line ends and a UTF-8
// byte-order mark are allowed.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "data_readers.h"
#include "sample_rows.h"

namespace edgesgd::platform::internal {
namespace {

constexpr std::size_t kReadBytes = 1 << 16;
constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

std::string_view Trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// std::from_chars over the whole cell (a leading '+' allowed): "1.5x" is not a number. A value
// beyond the type's range is still a number: strtof/strtod round it to infinity (reported as
// not finite) or, when it is tiny, to zero or a denormal, which from_chars does not.
template <typename T>
bool ParseNumber(std::string_view text, T& value) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || stop != end) return false;
  if (error == std::errc::result_out_of_range) {
    const std::string copy(text);
    if constexpr (std::is_same_v<T, float>) {
      value = std::strtof(copy.c_str(), nullptr);
    } else {
      value = std::strtod(copy.c_str(), nullptr);
    }
    return true;
  }
  return error == std::errc();
}

class CsvParser {
 public:
  CsvParser(const std::string& path, const DataReadOptions& options, LabeledData& data)
      : path_(path), options_(options), data_(data) {}

  // One line (without its '\n'). Sets `done` once the rows asked for are loaded.
  HostResult<> Line(std::string_view line, bool& done) {
    ++line_number_;
    if (line_number_ == 1 && line.starts_with(kByteOrderMark)) {
      line.remove_prefix(kByteOrderMark.size());
    }
    if (Trim(line).empty()) return {};
    cells_.clear();
    for (std::size_t start = 0;;) {
      const std::size_t comma = line.find(',', start);
      cells_.push_back(Trim(line.substr(start, comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (columns_ == 0) {
      columns_ = cells_.size();
      if (columns_ < 2) {
        return Corrupt("", "a label and at least one feature are needed, found 1 cell");
      }
      double unused = 0;
      if (!ParseNumber(cells_[0], unused)) return {};  // a header
    }
    if (cells_.size() != columns_) {
      return Corrupt(
          "", std::to_string(cells_.size()) + " cells, expected " + std::to_string(columns_));
    }
    const std::size_t sample = rows_++;
    if (sample < options_.first_row) return {};
    const std::size_t row = sample - options_.first_row;
    done = options_.max_rows != 0 && row + 1 == options_.max_rows;
    const std::span<const std::uint32_t> kept = options_.rows;
    if (!kept.empty()) {
      if (kept[data_.num_samples] != row) return {};
      done = done || data_.num_samples + 1 == kept.size();
    }
    const std::size_t label_column =
        options_.csv_label == CsvLabelColumn::kFirst ? 0 : columns_ - 1;
    if (HostResult<> label = Label(label_column, sample); !label.ok()) return label;
    for (std::size_t column = 0; column < columns_ && !options_.labels_only; ++column) {
      if (column == label_column) continue;
      float value = 0;
      if (!ParseNumber(cells_[column], value)) return NotANumber(column);
      if (!std::isfinite(value)) return NotFinite(std::string(cells_[column]), sample, path_);
      data_.features.push_back(value);
    }
    ++data_.num_samples;
    return {};
  }

  // After the last line: the feature count, or why not every row asked for was loaded.
  HostResult<> Finish() {
    if (data_.num_samples == 0 || data_.num_samples < options_.rows.size()) {
      RowRange unused;
      return ResolveRows(options_, rows_, path_, unused);
    }
    data_.feature_dim = columns_ - 1;
    return {};
  }

 private:
  HostResult<> Label(std::size_t column, std::size_t sample) {
    const std::string_view cell = cells_[column];
    double label = 0;
    if (!ParseNumber(cell, label)) return NotANumber(column);
    if (label != std::floor(label)) {
      return Corrupt("", "label " + std::string(cell) + " is not a whole number " +
                             CsvLabelColumnNote(options_.csv_label));
    }
    const std::size_t limit = options_.classes == 0 ? kMaxDataClasses : options_.classes;
    if (label < 0 || label >= static_cast<double>(limit)) {
      return LabelOutOfRange(std::string(cell), sample, path_, options_.classes);
    }
    data_.labels.push_back(static_cast<std::uint8_t>(label));
    return {};
  }

  HostError NotANumber(std::size_t column) const {
    const std::string where = ", column " + std::to_string(column + 1);
    if (cells_[column].empty()) return Corrupt(where + " is empty", "");
    return Corrupt(where, Quoted(cells_[column]) + " is not a number");
  }

  // "corrupt: PATH line N`where`: `what`" (or without ": " when `what` is empty).
  HostError Corrupt(const std::string& where, const std::string& what) const {
    std::string message = "corrupt: " + path_ + " line " + std::to_string(line_number_) + where;
    if (!what.empty()) message += ": " + what;
    return HostError(Status::DataLoss(), std::move(message));
  }

  const std::string& path_;
  const DataReadOptions& options_;
  LabeledData& data_;
  std::vector<std::string_view> cells_;
  std::size_t line_number_ = 0;
  std::size_t columns_ = 0;  // 0 until the first line
  std::size_t rows_ = 0;     // data lines seen
};

}  // namespace

HostResult<LabeledData> ReadCsv(std::span<const std::string> paths,
                                const DataReadOptions& options) {
  InputFile file;
  if (HostResult<> open = file.Open(paths[0]); !open.ok()) return std::move(open).error();
  LabeledData data;
  CsvParser parser(file.path(), options, data);
  std::string pending;  // the start of a line the last read cut
  const auto chunk = std::make_unique_for_overwrite<std::byte[]>(kReadBytes);
  bool done = false;
  for (bool end = false; !end && !done;) {
    std::size_t got = 0;
    if (HostResult<> read = file.Read(std::span(chunk.get(), kReadBytes), got); !read.ok()) {
      return std::move(read).error();
    }
    end = got < kReadBytes;
    pending.append(reinterpret_cast<const char*>(chunk.get()), got);
    std::size_t start = 0;
    while (!done) {
      const std::size_t newline = pending.find('\n', start);
      if (newline == std::string::npos) break;
      const std::string_view line(pending.data() + start, newline - start);
      if (HostResult<> parsed = parser.Line(line, done); !parsed.ok()) {
        return std::move(parsed).error();
      }
      start = newline + 1;
    }
    pending.erase(0, start);
  }
  if (!done && !pending.empty()) {
    if (HostResult<> parsed = parser.Line(pending, done); !parsed.ok()) {
      return std::move(parsed).error();
    }
  }
  if (HostResult<> finished = parser.Finish(); !finished.ok()) return std::move(finished).error();
  return data;
}

}  // namespace edgesgd::platform::internal

namespace edgesgd::platform {

std::string CsvLabelColumnNote(CsvLabelColumn column) {
  return std::string("(the label is read from the ") +
         (column == CsvLabelColumn::kFirst ? "first" : "last") + " column)";
}

}  // namespace edgesgd::platform
