#include "edgesgd/platform/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace edgesgd::platform {
namespace {
std::atomic<LogLevel> g_min_level{LogLevel::kInfo};

const char* LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_min_level.store(level, std::memory_order_relaxed); }

void Log(LogLevel level, const char* format, ...) {
  if (level < g_min_level.load(std::memory_order_relaxed)) return;
  // Format into one buffer so concurrent lines from several threads do not interleave.
  char line[512];
  int prefix = std::snprintf(line, sizeof(line), "edgesgd %s: ", LevelTag(level));
  if (prefix < 0) prefix = 0;
  va_list args;
  va_start(args, format);
  std::vsnprintf(line + prefix, sizeof(line) - static_cast<std::size_t>(prefix), format, args);
  va_end(args);
  std::fprintf(stderr, "%s\n", line);
}

}  // namespace edgesgd::platform
