#include "input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

// Defined to 1 by platform/CMakeLists.txt when zlib exists for the target (cross builds may
// lack it; gzip files are then refused with kUnavailable, plain ones still read).
#ifndef EDGESGD_HAVE_ZLIB
#define EDGESGD_HAVE_ZLIB 0
#endif
#if EDGESGD_HAVE_ZLIB
#include <zlib.h>
#endif

namespace edgesgd::platform::internal {
namespace {

constexpr std::array<unsigned char, 2> kGzipMagic = {0x1f, 0x8b};

HostError ErrnoFailure(const char* doing, const std::string& path, int error) {
  return HostError(Status::Unavailable(), std::string(doing) + path + ": " + std::strerror(error));
}

}  // namespace

InputFile::~InputFile() {
#if EDGESGD_HAVE_ZLIB
  if (gzip_ != nullptr) {
    gzclose(static_cast<gzFile>(gzip_));  // closes the descriptor too
    return;
  }
#endif
  if (descriptor_ >= 0) ::close(descriptor_);
}

HostResult<> InputFile::Open(const std::string& path) {
  path_ = path;
  descriptor_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor_ < 0) {
    const int error = errno;
    if (error == ENOENT) {
      return HostError(Status::NotFound(), "missing file " + path + ": " + std::strerror(error));
    }
    return ErrnoFailure("cannot open ", path, error);
  }
  struct stat info {};
  if (::fstat(descriptor_, &info) != 0) return ErrnoFailure("cannot read ", path, errno);
  if (!S_ISREG(info.st_mode)) {
    return HostError(Status::Unavailable(), "cannot read " + path + ": not a regular file");
  }
  size_ = static_cast<std::size_t>(info.st_size);
  std::array<unsigned char, 2> magic{};
  const ssize_t peeked = ::pread(descriptor_, magic.data(), magic.size(), 0);
  if (peeked < 0) return ErrnoFailure("cannot read ", path, errno);
  if (peeked != static_cast<ssize_t>(magic.size()) || magic != kGzipMagic) return {};
#if EDGESGD_HAVE_ZLIB
  gzFile gzip = gzdopen(descriptor_, "rb");
  if (gzip == nullptr) {
    return HostError(Status::Unavailable(), "cannot open " + path + ": zlib could not attach");
  }
  gzip_ = gzip;
  // 32 KiB in (and zlib's 64 KiB out) inflates as fast as larger buffers, and stays clear of
  // allocators' large-block path (a sanitizer's mmap per file).
  gzbuffer(gzip, 1u << 15);
  return {};
#else
  return HostError(
      Status::Unavailable(),
      "cannot read " + path + ": it is gzip-compressed and edgesgd was built without zlib");
#endif
}

HostResult<> InputFile::Read(std::span<std::byte> out, std::size_t& got) {
  got = 0;
  return gzip_ != nullptr ? ReadGzip(out, got) : ReadPlain(out, got);
}

HostResult<> InputFile::ReadPlain(std::span<std::byte> out, std::size_t& got) {
  while (got < out.size()) {
    const std::size_t request = std::min<std::size_t>(out.size() - got, INT_MAX);
    const ssize_t read = ::read(descriptor_, out.data() + got, request);
    if (read < 0) {
      if (errno == EINTR) continue;
      return ErrnoFailure("cannot read ", path_, errno);
    }
    if (read == 0) break;
    got += static_cast<std::size_t>(read);
  }
  position_ += got;
  return {};
}

HostResult<> InputFile::ReadGzip(std::span<std::byte> out, std::size_t& got) {
#if EDGESGD_HAVE_ZLIB
  const auto file = static_cast<gzFile>(gzip_);
  while (got < out.size()) {
    const auto request = static_cast<unsigned>(std::min<std::size_t>(out.size() - got, INT_MAX));
    const int read = gzread(file, out.data() + got, request);
    if (read <= 0) break;
    got += static_cast<std::size_t>(read);
  }
  int code = Z_OK;
  const char* message = gzerror(file, &code);
  if (code == Z_OK) return {};
  // zlib prefixes its text with the file's name, "<fd:N>: " for a descriptor.
  std::string_view text = message != nullptr ? message : "zlib error";
  if (text.starts_with("<fd:") && text.find(": ") != std::string_view::npos) {
    text.remove_prefix(text.find(": ") + 2);
  }
  // An early end leaves a short read for the caller to report as truncation; any other error
  // (bad CRC, bad deflate data) means corrupt rather than short, whatever was read so far.
  if (code == Z_BUF_ERROR) {
    end_note_ = std::string(text);
    return {};
  }
  if (code == Z_ERRNO) return ErrnoFailure("cannot read ", path_, errno);
  return HostError(Status::DataLoss(), "corrupt gzip data in " + path_ + ": " + std::string(text));
#else
  static_cast<void>(out);
  static_cast<void>(got);
  return HostError(Status::Internal(), "gzip read without zlib");
#endif
}

HostResult<> InputFile::Skip(std::size_t size, std::size_t& skipped) {
  skipped = 0;
  if (gzip_ == nullptr) {
    skipped = std::min(size, size_ - std::min(position_, size_));
    if (::lseek(descriptor_, static_cast<off_t>(position_ + skipped), SEEK_SET) < 0) {
      return ErrnoFailure("cannot read ", path_, errno);
    }
    position_ += skipped;
    return {};
  }
  // Inflating is the only way through a gzip stream; a bounded buffer keeps memory flat.
  std::array<std::byte, 1 << 16> discard;
  while (skipped < size) {
    const std::size_t want = std::min(discard.size(), size - skipped);
    std::size_t got = 0;
    if (HostResult<> read = ReadGzip(std::span(discard).first(want), got); !read.ok()) return read;
    skipped += got;
    if (got < want) break;
  }
  return {};
}

HostResult<> InputFile::AtEnd(bool& at_end) {
  std::byte extra{};
  std::size_t got = 0;
  HostResult<> read = Read(std::span(&extra, 1), got);
  at_end = got == 0;
  return read;
}

HostError InputFile::Truncated(const char* what, std::size_t expected, std::size_t got) const {
  std::string message = "truncated: expected " + std::to_string(expected) + " bytes of " + what +
                        " in " + path_ + ", got " + std::to_string(got);
  if (!end_note_.empty()) message += " (" + end_note_ + ")";
  return HostError(Status::DataLoss(), std::move(message));
}

}  // namespace edgesgd::platform::internal
