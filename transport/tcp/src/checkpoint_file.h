#pragma once

// The files behind a server's checkpoints: written so that a crash at any moment leaves either
// the old file or the new one, and read back whole.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "edgesgd/platform/result.h"

namespace edgesgd::tcp::internal {

// Writes `bytes` to `path` through a temporary file in the same directory (PATH.tmp.XXXXXX,
// created exclusively with mode 0600): write, fsync, rename over `path`, fsync the directory.
// On any failure the temporary file is removed and `path` is left as it was (or, when only the
// directory's fsync failed, holds the new contents without the guarantee that they survive a
// crash). Errors: kUnavailable, the message naming the file and the system's error.
HostResult<> WriteFileAtomically(const std::string& path, std::span<const std::byte> bytes);

// The whole file at `path`. Errors: kUnavailable, the message naming the file and the system's
// error.
HostResult<std::vector<std::byte>> ReadWholeFile(const std::string& path);

}  // namespace edgesgd::tcp::internal
