#pragma once

// A small printf-style formatter for the log backend. newlib-nano's vsnprintf would do, but its
// object references malloc/realloc/free (for asprintf), which drags the heap into every image
// that logs; this one never allocates and uses little stack.
//
// Supports %d %i %u %x %X %o %c %s %p %f %F %e %E %g %G %%, the flags - + space 0 #, width and
// precision (digits or *), and the length modifiers hh h l ll z j t L. Floats are for reading in a
// log, not for exact round trips: rounding is half-up on the binary value (%.2f of 2.675 gives
// 2.68, glibc 2.67), %f of values of 1e19 and more prints in %e form, and beyond ~15 significant
// digits the digits may differ from glibc's. %n prints nothing; an unknown conversion is copied.

#include <cstdarg>
#include <cstddef>
#include <span>

namespace edgesgd::platform::internal {

// Formats into `out`, truncating, and NUL-terminates when `out` is not empty. Returns the number
// of characters stored before the NUL. Does not allocate.
std::size_t FormatV(std::span<char> out, const char* format, std::va_list args);

std::size_t Format(std::span<char> out, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

}  // namespace edgesgd::platform::internal
