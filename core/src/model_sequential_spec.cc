#include <charconv>
#include <cstdint>
#include <limits>

#include "edgesgd/core/model/sequential.h"
#include "layers/layer_type.h"

namespace edgesgd {
namespace {

constexpr std::uint64_t kMax32 = std::numeric_limits<std::uint32_t>::max();

Result<Shape> LayerOutputShape(const LayerSpec& layer, Shape in) {
  // A spec may come from outside (a config, later the wire): enums are checked, not trusted.
  const layers::LayerSchema* schema = layers::FindLayerSchema(layer.kind);
  if (schema == nullptr || layer.padding > Padding::kSame) {
    return Status::InvalidArgument("a layer's kind or padding is not a known value");
  }
  const layers::LayerFields& uses = schema->fields;
  if ((uses.units && layer.units == 0) ||
      (uses.window && (layer.kernel == 0 || layer.stride == 0))) {
    return Status::InvalidArgument("a layer's size, kernel or stride is zero");
  }
  if ((!uses.units && layer.units != 0) ||
      (!uses.window && (layer.kernel != 0 || layer.stride != 0)) ||
      (!uses.padding && layer.padding != Padding::kValid)) {
    return Status::InvalidArgument("a layer sets a field its kind does not use");
  }
  const Shape out = schema->output_shape(layer, in);
  if (out.size() == 0) {
    return Status::InvalidArgument("a kernel or pool window is larger than its input");
  }
  if (out.size() > kMax32) {
    return Status::InvalidArgument("a layer's output has 2^32 or more values");
  }
  return out;
}

// Tensor sizes in layout order; 0 tensors if the spec is invalid, with the reason in `status`.
std::size_t TensorSizes(const SequentialSpec& spec,
                        std::array<std::uint64_t, 2 * kMaxSequentialLayers>& sizes,
                        Status& status) {
  const Result<SequentialShapes> shapes = InferSequentialShapes(spec);
  if (!shapes.ok()) {
    status = shapes.status();
    return 0;
  }
  if (spec.classes < 2 || spec.classes > 256) {
    status = Status::InvalidArgument("a network has 2..256 classes");
    return 0;
  }
  if (shapes->at[spec.layer_count].size() != spec.classes) {
    status = Status::InvalidArgument("the last layer's output size differs from the class count");
    return 0;
  }
  std::size_t count = 0;
  std::uint64_t total = 0;
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    // Every factor is below 2^32 and kernel <= side, so each product stays far below 2^64.
    const layers::LayerSchema& schema = *layers::FindLayerSchema(spec.layers[l].kind);
    if (!schema.parametric()) continue;
    const layers::LayerTensors tensors = schema.tensors(spec.layers[l], shapes->at[l]);
    total += tensors.weights + tensors.bias;
    if (tensors.weights > kMax32 || total > kMax32) {
      status = Status::InvalidArgument("the network has 2^32 or more parameters");
      return 0;
    }
    sizes[count++] = tensors.weights;
    sizes[count++] = tensors.bias;
  }
  if (count == 0) {
    status = Status::InvalidArgument("a network needs a dense, conv or dwconv layer");
    return 0;
  }
  status = Status::Ok();
  return count;
}

// Parses a decimal field of a layer (1..2^32 - 1).
Status ParseField(std::string_view text, std::uint32_t& value) {
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    return Status::InvalidArgument("a layer's number is not a decimal integer below 2^32");
  }
  if (value == 0) return Status::InvalidArgument("a layer's size, kernel or stride is zero");
  return Status::Ok();
}

Status ParsePadding(std::string_view text, Padding& padding) {
  if (text == "same") {
    padding = Padding::kSame;
  } else if (text == "valid") {
    padding = Padding::kValid;
  } else {
    return Status::InvalidArgument("a convolution's padding is neither same nor valid");
  }
  return Status::Ok();
}

// The part of `text` before `end` (npos: all of it). Not substr, whose range check would pull
// libstdc++'s exception path into bare-metal builds.
std::string_view Before(std::string_view text, std::size_t end) {
  return std::string_view(text.data(), end < text.size() ? end : text.size());
}

// Splits `text` at ':' into at most `fields.size()` parts; returns how many, or
// fields.size() + 1 if there are more.
std::size_t SplitFields(std::string_view text, std::span<std::string_view> fields) {
  std::size_t count = 0;
  while (true) {
    if (count == fields.size()) return count + 1;
    const std::size_t colon = text.find(':');
    fields[count++] = Before(text, colon);
    if (colon == std::string_view::npos) return count;
    text.remove_prefix(colon + 1);
  }
}

Result<LayerSpec> ParseLayer(std::string_view text) {
  std::array<std::string_view, 5> fields;
  const std::size_t count = SplitFields(text, fields);
  LayerSpec layer;
  EDGESGD_TRY_ASSIGN(layer.kind, layers::ParseLayerKind(fields[0]));
  const layers::LayerFields& uses = layers::FindLayerSchema(layer.kind)->fields;
  // Fields after the name: units and kernel required, stride and padding optional.
  const std::size_t required = std::size_t{uses.units} + std::size_t{uses.window};
  const std::size_t optional = std::size_t{uses.window} + std::size_t{uses.padding};
  const std::size_t given = count - 1;
  if (given < required || given > required + optional) {
    return Status::InvalidArgument("a layer has too few or too many ':' fields");
  }
  std::size_t next = 1;
  if (uses.units) EDGESGD_TRY(ParseField(fields[next++], layer.units));
  if (uses.window) {
    EDGESGD_TRY(ParseField(fields[next++], layer.kernel));
    layer.stride = uses.stride_is_kernel ? layer.kernel : 1;
    if (next < count) EDGESGD_TRY(ParseField(fields[next++], layer.stride));
  }
  if (next < count) EDGESGD_TRY(ParsePadding(fields[next++], layer.padding));
  return layer;
}

// Appends to a bounded character buffer; remembers whether anything did not fit.
class TextWriter {
 public:
  explicit TextWriter(std::span<char> out) : out_(out) {}

  void Append(std::string_view text) {
    if (text.size() > out_.size() - used_) {
      overflow_ = true;
      return;
    }
    for (const char c : text) out_[used_++] = c;
  }
  void AppendNumber(std::uint32_t value) {
    std::array<char, 10> digits{};
    const auto [end, error] = std::to_chars(digits.data(), digits.data() + digits.size(), value);
    (void)error;  // ten digits hold any u32
    Append(std::string_view(digits.data(), static_cast<std::size_t>(end - digits.data())));
  }

  bool overflow() const { return overflow_; }
  std::string_view text() const { return std::string_view(out_.data(), used_); }

 private:
  std::span<char> out_;
  std::size_t used_ = 0;
  bool overflow_ = false;
};

}  // namespace

Result<SequentialShapes> InferSequentialShapes(const SequentialSpec& spec) {
  if (spec.input.size() == 0 || spec.input.size() > kMax32) {
    return Status::InvalidArgument(
        "the input's height, width and channels are >= 1, < 2^32 values");
  }
  if (spec.layer_count == 0 || spec.layer_count > kMaxSequentialLayers) {
    return Status::InvalidArgument("a network has 1..16 layers");
  }
  SequentialShapes shapes;
  shapes.at[0] = spec.input;
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    EDGESGD_TRY_ASSIGN(shapes.at[l + 1], LayerOutputShape(spec.layers[l], shapes.at[l]));
  }
  return shapes;
}

Status ValidateSequentialSpec(const SequentialSpec& spec) {
  std::array<std::uint64_t, 2 * kMaxSequentialLayers> sizes{};
  Status status;
  TensorSizes(spec, sizes, status);
  return status;
}

std::size_t ParameterCount(const SequentialSpec& spec) {
  std::array<std::uint64_t, 2 * kMaxSequentialLayers> sizes{};
  Status status;
  const std::size_t count = TensorSizes(spec, sizes, status);
  std::uint64_t total = 0;
  for (std::size_t t = 0; t < count; ++t) total += sizes[t];
  return static_cast<std::size_t>(total);
}

Result<TensorLayout> SequentialLayout(const SequentialSpec& spec) {
  std::array<std::uint64_t, 2 * kMaxSequentialLayers> sizes{};
  Status status;
  const std::size_t count = TensorSizes(spec, sizes, status);
  EDGESGD_TRY(status);
  return TensorLayout::FromSizes(std::span<const std::uint64_t>(sizes.data(), count));
}

Result<SequentialSpec> ParseSequentialSpec(std::string_view text, Shape input,
                                           std::size_t classes) {
  SequentialSpec spec;
  spec.input = input;
  if (classes < 2 || classes > 256) return Status::InvalidArgument("a network has 2..256 classes");
  spec.classes = static_cast<std::uint32_t>(classes);
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view item = Before(text, comma);
    if (item.empty()) return Status::InvalidArgument("a layer in the network spec is empty");
    if (spec.layer_count == kMaxSequentialLayers) {
      return Status::InvalidArgument("a network has 1..16 layers");
    }
    EDGESGD_TRY_ASSIGN(spec.layers[spec.layer_count], ParseLayer(item));
    ++spec.layer_count;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  EDGESGD_TRY(ValidateSequentialSpec(spec));
  return spec;
}

Result<std::string_view> FormatSequentialSpec(const SequentialSpec& spec, std::span<char> out) {
  EDGESGD_TRY(ValidateSequentialSpec(spec));
  TextWriter writer(out);
  for (std::size_t l = 0; l < spec.layer_count; ++l) {
    const LayerSpec& layer = spec.layers[l];
    if (l > 0) writer.Append(",");
    writer.Append(layers::LayerKindName(layer.kind));
    for (const std::uint32_t field : {layer.units, layer.kernel, layer.stride}) {
      if (field == 0) continue;
      writer.Append(":");
      writer.AppendNumber(field);
    }
    if (layers::FindLayerSchema(layer.kind)->fields.padding) {
      writer.Append(layer.padding == Padding::kSame ? ":same" : ":valid");
    }
  }
  if (writer.overflow()) {
    return Status::ResourceExhausted("the buffer is too short for the network's text");
  }
  return writer.text();
}

}  // namespace edgesgd
