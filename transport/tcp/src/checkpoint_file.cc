#include "checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace edgesgd::tcp::internal {

Status WriteFileAtomically(const std::string& path, std::span<const std::byte> bytes,
                           std::string& detail) {
  const std::string temporary = path + ".tmp";
  const auto failed = [&](const char* what, const std::string& file) {
    detail = std::string(what) + file + ": " + std::strerror(errno);
    return Status::Unavailable("cannot write the checkpoint");
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failed("cannot write checkpoint ", temporary);
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status status = failed("cannot write checkpoint ", temporary);
      ::close(fd);
      return status;
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return failed("cannot sync checkpoint ", temporary);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return failed("cannot rename checkpoint onto ", path);
  }
  const std::size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);  // makes the rename durable
    ::close(dir_fd);
  }
  return Status::Ok();
}

Status ReadWholeFile(const std::string& path, std::vector<std::byte>& out, std::string& detail) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    detail = "cannot read checkpoint " + path + ": " + std::strerror(errno);
    return Status::Unavailable("cannot read the checkpoint");
  }
  out.clear();
  std::byte chunk[65536];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) {
    out.insert(out.end(), chunk, chunk + n);
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) {
    detail = "cannot read checkpoint " + path;
    return Status::Unavailable("cannot read the checkpoint");
  }
  return Status::Ok();
}

}  // namespace edgesgd::tcp::internal
