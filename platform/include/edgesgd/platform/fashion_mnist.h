#pragma once

// Fashion-MNIST (Xiao et al. 2017) from the IDX gzip files of Debian's dataset-fashion-mnist:
// {train,t10k}-images-idx3-ubyte.gz and {train,t10k}-labels-idx1-ubyte.gz. Linux backend only
// (reads files, allocates at load time); the loaded arrays are viewed as an
// edgesgd::DatasetView, so users link edgesgd::core too.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/status.h"

namespace edgesgd::platform {

inline constexpr std::size_t kFashionMnistRows = 28;
inline constexpr std::size_t kFashionMnistCols = 28;
inline constexpr std::size_t kFashionMnistFeatures = kFashionMnistRows * kFashionMnistCols;
inline constexpr std::size_t kFashionMnistClasses = 10;
inline constexpr const char* kFashionMnistDefaultDirectory = "/usr/share/datasets/fashion-mnist";
// Environment variable that overrides the default directory.
inline constexpr const char* kFashionMnistDirectoryEnv = "EDGESGD_FASHION_MNIST_DIR";

enum class FashionMnistSplit : std::uint8_t { kTrain, kTest };

// Owned samples: features row-major, 784 floats per image, pixel / 255 in [0, 1]; labels 0-9.
struct FashionMnist {
  std::vector<float> features;
  std::vector<std::uint8_t> labels;
  std::size_t num_samples = 0;

  // A view over the vectors (valid while this object lives; moving it keeps the view valid).
  DatasetView View() const;
};

// The outcome of a load: status kOk with data, or a code plus a message naming the file and the
// problem, e.g. "missing file /d/train-images-idx3-ubyte.gz: No such file or directory".
// Codes: kNotFound (missing directory or file), kUnavailable (other open/read failures, or
// built without zlib), kDataLoss (bad magic, dimensions, counts, labels, truncation, corrupt
// gzip, trailing data), kInvalidArgument (empty directory string).
struct FashionMnistLoad {
  Status status;
  std::string message;
  FashionMnist data;

  bool ok() const { return status.ok(); }
};

// The directory to read: $EDGESGD_FASHION_MNIST_DIR if set and non-empty, else the Debian path.
std::string FashionMnistDirectory();

// Whether this build can read gzip files (zlib was found for the target at configure time).
bool FashionMnistReaderAvailable();

// Loads the first `limit` samples (all when limit is 0 or exceeds the file's count) of a split
// from `directory`. Validates both headers (magic 2051 images / 2049 labels, 28x28, equal
// counts), every loaded label (0-9) and that the files hold the bytes their headers promise.
// A full load (limit 0 or >= the count) also reads to the end of each gzip stream, so a CRC
// error or data past the declared count is reported; a limited load stops after the prefix it
// needs (a bad trailer is then caught only if zlib happened to inflate that far).
FashionMnistLoad LoadFashionMnist(const std::string& directory, FashionMnistSplit split,
                                  std::size_t limit = 0);

// As above, from FashionMnistDirectory().
FashionMnistLoad LoadFashionMnist(FashionMnistSplit split, std::size_t limit = 0);

}  // namespace edgesgd::platform
