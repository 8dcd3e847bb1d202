#pragma once

// Log facade: core-adjacent code (platform, transport, examples) logs through these functions;
// the backend decides where lines go (stderr on Linux, semihosting on Cortex-M).

namespace edgesgd::platform {

enum class LogLevel : unsigned char { kDebug, kInfo, kWarning, kError };

// printf-style; one line per call (a newline is added). Does not allocate.
void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Lines below `level` are dropped. Default kInfo.
void SetLogLevel(LogLevel level);

}  // namespace edgesgd::platform
