#include <cstdio>
#include <cstdlib>

#include "edgesgd/core/check.h"

namespace edgesgd {

void PlatformFatal(const char* file, int line, const char* message) {
  std::fprintf(stderr, "edgesgd: fatal: %s at %s:%d\n", message != nullptr ? message : "(stripped)",
               file != nullptr ? file : "?", line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace edgesgd
