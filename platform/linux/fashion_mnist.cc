#include "edgesgd/platform/fashion_mnist.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

// Defined to 1 by platform/CMakeLists.txt when zlib exists for the target (cross builds may
// lack it; the reader then reports kUnavailable instead of failing the build).
#ifndef EDGESGD_HAVE_ZLIB
#define EDGESGD_HAVE_ZLIB 0
#endif
#if EDGESGD_HAVE_ZLIB
#include <zlib.h>
#endif

namespace edgesgd::platform {
namespace {

constexpr std::uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr std::size_t kImagesHeaderBytes = 16;
constexpr std::size_t kLabelsHeaderBytes = 8;
// Images converted per read: bounds the byte staging buffer (~784 KB) independent of limit.
constexpr std::size_t kImagesPerChunk = 1000;

FashionMnistLoad Failure(Status status, std::string message) {
  FashionMnistLoad load;
  load.status = status;
  load.message = std::move(message);
  return load;
}

#if EDGESGD_HAVE_ZLIB

std::string Hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", static_cast<unsigned>(value));
  return text;
}

std::uint32_t BigEndian32(const unsigned char* bytes) {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) |
         (std::uint32_t{bytes[2]} << 8) | std::uint32_t{bytes[3]};
}

// One gzip file: opened through a descriptor so a failed open reports errno, closed on scope
// exit.
class GzFile {
 public:
  GzFile() = default;
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  ~GzFile() {
    if (file_ != nullptr) gzclose(file_);
  }

  // Ok, or the failure to report.
  FashionMnistLoad Open(const std::string& path) {
    path_ = path;
    const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) {
      const int error = errno;
      return Failure(error == ENOENT ? Status::NotFound() : Status::Unavailable(),
                     (error == ENOENT ? "missing file " : "cannot open ") + path + ": " +
                         std::strerror(error));
    }
    file_ = gzdopen(descriptor, "rb");
    if (file_ == nullptr) {
      ::close(descriptor);
      return Failure(Status::Unavailable(), "cannot open " + path + ": zlib could not attach");
    }
    gzbuffer(file_, 1u << 17);
    return FashionMnistLoad();
  }

  // Reads up to `size` bytes, stopping early only at the end of the data or on an error.
  // Returns the count read and zlib's error state.
  struct ReadOutcome {
    std::size_t got = 0;
    int code = Z_OK;      // Z_BUF_ERROR: the stream ended early (truncated file)
    std::string message;  // zlib's text when code != Z_OK
  };
  ReadOutcome Read(void* buffer, std::size_t size) {
    auto* out = static_cast<unsigned char*>(buffer);
    ReadOutcome outcome;
    while (outcome.got < size) {
      const auto request =
          static_cast<unsigned>(std::min<std::size_t>(size - outcome.got, INT_MAX));
      const int read = gzread(file_, out + outcome.got, request);
      if (read <= 0) break;
      outcome.got += static_cast<std::size_t>(read);
    }
    const char* message = gzerror(file_, &outcome.code);
    if (outcome.code != Z_OK) outcome.message = message != nullptr ? message : "zlib error";
    return outcome;
  }

  const std::string& path() const { return path_; }

 private:
  gzFile file_ = nullptr;
  std::string path_;
};

// A zlib decoding error other than an early end (bad CRC, bad deflate data): the file is
// corrupt rather than short, whatever was read so far. (zlib may inflate a small file in one
// go, so such an error can surface on any read, even the header's.)
bool IsCorruptGzip(const GzFile::ReadOutcome& outcome) {
  return outcome.code != Z_OK && outcome.code != Z_BUF_ERROR;
}

FashionMnistLoad CorruptGzip(const GzFile& file, const GzFile::ReadOutcome& outcome) {
  return Failure(Status::DataLoss(),
                 "corrupt gzip data in " + file.path() + ": " + outcome.message);
}

// Reads exactly `size` bytes or returns the truncation/corruption failure naming `what`.
FashionMnistLoad ReadExactly(GzFile& file, void* buffer, std::size_t size, std::size_t expected,
                             std::size_t already, const char* what) {
  const GzFile::ReadOutcome outcome = file.Read(buffer, size);
  if (IsCorruptGzip(outcome)) return CorruptGzip(file, outcome);
  if (outcome.got == size) return FashionMnistLoad();
  std::string message = "truncated: expected " + std::to_string(expected) + " bytes of " + what +
                        " in " + file.path() + ", got " + std::to_string(already + outcome.got);
  if (!outcome.message.empty()) message += " (" + outcome.message + ")";
  return Failure(Status::DataLoss(), std::move(message));
}

// After a full load: the stream must end exactly here with a good CRC.
FashionMnistLoad ExpectEnd(GzFile& file, std::size_t items) {
  unsigned char extra = 0;
  const GzFile::ReadOutcome outcome = file.Read(&extra, 1);
  if (outcome.code != Z_OK) return CorruptGzip(file, outcome);
  if (outcome.got != 0) {
    return Failure(Status::DataLoss(), "corrupt: " + file.path() + " has data after its " +
                                           std::to_string(items) + " declared items");
  }
  return FashionMnistLoad();
}

// Reads a header of `bytes` bytes and checks its magic number.
FashionMnistLoad ReadHeader(GzFile& file, unsigned char* header, std::size_t bytes,
                            std::uint32_t magic, const char* kind) {
  const GzFile::ReadOutcome outcome = file.Read(header, bytes);
  if (IsCorruptGzip(outcome)) return CorruptGzip(file, outcome);
  if (outcome.got < bytes) {
    std::string message = "truncated: " + file.path() + " ends after " +
                          std::to_string(outcome.got) + " of " + std::to_string(bytes) +
                          " header bytes";
    if (!outcome.message.empty()) message += " (" + outcome.message + ")";
    return Failure(Status::DataLoss(), std::move(message));
  }
  const std::uint32_t found = BigEndian32(header);
  if (found != magic) {
    return Failure(Status::DataLoss(), "corrupt: bad magic " + Hex32(found) + " in " + file.path() +
                                           " (expected " + Hex32(magic) + " for IDX " + kind + ")");
  }
  return FashionMnistLoad();
}

#endif  // EDGESGD_HAVE_ZLIB

}  // namespace

DatasetView FashionMnist::View() const {
  DatasetView view;
  view.features = features;
  view.labels = labels;
  view.num_samples = num_samples;
  view.feature_dim = kFashionMnistFeatures;
  view.num_classes = kFashionMnistClasses;
  return view;
}

std::string FashionMnistDirectory() {
  const char* from_env = std::getenv(kFashionMnistDirectoryEnv);
  if (from_env != nullptr && from_env[0] != '\0') return from_env;
  return kFashionMnistDefaultDirectory;
}

bool FashionMnistReaderAvailable() { return EDGESGD_HAVE_ZLIB != 0; }

FashionMnistLoad LoadFashionMnist(FashionMnistSplit split, std::size_t limit) {
  return LoadFashionMnist(FashionMnistDirectory(), split, limit);
}

FashionMnistLoad LoadFashionMnist(const std::string& directory, FashionMnistSplit split,
                                  std::size_t limit) {
#if !EDGESGD_HAVE_ZLIB
  static_cast<void>(directory);
  static_cast<void>(split);
  static_cast<void>(limit);
  return Failure(Status::Unavailable(),
                 "Fashion-MNIST reader unavailable: edgesgd was built without zlib");
#else
  if (directory.empty()) {
    return Failure(Status::InvalidArgument(), "empty Fashion-MNIST directory path");
  }
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) {
    const int error = errno;
    return Failure(error == ENOENT ? Status::NotFound() : Status::Unavailable(),
                   "missing directory " + directory + ": " + std::strerror(error));
  }
  if (!S_ISDIR(info.st_mode)) {
    return Failure(Status::NotFound(), "not a directory: " + directory);
  }
  const std::string prefix = directory + (directory.back() == '/' ? "" : "/") +
                             (split == FashionMnistSplit::kTrain ? "train" : "t10k");

  GzFile images;
  GzFile labels;
  if (FashionMnistLoad opened = images.Open(prefix + "-images-idx3-ubyte.gz"); !opened.ok()) {
    return opened;
  }
  if (FashionMnistLoad opened = labels.Open(prefix + "-labels-idx1-ubyte.gz"); !opened.ok()) {
    return opened;
  }

  unsigned char image_header[kImagesHeaderBytes];
  unsigned char label_header[kLabelsHeaderBytes];
  if (FashionMnistLoad read =
          ReadHeader(images, image_header, kImagesHeaderBytes, kImagesMagic, "images");
      !read.ok()) {
    return read;
  }
  if (FashionMnistLoad read =
          ReadHeader(labels, label_header, kLabelsHeaderBytes, kLabelsMagic, "labels");
      !read.ok()) {
    return read;
  }
  const std::uint32_t image_count = BigEndian32(image_header + 4);
  const std::uint32_t rows = BigEndian32(image_header + 8);
  const std::uint32_t cols = BigEndian32(image_header + 12);
  const std::uint32_t label_count = BigEndian32(label_header + 4);
  if (rows != kFashionMnistRows || cols != kFashionMnistCols) {
    return Failure(Status::DataLoss(), "corrupt: " + images.path() + " holds " +
                                           std::to_string(rows) + "x" + std::to_string(cols) +
                                           " images, expected 28x28");
  }
  if (image_count != label_count) {
    return Failure(Status::DataLoss(), "corrupt: " + images.path() + " holds " +
                                           std::to_string(image_count) + " images but " +
                                           labels.path() + " holds " + std::to_string(label_count) +
                                           " labels");
  }
  const std::size_t count = limit == 0 ? image_count : std::min<std::size_t>(limit, image_count);

  FashionMnistLoad load;
  load.data.num_samples = count;
  load.data.labels.resize(count);
  if (FashionMnistLoad read =
          ReadExactly(labels, load.data.labels.data(), count, count, 0, "labels");
      !read.ok()) {
    return read;
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (load.data.labels[i] >= kFashionMnistClasses) {
      return Failure(Status::DataLoss(), "corrupt: label " + std::to_string(load.data.labels[i]) +
                                             " of sample " + std::to_string(i) + " in " +
                                             labels.path() + " is outside 0-9");
    }
  }

  const std::size_t pixel_bytes = count * kFashionMnistFeatures;
  load.data.features.resize(pixel_bytes);
  std::vector<unsigned char> chunk(std::min(count, kImagesPerChunk) * kFashionMnistFeatures);
  for (std::size_t done = 0; done < pixel_bytes;) {
    const std::size_t bytes = std::min(chunk.size(), pixel_bytes - done);
    if (FashionMnistLoad read =
            ReadExactly(images, chunk.data(), bytes, pixel_bytes, done, "pixels");
        !read.ok()) {
      return read;
    }
    // Division (not a multiply by 1/255) gives the correctly rounded value of every pixel.
    for (std::size_t j = 0; j < bytes; ++j) {
      load.data.features[done + j] = static_cast<float>(chunk[j]) / 255.0f;
    }
    done += bytes;
  }
  if (limit == 0 || limit >= image_count) {
    if (FashionMnistLoad end = ExpectEnd(images, image_count); !end.ok()) return end;
    if (FashionMnistLoad end = ExpectEnd(labels, label_count); !end.ok()) return end;
  }
  return load;
#endif
}

}  // namespace edgesgd::platform
