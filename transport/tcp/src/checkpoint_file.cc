#include "checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace edgesgd::tcp::internal {

namespace {

HostError Failed(const char* what, const std::string& file, int error) {
  return HostError(Status::Unavailable("cannot write the checkpoint"),
                   std::string(what) + file + ": " + std::strerror(error));
}

Status WriteAll(int fd, std::span<const std::byte> bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Unavailable("write");
    if (n == 0) {
      errno = EIO;
      return Status::Unavailable("write");
    }
    written += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

HostResult<> WriteFileAtomically(const std::string& path, std::span<const std::byte> bytes) {
  // A fresh name created exclusively (mkostemp: O_CREAT | O_EXCL, mode 0600): nothing placed
  // at a predictable name beforehand, a symbolic link included, is opened or overwritten, and
  // the model is readable by the server's user only.
  std::string temporary = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return Failed("cannot create a temporary file for checkpoint ", path, errno);
  const auto abandon = [&](const char* what) {
    const int error = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    return Failed(what, temporary, error);
  };
  if (!WriteAll(fd, bytes).ok()) return abandon("cannot write checkpoint ");
  if (::fsync(fd) != 0) return abandon("cannot sync checkpoint ");
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return Failed("cannot close checkpoint ", temporary, error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    return Failed("cannot rename a checkpoint onto ", path, error);
  }
  // Until the directory is synced the rename may not survive a crash: the checkpoint is not
  // durable, which is an error like any other.
  const std::size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return Failed("cannot open the checkpoint's directory ", directory, errno);
  if (::fsync(dir_fd) != 0) {
    const int error = errno;
    ::close(dir_fd);
    return Failed("cannot sync the checkpoint's directory ", directory, error);
  }
  ::close(dir_fd);
  return {};
}

HostResult<std::vector<std::byte>> ReadWholeFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return HostError(Status::Unavailable("cannot read the checkpoint"),
                     "cannot read checkpoint " + path + ": " + std::strerror(errno));
  }
  std::vector<std::byte> out;
  std::byte chunk[65536];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) {
    out.insert(out.end(), chunk, chunk + n);
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) {
    return HostError(Status::Unavailable("cannot read the checkpoint"),
                     "cannot read checkpoint " + path);
  }
  return out;
}

}  // namespace edgesgd::tcp::internal
