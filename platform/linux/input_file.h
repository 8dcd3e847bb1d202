#pragma once

// A file read front to back that may be gzip-compressed, below the data-file readers' formats.
// Failures are HostResults whose message names the file.

#include <cstddef>
#include <span>
#include <string>

#include "edgesgd/platform/result.h"

namespace edgesgd::platform::internal {

// A regular file read sequentially; one starting with the gzip magic is inflated as it is read.
// Plain files skip by seeking, gzip files by inflating. Closed on destruction.
class InputFile {
 public:
  InputFile() = default;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  // kNotFound for a missing file, kUnavailable when it cannot be opened or is not a regular
  // file, or is gzip-compressed in a build without zlib.
  HostResult<> Open(const std::string& path);

  // Reads up to out.size() bytes into `out`, fewer only at the end of the data; `got` says how
  // many. Fails (kUnavailable, or kDataLoss for corrupt gzip data) on a read error.
  HostResult<> Read(std::span<std::byte> out, std::size_t& got);

  // Moves `size` bytes on, fewer at the end of the data; `skipped` says how many.
  HostResult<> Skip(std::size_t size, std::size_t& skipped);

  // Whether the data ends here; for a gzip file, reading to the end also checks its CRC.
  HostResult<> AtEnd(bool& at_end);

  // "truncated: expected EXPECTED bytes of WHAT in PATH, got GOT", with zlib's note when the
  // compressed stream itself was cut short.
  HostError Truncated(const char* what, std::size_t expected, std::size_t got) const;

  const std::string& path() const { return path_; }

 private:
  HostResult<> ReadPlain(std::span<std::byte> out, std::size_t& got);
  HostResult<> ReadGzip(std::span<std::byte> out, std::size_t& got);

  std::string path_;
  int descriptor_ = -1;
  void* gzip_ = nullptr;  // zlib's gzFile, when the file is compressed
  std::size_t size_ = 0;  // plain files: the file's size and the read position
  std::size_t position_ = 0;
  std::string end_note_;  // zlib's text when the compressed stream ended early
};

}  // namespace edgesgd::platform::internal
