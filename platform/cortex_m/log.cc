#include "edgesgd/platform/log.h"

#include <cstdarg>
#include <cstddef>
#include <string_view>

#include "format.h"
#include "semihosting.h"

namespace edgesgd::platform {
namespace {

// One byte, written and read whole: safe to share with interrupt handlers without an atomic
// (and std::atomic of wider types does not link on this target).
LogLevel g_min_level = LogLevel::kInfo;

const char* LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

// Longest line, including the prefix and newline; longer lines are cut. Kept small because it
// lives on the caller's stack, which is a few KiB on a microcontroller.
constexpr std::size_t kLineCapacity = 200;

}  // namespace

void SetLogLevel(LogLevel level) { g_min_level = level; }

void Log(LogLevel level, const char* format, ...) {
  if (level < g_min_level) return;
  char line[kLineCapacity];
  // Room for the newline is kept back, so a cut line still ends one.
  const std::span<char> text(line, sizeof(line) - 1);
  std::size_t length = internal::Format(text, "edgesgd %s: ", LevelTag(level));
  va_list args;
  va_start(args, format);
  length += internal::FormatV(text.subspan(length), format, args);
  va_end(args);
  line[length++] = '\n';
  // One write per line: semihosting calls stop the emulated core, so fewer is faster.
  internal::SemihostingWrite(internal::Stream::kStdout, std::string_view(line, length));
}

}  // namespace edgesgd::platform
