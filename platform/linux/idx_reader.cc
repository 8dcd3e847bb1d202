// idx:IMAGES[,LABELS] — the IDX files of MNIST and its relatives (LeCun et al.): big-endian; a
// magic number 0x0000TTNN (TT the element type, NN the number of dimensions), NN 32-bit sizes,
// then the elements. Images have NN >= 2 (samples, then any shape: features are its product),
// labels are unsigned bytes with NN = 1.

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "data_readers.h"
#include "sample_rows.h"

namespace edgesgd::platform::internal {
namespace {

constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr std::size_t kLabelsHeaderBytes = 8;

std::uint32_t BigEndian32(const std::byte* bytes) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = (value << 8) | std::to_integer<std::uint32_t>(bytes[i]);
  return value;
}

std::string Hex(std::uint32_t value, int digits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%0*x", digits, static_cast<unsigned>(value));
  return text;
}

// The element types read; IDX also defines 0x09 (signed byte), 0x0B (short) and 0x0C (int).
std::optional<ElementType> ImageElementType(std::uint8_t code) {
  switch (code) {
    case 0x08:
      return ElementType::kUint8;
    case 0x0D:
      return ElementType::kFloat32;
    case 0x0E:
      return ElementType::kFloat64;
    default:
      return std::nullopt;
  }
}

// IDX's types: 0x08 unsigned byte, 0x09 signed byte, 0x0B short, 0x0C int, 0x0D float, 0x0E double.
bool IsIdxTypeCode(std::uint8_t code) {
  return code == 0x08 || code == 0x09 || (code >= 0x0B && code <= 0x0E);
}

// The labels file beside `images`: "images" -> "labels" and "idxN" -> "idx1" in the file name,
// as MNIST names its pairs (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz).
std::optional<std::string> LabelsPathBeside(const std::string& images) {
  const std::size_t slash = images.rfind('/');
  const std::size_t name = slash == std::string::npos ? 0 : slash + 1;
  std::string labels = images;
  const std::size_t word = labels.rfind("images");
  if (word == std::string::npos || word < name) return std::nullopt;
  labels.replace(word, 6, "labels");
  const std::size_t idx = labels.find("idx", name);
  if (idx != std::string::npos && idx + 3 < labels.size() && labels[idx + 3] >= '0' &&
      labels[idx + 3] <= '9') {
    labels[idx + 3] = '1';
  }
  return labels;
}

// The images header: element type, sample count and values per sample.
HostResult<> ReadImagesHeader(InputFile& file, BinaryArray& array) {
  std::array<std::byte, 4> magic_bytes;
  if (HostResult<> read = ReadHeader(file, magic_bytes); !read.ok()) return read;
  const std::uint32_t magic = BigEndian32(magic_bytes.data());
  const auto type_code = static_cast<std::uint8_t>(magic >> 8);
  const auto dimensions = static_cast<std::uint8_t>(magic);
  if ((magic >> 16) != 0 || dimensions < 2 || !IsIdxTypeCode(type_code)) {
    return HostError(Status::DataLoss(),
                     "corrupt: bad magic " + Hex(magic, 8) + " in " + file.path() +
                         " (IDX images begin 0x0000, a type byte and at least 2 dimensions)");
  }
  const std::optional<ElementType> type = ImageElementType(type_code);
  if (!type.has_value()) {
    return HostError(Status::InvalidArgument(),
                     "unsupported IDX type " + Hex(type_code, 2) + " in " + file.path() +
                         " (read: 0x08 unsigned byte, 0x0d float, 0x0e double)");
  }
  std::vector<std::byte> sizes(4 * std::size_t{dimensions});
  if (HostResult<> read = ReadHeader(file, sizes, magic_bytes.size()); !read.ok()) return read;
  array.format = {*type, true};
  array.rows = BigEndian32(sizes.data());
  array.row_values = 1;
  bool fits = true;
  for (std::size_t d = 1; d < dimensions && fits; ++d) {
    const std::optional<std::size_t> product =
        CheckedProduct(array.row_values, BigEndian32(sizes.data() + 4 * d));
    fits = product.has_value();
    array.row_values = product.value_or(0);
  }
  if (fits && array.row_values == 0) {
    return HostError(Status::DataLoss(), "corrupt: " + file.path() + " declares empty samples");
  }
  if (!fits || !FitsInMemoryRange(array)) {
    return HostError(Status::DataLoss(),
                     "corrupt: " + file.path() + " declares more data than memory can address");
  }
  return {};
}

HostResult<> ReadLabelsHeader(InputFile& file, BinaryArray& array) {
  std::array<std::byte, kLabelsHeaderBytes> header;
  if (HostResult<> read = ReadHeader(file, header); !read.ok()) return read;
  const std::uint32_t magic = BigEndian32(header.data());
  if (magic != kLabelsMagic) {
    return HostError(Status::DataLoss(), "corrupt: bad magic " + Hex(magic, 8) + " in " +
                                             file.path() + " (expected " + Hex(kLabelsMagic, 8) +
                                             " for IDX labels)");
  }
  array.format = {ElementType::kUint8, true};
  array.rows = BigEndian32(header.data() + 4);
  array.row_values = 1;
  array.what = "labels";
  return {};
}

}  // namespace

HostResult<LabeledData> ReadIdx(std::span<const std::string> paths,
                                const DataReadOptions& options) {
  const std::string& images_path = paths[0];
  std::string labels_path;
  if (paths.size() > 1) {
    labels_path = paths[1];
  } else if (std::optional<std::string> beside = LabelsPathBeside(images_path)) {
    labels_path = *beside;
  } else {
    return HostError(Status::InvalidArgument(),
                     "cannot tell the labels file of " + images_path +
                         " (its name has no 'images'): give idx:IMAGES,LABELS");
  }

  InputFile images;
  InputFile labels;
  if (HostResult<> open = images.Open(images_path); !open.ok()) return std::move(open).error();
  if (HostResult<> open = labels.Open(labels_path); !open.ok()) return std::move(open).error();
  BinaryArray pixels;
  pixels.what = "pixels";
  BinaryArray classes;
  if (HostResult<> read = ReadImagesHeader(images, pixels); !read.ok()) {
    return std::move(read).error();
  }
  if (HostResult<> read = ReadLabelsHeader(labels, classes); !read.ok()) {
    return std::move(read).error();
  }
  return ReadSamples(images, pixels, labels, classes, options);
}

}  // namespace edgesgd::platform::internal
