#pragma once

// Programmer-error checks. A failed CHECK means the program itself is wrong (a broken invariant),
// never that outside data was bad: bad data is a Status. The platform layer defines what a fatal
// error does (print and abort on Linux, semihosting exit on Cortex-M).

namespace edgesgd {

// Defined by the platform backend that is linked into the program. Must not return.
[[noreturn]] void PlatformFatal(const char* file, int line, const char* message);

}  // namespace edgesgd

#if defined(EDGESGD_STRIP_CHECK_MESSAGES)
#define EDGESGD_INTERNAL_FATAL(message) ::edgesgd::PlatformFatal(nullptr, __LINE__, nullptr)
#else
#define EDGESGD_INTERNAL_FATAL(message) ::edgesgd::PlatformFatal(__FILE__, __LINE__, message)
#endif

#define EDGESGD_CHECK(condition)                                  \
  do {                                                            \
    if (!(condition)) {                                           \
      EDGESGD_INTERNAL_FATAL("CHECK failed: " #condition);        \
    }                                                             \
  } while (false)
