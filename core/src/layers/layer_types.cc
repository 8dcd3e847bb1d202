#include <array>

#include "layers/layer_type.h"

namespace edgesgd::layers {
namespace {

struct LayerKindEntry {
  LayerKind kind;
  std::string_view name;  // in a spec's text
  const LayerSchema* schema;
};

struct KernelsEntry {
  LayerKind kind;
  const LayerKernels* kernels;
};

// Every layer kind, in LayerKind order, and its kernels in the same order: two arrays, so that
// code reaching only the first links no kernel. A new kind is its enum value, its file, its
// declarations in layer_type.h and its line in each array; the parser, formatter and kernels
// find it here.
constexpr std::array kLayerKinds = {
    LayerKindEntry{LayerKind::kDense, "dense", &kDenseSchema},
    LayerKindEntry{LayerKind::kConv, "conv", &kConvSchema},
    LayerKindEntry{LayerKind::kDepthwiseConv, "dwconv", &kDepthwiseConvSchema},
    LayerKindEntry{LayerKind::kMaxPool, "maxpool", &kMaxPoolSchema},
    LayerKindEntry{LayerKind::kAvgPool, "avgpool", &kAvgPoolSchema},
    LayerKindEntry{LayerKind::kRelu, "relu", &kReluSchema},
    LayerKindEntry{LayerKind::kRelu6, "relu6", &kRelu6Schema},
    LayerKindEntry{LayerKind::kFlatten, "flatten", &kFlattenSchema},
};
constexpr std::array kLayerKernels = {
    KernelsEntry{LayerKind::kDense, &kDenseKernels},
    KernelsEntry{LayerKind::kConv, &kConvKernels},
    KernelsEntry{LayerKind::kDepthwiseConv, &kDepthwiseConvKernels},
    KernelsEntry{LayerKind::kMaxPool, &kMaxPoolKernels},
    KernelsEntry{LayerKind::kAvgPool, &kAvgPoolKernels},
    KernelsEntry{LayerKind::kRelu, &kReluKernels},
    KernelsEntry{LayerKind::kRelu6, &kRelu6Kernels},
    KernelsEntry{LayerKind::kFlatten, &kFlattenKernels},
};

template <typename Entries>
constexpr bool InKindOrder(const Entries& entries) {
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (static_cast<std::size_t>(entries[k].kind) != k) return false;
  }
  return true;
}
static_assert(InKindOrder(kLayerKinds) && InKindOrder(kLayerKernels) &&
                  kLayerKernels.size() == kLayerKinds.size(),
              "both arrays list every LayerKind in order");

constexpr std::string_view kUnknownLayerLead = "unknown layer (";

// Characters of "unknown layer (dense, conv, ...)" with its terminating zero.
constexpr std::size_t UnknownLayerChars() {
  std::size_t chars = kUnknownLayerLead.size() + 2;  // ")" and the zero
  for (const LayerKindEntry& entry : kLayerKinds) chars += entry.name.size() + 2;
  return chars - 2;  // no ", " after the last name
}

// The parser's reason for an unknown name, listing the known ones.
constexpr std::array<char, UnknownLayerChars()> kUnknownLayer = [] {
  std::array<char, UnknownLayerChars()> text{};
  std::size_t used = 0;
  const auto append = [&](std::string_view part) {
    for (const char c : part) text[used++] = c;
  };
  append(kUnknownLayerLead);
  for (std::size_t k = 0; k < kLayerKinds.size(); ++k) {
    if (k > 0) append(", ");
    append(kLayerKinds[k].name);
  }
  append(")");
  return text;
}();

}  // namespace

const LayerSchema* FindLayerSchema(LayerKind kind) {
  const auto index = static_cast<std::size_t>(kind);
  return index < kLayerKinds.size() ? kLayerKinds[index].schema : nullptr;
}

const LayerKernels& KernelsOf(LayerKind kind) {
  return *kLayerKernels[static_cast<std::size_t>(kind)].kernels;
}

Result<LayerKind> ParseLayerKind(std::string_view name) {
  for (const LayerKindEntry& entry : kLayerKinds) {
    if (entry.name == name) return entry.kind;
  }
  return Status::InvalidArgument(kUnknownLayer.data());
}

std::string_view LayerKindName(LayerKind kind) {
  return kLayerKinds[static_cast<std::size_t>(kind)].name;
}

}  // namespace edgesgd::layers
