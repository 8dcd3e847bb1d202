#include "edgesgd/platform/fashion_mnist.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace edgesgd::platform {

std::string FashionMnistDirectory() {
  const char* from_env = std::getenv(kFashionMnistDirectoryEnv);
  if (from_env != nullptr && from_env[0] != '\0') return from_env;
  return kFashionMnistDefaultDirectory;
}

HostResult<LabeledData> LoadFashionMnist(FashionMnistSplit split, std::size_t limit) {
  return LoadFashionMnist(FashionMnistDirectory(), split, limit);
}

HostResult<LabeledData> LoadFashionMnist(const std::string& directory, FashionMnistSplit split,
                                         std::size_t limit) {
  DataReadOptions options;
  options.max_rows = limit;
  return LoadFashionMnist(directory, split, options);
}

HostResult<LabeledData> LoadFashionMnist(const std::string& directory, FashionMnistSplit split,
                                         const DataReadOptions& options) {
  if (!GzipAvailable()) {
    return HostError(Status::Unavailable(),
                     "Fashion-MNIST reader unavailable: edgesgd was built without zlib");
  }
  if (directory.empty()) {
    return HostError(Status::InvalidArgument(), "empty Fashion-MNIST directory path");
  }
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0) {
    const int error = errno;
    return HostError(error == ENOENT ? Status::NotFound() : Status::Unavailable(),
                     "missing directory " + directory + ": " + std::strerror(error));
  }
  if (!S_ISDIR(info.st_mode)) {
    return HostError(Status::NotFound(), "not a directory: " + directory);
  }
  const std::string prefix = directory + (directory.back() == '/' ? "" : "/") +
                             (split == FashionMnistSplit::kTrain ? "train" : "t10k");
  const DataFileSpec spec{"idx",
                          {prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz"}};
  DataReadOptions ten_classes = options;
  ten_classes.classes = kFashionMnistClasses;
  HostResult<LabeledData> load = LoadDataFile(spec, ten_classes);
  if (load.ok() && load->feature_dim != kFashionMnistFeatures) {
    return HostError(Status::DataLoss(), "corrupt: " + spec.paths[0] + " holds images of " +
                                             std::to_string(load->feature_dim) +
                                             " pixels, expected 28x28");
  }
  return load;
}

}  // namespace edgesgd::platform
