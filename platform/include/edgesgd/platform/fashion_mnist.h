#pragma once

// Fashion-MNIST (Xiao et al. 2017) from the IDX gzip files of Debian's dataset-fashion-mnist:
// {train,t10k}-images-idx3-ubyte.gz and {train,t10k}-labels-idx1-ubyte.gz, read by the IDX
// reader of data_file.h. Linux backend only (reads files, allocates at load time).

#include <cstddef>
#include <cstdint>
#include <string>

#include "edgesgd/platform/data_file.h"

namespace edgesgd::platform {

inline constexpr std::size_t kFashionMnistRows = 28;
inline constexpr std::size_t kFashionMnistCols = 28;
inline constexpr std::size_t kFashionMnistFeatures = kFashionMnistRows * kFashionMnistCols;
inline constexpr std::size_t kFashionMnistClasses = 10;
inline constexpr const char* kFashionMnistDefaultDirectory = "/usr/share/datasets/fashion-mnist";
// Environment variable that overrides the default directory.
inline constexpr const char* kFashionMnistDirectoryEnv = "EDGESGD_FASHION_MNIST_DIR";

enum class FashionMnistSplit : std::uint8_t { kTrain, kTest };

// The directory to read: $EDGESGD_FASHION_MNIST_DIR if set and non-empty, else the Debian path.
std::string FashionMnistDirectory();

// Loads the first `limit` samples (all when limit is 0 or exceeds the file's count) of a split
// from `directory`: 784 bytes per image (pixel / 255 in [0, 1] once gathered into floats);
// labels 0-9, num_classes 10.
// Validates both headers (IDX images of 28x28, labels, equal counts), every loaded label and
// that the files hold the bytes their headers promise. A full load (limit 0 or >= the count)
// also reads to the end of each gzip stream, so a CRC error or data past the declared count is
// reported; a limited load stops after the prefix it needs (a bad trailer is then caught only
// if zlib happened to inflate that far). Failures as LoadDataFile's, plus kNotFound for a
// missing directory, kUnavailable in a build without zlib (GzipAvailable()) and
// kInvalidArgument for an empty directory string, e.g.
// "missing file /d/train-images-idx3-ubyte.gz: No such file or directory".
HostResult<LabeledData> LoadFashionMnist(const std::string& directory, FashionMnistSplit split,
                                         std::size_t limit = 0);

// As above, the rows `options` asks for (its classes are always 10), e.g. one worker's shard.
HostResult<LabeledData> LoadFashionMnist(const std::string& directory, FashionMnistSplit split,
                                         const DataReadOptions& options);

// As above, from FashionMnistDirectory().
HostResult<LabeledData> LoadFashionMnist(FashionMnistSplit split, std::size_t limit = 0);

}  // namespace edgesgd::platform
