#include "cli/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace edgesgd::cli {
namespace {

// Shortest text that reads back as the same double; empty for NaN.
std::string Number(double value) {
  if (std::isnan(value)) return "";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  return Number(value);
}

std::string JsonString(const std::string& value) {
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') quoted += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

HostResult<> MetricsWriter::Open(const std::string& path) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    return HostError(Status::Unavailable(),
                     "cannot write metrics file " + path + ": " + std::strerror(errno));
  }
  path_ = path;
  std::fprintf(file_, "%s\n", kMetricsHeader);
  return {};
}

void MetricsWriter::Write(const MetricsRow& row) {
  if (file_ == nullptr) return;
  std::fprintf(file_, "%u,%s,%s,%s,%s,%s,%llu,%llu,%s,%s\n", row.round,
               Number(row.time_s).c_str(), Number(row.loss).c_str(), Number(row.accuracy).c_str(),
               Number(row.dist_to_opt).c_str(), Number(row.consensus).c_str(),
               static_cast<unsigned long long>(row.bytes_up),
               static_cast<unsigned long long>(row.bytes_down), Number(row.bits_per_coord).c_str(),
               Number(row.epsilon).c_str());
  // One row per round is rare enough to flush each: a live run (a TCP server) can be followed
  // with tail -f, and a killed one leaves every row it completed.
  std::fflush(file_);
}

HostResult<> MetricsWriter::Close() {
  if (file_ == nullptr) return {};
  const bool failed = std::ferror(file_) != 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed || !closed) {
    return HostError(Status::Unavailable(),
                     "writing metrics file " + path_ + " failed (disk full?)");
  }
  return {};
}

void SummaryWriter::Key(const char* name) {
  if (!first_) body_ += ",";
  body_ += "\n  " + JsonString(name) + ": ";
  first_ = false;
}

void SummaryWriter::Field(const char* name, const std::string& value) {
  Key(name);
  body_ += JsonString(value);
}

void SummaryWriter::Field(const char* name, double value) {
  Key(name);
  body_ += JsonNumber(value);
}

void SummaryWriter::Field(const char* name, std::uint64_t value) {
  Key(name);
  body_ += std::to_string(value);
}

void SummaryWriter::Field(const char* name, bool value) {
  Key(name);
  body_ += value ? "true" : "false";
}

void SummaryWriter::Begin(const char* name) {
  Key(name);
  body_ += "{";
  first_ = true;
}

void SummaryWriter::End() {
  body_ += "}";
  first_ = false;
}

void SummaryWriter::Row(const char* name, const MetricsRow& row) {
  Begin(name);
  Field("round", row.round);
  Field("time_s", row.time_s);
  Field("loss", row.loss);
  Field("accuracy", row.accuracy);
  Field("dist_to_opt", row.dist_to_opt);
  Field("consensus", row.consensus);
  Field("bytes_up", row.bytes_up);
  Field("bytes_down", row.bytes_down);
  Field("bits_per_coord", row.bits_per_coord);
  Field("epsilon", row.epsilon);
  End();
}

std::string SummaryWriter::Text() const { return "{" + body_ + "\n}\n"; }

HostResult<> SummaryWriter::Save(const std::string& path) const {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return HostError(Status::Unavailable(),
                     "cannot write summary file " + path + ": " + std::strerror(errno));
  }
  const std::string text = Text();
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !written) {
    return HostError(Status::Unavailable(),
                     "writing summary file " + path + " failed (disk full?)");
  }
  return {};
}

std::string FormatAccuracy(double accuracy) {
  if (std::isnan(accuracy)) return "n/a";
  char text[16];
  std::snprintf(text, sizeof(text), "%.2f%%", 100.0 * accuracy);
  return text;
}

ProgressLine::ProgressLine(bool quiet, bool terminal, std::uint32_t total_rounds)
    : quiet_(quiet), terminal_(terminal), total_(total_rounds) {}

void ProgressLine::Update(const MetricsRow& row) {
  if (!std::isnan(row.loss)) last_loss_ = row.loss;
  if (!std::isnan(row.accuracy)) last_accuracy_ = row.accuracy;
  if (quiet_) return;
  if (terminal_) {
    std::fprintf(stderr, "\rround %u/%u  t=%.1fs  loss %s  acc %s  up %llu B   ", row.round,
                 total_, row.time_s, Number(last_loss_).c_str(),
                 FormatAccuracy(last_accuracy_).c_str(),
                 static_cast<unsigned long long>(row.bytes_up));
    line_open_ = true;
    return;
  }
  if (row.round >= next_report_ || row.round == total_) {
    std::fprintf(stderr, "round %u/%u  t=%.1fs  loss %s  acc %s  up %llu B\n", row.round, total_,
                 row.time_s, Number(last_loss_).c_str(), FormatAccuracy(last_accuracy_).c_str(),
                 static_cast<unsigned long long>(row.bytes_up));
    next_report_ = row.round + (total_ >= 10 ? total_ / 10 : 1);
  }
}

void ProgressLine::Note(const char* format, ...) {
  if (quiet_) return;
  if (line_open_) {
    std::fprintf(stderr, "\n");
    line_open_ = false;
  }
  std::fprintf(stderr, "edgesgd: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
}

void ProgressLine::Finish() {
  if (line_open_) std::fprintf(stderr, "\n");
  line_open_ = false;
}

}  // namespace edgesgd::cli
