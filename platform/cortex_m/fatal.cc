#include "edgesgd/core/check.h"
#include "semihosting.h"

namespace edgesgd {

// Prints with the semihosting primitives only (no formatter, little stack): a failed CHECK may
// come from anywhere, including a nearly exhausted stack. On bare metal EDGESGD_CHECK strips the
// file and message to save flash, leaving the line number.
void PlatformFatal(const char* file, int line, const char* message) {
  using platform::internal::Stream;
  platform::internal::SemihostingWrite(Stream::kStderr, "edgesgd: fatal: ");
  platform::internal::SemihostingWrite(Stream::kStderr,
                                       message != nullptr ? message : "(stripped)");
  platform::internal::SemihostingWrite(Stream::kStderr, " at ");
  platform::internal::SemihostingWrite(Stream::kStderr, file != nullptr ? file : "?");
  platform::internal::SemihostingWrite(Stream::kStderr, ":");
  platform::internal::SemihostingWriteDecimal(Stream::kStderr, line);
  platform::internal::SemihostingWrite(Stream::kStderr, "\n");
  platform::internal::SemihostingExit(platform::internal::kExitFatal);
}

}  // namespace edgesgd
