// npy:FEATURES,LABELS — two NumPy .npy files (format versions 1 to 3): the magic "\x93NUMPY",
// a version, the length of a header that is a Python dict literal
// ({'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }), then the elements.
// Features are unsigned bytes, float32 or float64 of shape (samples, ...); labels are integers
// of shape (samples,) or (samples, 1); both little-endian and in C order.

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "data_readers.h"
#include "sample_rows.h"

namespace edgesgd::platform::internal {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// Far above what numpy writes (a few hundred bytes), low enough to read at once.
constexpr std::size_t kMaxHeaderBytes = 1 << 16;

struct NamedType {
  std::string_view descr;
  ElementType type;
};
constexpr std::array<NamedType, 3> kFeatureTypes = {{
    {"|u1", ElementType::kUint8},
    {"<f4", ElementType::kFloat32},
    {"<f8", ElementType::kFloat64},
}};
constexpr std::array<NamedType, 8> kLabelTypes = {{
    {"|u1", ElementType::kUint8},
    {"|i1", ElementType::kInt8},
    {"<u2", ElementType::kUint16},
    {"<i2", ElementType::kInt16},
    {"<u4", ElementType::kUint32},
    {"<i4", ElementType::kInt32},
    {"<u8", ElementType::kUint64},
    {"<i8", ElementType::kInt64},
}};

template <std::size_t N>
std::string TypeList(const std::array<NamedType, N>& types) {
  std::string list;
  for (const NamedType& named : types) {
    if (!list.empty()) list += ", ";
    list += named.descr;
  }
  return list;
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
};

std::string ShapeText(const std::vector<std::size_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

// A recursive-descent parser of the header dict: the three keys numpy writes, each once.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  // Empty on success, else what is wrong.
  std::string Parse(NpyHeader& header) {
    bool seen_descr = false;
    bool seen_order = false;
    bool seen_shape = false;
    if (!Consume('{')) return Expected("'{'");
    while (!Consume('}')) {
      std::string key;
      if (!String(key)) return Expected("a quoted key");
      if (!Consume(':')) return Expected("':'");
      if (key == "descr" && !seen_descr) {
        seen_descr = true;
        SkipSpace();
        // A structured dtype is a list; kept as text for the caller to refuse by name.
        if (!String(header.descr) && !List(header.descr)) return Expected("a dtype");
      } else if (key == "fortran_order" && !seen_order) {
        seen_order = true;
        if (Word("True")) {
          header.fortran_order = true;
        } else if (!Word("False")) {
          return Expected("True or False");
        }
      } else if (key == "shape" && !seen_shape) {
        seen_shape = true;
        if (!Shape(header.shape)) return Expected("a tuple of sizes");
      } else {
        return "unexpected key " + Quoted(key);
      }
      if (!Consume(',')) {
        if (!Consume('}')) return Expected("',' or '}'");
        break;
      }
    }
    SkipSpace();
    if (at_ != text_.size()) return "text after the dict";
    if (!seen_descr) return "no 'descr'";
    if (!seen_order) return "no 'fortran_order'";
    if (!seen_shape) return "no 'shape'";
    return {};
  }

 private:
  std::string Expected(const char* what) const {
    return std::string("expected ") + what + " at offset " + std::to_string(at_);
  }
  void SkipSpace() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t' || text_[at_] == '\r')) {
      ++at_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  bool Word(std::string_view word) {
    SkipSpace();
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool String(std::string& out) {
    SkipSpace();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) return false;
    const char quote = text_[at_];
    const std::size_t end = text_.find(quote, at_ + 1);
    if (end == std::string_view::npos) return false;
    out.assign(text_.substr(at_ + 1, end - at_ - 1));
    at_ = end + 1;
    return true;
  }
  bool List(std::string& out) {
    if (at_ >= text_.size() || text_[at_] != '[') return false;
    std::size_t depth = 0;
    for (std::size_t end = at_; end < text_.size(); ++end) {
      if (text_[end] == '[') ++depth;
      if (text_[end] == ']' && --depth == 0) {
        out.assign(text_.substr(at_, end + 1 - at_));
        at_ = end + 1;
        return true;
      }
    }
    return false;
  }
  bool Size(std::size_t& out) {
    SkipSpace();
    const std::size_t start = at_;
    out = 0;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      const std::optional<std::size_t> scaled = CheckedProduct(out, 10);
      const auto digit = static_cast<std::size_t>(text_[at_] - '0');
      if (!scaled.has_value() || *scaled > SIZE_MAX - digit) return false;
      out = *scaled + digit;
      ++at_;
    }
    // numpy writes Python ints, which may carry an 'L' suffix in files from Python 2.
    if (at_ > start && at_ < text_.size() && text_[at_] == 'L') ++at_;
    return at_ > start;
  }
  bool Shape(std::vector<std::size_t>& shape) {
    if (!Consume('(')) return false;
    while (!Consume(')')) {
      std::size_t size = 0;
      if (!Size(size)) return false;
      shape.push_back(size);
      if (!Consume(',')) return Consume(')');
    }
    return true;
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

HostError BadHeader(const InputFile& file, const std::string& what) {
  return HostError(Status::DataLoss(), "corrupt: bad .npy header in " + file.path() + ": " + what);
}

HostResult<> ReadNpyHeader(InputFile& file, NpyHeader& header) {
  std::array<std::byte, 8> preamble;
  if (HostResult<> read = ReadHeader(file, preamble); !read.ok()) return read;
  if (std::memcmp(preamble.data(), kMagic.data(), kMagic.size()) != 0) {
    return HostError(Status::DataLoss(),
                     "corrupt: bad magic in " + file.path() + " (a .npy file begins \\x93NUMPY)");
  }
  const auto major = std::to_integer<unsigned>(preamble[6]);
  const auto minor = std::to_integer<unsigned>(preamble[7]);
  if (major < 1 || major > 3) {
    return HostError(Status::InvalidArgument(),
                     "unsupported .npy version " + std::to_string(major) + "." +
                         std::to_string(minor) + " of " + file.path() + " (read: 1.0 to 3.0)");
  }
  std::array<std::byte, 4> length_bytes{};
  const std::size_t length_size = major == 1 ? 2 : 4;
  if (HostResult<> read =
          ReadHeader(file, std::span(length_bytes).first(length_size), preamble.size());
      !read.ok()) {
    return read;
  }
  std::size_t length = 0;
  for (std::size_t i = 0; i < length_size; ++i) {
    length |= std::to_integer<std::size_t>(length_bytes[i]) << (8 * i);
  }
  if (length > kMaxHeaderBytes) {
    return BadHeader(file, "it declares " + std::to_string(length) + " bytes, more than " +
                               std::to_string(kMaxHeaderBytes));
  }
  std::vector<std::byte> text(length);
  if (HostResult<> read = ReadHeader(file, text, preamble.size() + length_size); !read.ok()) {
    return read;
  }
  const std::string error =
      HeaderParser(std::string_view(reinterpret_cast<const char*>(text.data()), length))
          .Parse(header);
  if (!error.empty()) return BadHeader(file, error);
  return {};
}

// The array of `header` as `role` ("features", "labels") with one of `types`, or why not.
template <std::size_t N>
HostResult<> ArrayOf(const InputFile& file, const NpyHeader& header, const char* role,
                     const std::array<NamedType, N>& types, BinaryArray& array) {
  const NamedType* named = nullptr;
  for (const NamedType& candidate : types) {
    if (candidate.descr == header.descr) named = &candidate;
  }
  if (named == nullptr) {
    return HostError(Status::InvalidArgument(), "unsupported dtype " + Quoted(header.descr) +
                                                    " of the " + role + " in " + file.path() +
                                                    " (read: " + TypeList(types) + ")");
  }
  if (header.fortran_order && header.shape.size() > 1) {
    return HostError(Status::InvalidArgument(),
                     "unsupported layout of " + file.path() +
                         ": Fortran order (save a C-order array, numpy.ascontiguousarray)");
  }
  array.format = {named->type, false};
  array.what = role;
  return {};
}

}  // namespace

HostResult<LabeledData> ReadNpy(std::span<const std::string> paths,
                                const DataReadOptions& options) {
  InputFile features;
  InputFile labels;
  if (HostResult<> open = features.Open(paths[0]); !open.ok()) return std::move(open).error();
  if (HostResult<> open = labels.Open(paths[1]); !open.ok()) return std::move(open).error();
  NpyHeader feature_header;
  NpyHeader label_header;
  if (HostResult<> read = ReadNpyHeader(features, feature_header); !read.ok()) {
    return std::move(read).error();
  }
  if (HostResult<> read = ReadNpyHeader(labels, label_header); !read.ok()) {
    return std::move(read).error();
  }

  BinaryArray values;
  BinaryArray classes;
  if (HostResult<> typed = ArrayOf(features, feature_header, "features", kFeatureTypes, values);
      !typed.ok()) {
    return std::move(typed).error();
  }
  if (HostResult<> typed = ArrayOf(labels, label_header, "labels", kLabelTypes, classes);
      !typed.ok()) {
    return std::move(typed).error();
  }
  const std::vector<std::size_t>& shape = feature_header.shape;
  if (shape.size() < 2) {
    return HostError(Status::InvalidArgument(), "unsupported shape " + ShapeText(shape) +
                                                    " of the features in " + paths[0] +
                                                    ": they need (samples, features...)");
  }
  const std::vector<std::size_t>& label_shape = label_header.shape;
  if (label_shape.empty() || label_shape.size() > 2 ||
      (label_shape.size() == 2 && label_shape[1] != 1)) {
    return HostError(Status::InvalidArgument(), "unsupported shape " + ShapeText(label_shape) +
                                                    " of the labels in " + paths[1] +
                                                    ": they need (samples,) or (samples, 1)");
  }
  values.rows = shape[0];
  values.row_values = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) {
    const std::optional<std::size_t> product = CheckedProduct(values.row_values, shape[d]);
    values.row_values = product.value_or(0);
    if (!product.has_value()) break;
  }
  classes.rows = label_shape[0];
  classes.row_values = 1;
  if (values.row_values == 0 || !FitsInMemoryRange(values) || !FitsInMemoryRange(classes)) {
    return HostError(Status::DataLoss(), "corrupt: shape " + ShapeText(shape) + " in " + paths[0] +
                                             " has no features or is too large");
  }
  return ReadSamples(features, values, labels, classes, options);
}

}  // namespace edgesgd::platform::internal
