#pragma once

// The metrics CSV, summary JSON and progress line shared by `simulate`, `server` and the
// experiment scripts. The CSV header is a contract (docs/cli.md, the metrics CSV):
//   round,time_s,loss,accuracy,dist_to_opt,consensus,bytes_up,bytes_down,bits_per_coord,epsilon
// Cells that do not apply are empty; numbers print with enough digits to round-trip.

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "edgesgd/platform/result.h"

namespace edgesgd::cli {

inline constexpr double kNotApplicable = std::numeric_limits<double>::quiet_NaN();

struct MetricsRow {
  std::uint32_t round = 0;
  double time_s = 0;
  double loss = kNotApplicable;
  double accuracy = kNotApplicable;
  double dist_to_opt = kNotApplicable;  // log10 ||x - x*||^2
  double consensus = kNotApplicable;    // mean_i ||x_i - mean x||^2 (gossip)
  std::uint64_t bytes_up = 0;           // cumulative
  std::uint64_t bytes_down = 0;         // cumulative
  double bits_per_coord = kNotApplicable;
  double epsilon = kNotApplicable;  // differential privacy spent so far, at the run's delta
};

inline constexpr const char* kMetricsHeader =
    "round,time_s,loss,accuracy,dist_to_opt,consensus,bytes_up,bytes_down,bits_per_coord,"
    "epsilon";

class MetricsWriter {
 public:
  ~MetricsWriter();
  // Creates/truncates `path` and writes the header. Errors: a one-line message naming the file.
  HostResult<> Open(const std::string& path);
  // Appends one row (no-op when not open).
  void Write(const MetricsRow& row);
  // Flushes and closes. Errors: the file could not be written completely.
  HostResult<> Close();

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

// A small JSON object writer (flat fields and one level of nested objects).
class SummaryWriter {
 public:
  void Field(const char* name, const std::string& value);
  void Field(const char* name, const char* value) { Field(name, std::string(value)); }
  void Field(const char* name, double value);
  void Field(const char* name, std::uint64_t value);
  void Field(const char* name, std::uint32_t value) { Field(name, std::uint64_t{value}); }
  void Field(const char* name, int value) { Field(name, static_cast<std::uint64_t>(value)); }
  void Field(const char* name, bool value);  // true / false
  void Begin(const char* name);
  void End();
  // The row as a nested object `name`.
  void Row(const char* name, const MetricsRow& row);
  std::string Text() const;
  // Writes Text() to `path`. Errors: a one-line message naming the file.
  HostResult<> Save(const std::string& path) const;

 private:
  void Key(const char* name);
  std::string body_;
  bool first_ = true;
};

// "83.21%" or "n/a".
std::string FormatAccuracy(double accuracy);

// Progress on stderr: a live line on a terminal, a line every ~10% otherwise.
class ProgressLine {
 public:
  ProgressLine(bool quiet, bool terminal, std::uint32_t total_rounds);
  void Update(const MetricsRow& row);
  // A message on its own line (the live line is redrawn after it).
  void Note(const char* format, ...) __attribute__((format(printf, 2, 3)));
  void Finish();

 private:
  bool quiet_;
  bool terminal_;
  std::uint32_t total_;
  std::uint32_t next_report_ = 0;
  bool line_open_ = false;
  double last_loss_ = kNotApplicable;
  double last_accuracy_ = kNotApplicable;
};

}  // namespace edgesgd::cli
