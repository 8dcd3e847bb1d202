#include "edgesgd/platform/random_bytes.h"

#include <sys/random.h>

#include <cerrno>

namespace edgesgd::platform {

Status FillRandomBytes(std::span<std::byte> out) {
  std::size_t filled = 0;
  while (filled < out.size()) {
    // Requests above 256 bytes may return short (and may be interrupted by a signal): loop.
    const ssize_t got = ::getrandom(out.data() + filled, out.size() - filled, 0);
    if (got > 0) {
      filled += static_cast<std::size_t>(got);
    } else if (got == 0 || errno != EINTR) {
      return Status::Unavailable();
    }
  }
  return Status::Ok();
}

}  // namespace edgesgd::platform
