#include "layers/receptive_fields.h"

#include <cstdint>
#include <cstring>

#include "edgesgd/core/eigen.h"
#include "layers/window.h"

namespace edgesgd::layers {
namespace {

// Floats of fields one tile holds at most (but at least one field).
constexpr std::size_t kTileFloats = 16384;

// Copies the receptive field of output (oy, ox) into `field` as [ky][kx][channel], with zeros
// where the window hangs over the padding.
void GatherField(const LayerPlan& at, std::span<const float> in, std::size_t oy, std::size_t ox,
                 std::span<float> field) {
  const std::size_t k = at.layer.kernel;
  const std::size_t c = at.in.channels;
  const WindowRange rows = Cover(oy, at.layer, at.pad_top, at.in.height);
  const WindowRange cols = Cover(ox, at.layer, at.pad_left, at.in.width);
  // Plain loops rather than fill and copy: rows are a few floats, too short for memcpy calls.
  const std::size_t row_floats = k * c;
  const std::size_t lead = cols.first * c;
  const std::size_t covered = cols.count * c;
  for (std::size_t ky = 0; ky < k; ++ky) {
    float* target = field.data() + ky * row_floats;
    if (ky < rows.first || ky >= rows.first + rows.count) {
      for (std::size_t j = 0; j < row_floats; ++j) target[j] = 0.0f;
      continue;
    }
    const float* source =
        in.data() + ((rows.begin + ky - rows.first) * at.in.width + cols.begin) * c;
    for (std::size_t j = 0; j < lead; ++j) target[j] = 0.0f;
    for (std::size_t j = 0; j < covered; ++j) target[lead + j] = source[j];
    for (std::size_t j = lead + covered; j < row_floats; ++j) target[j] = 0.0f;
  }
}

// Copies a window row of `count` floats: a few (kernel x channels), so in 4-float pieces whose
// size the compiler knows, the last one overlapping the one before, rather than a loop whose
// length it does not (the gather was a fifth of a small network's time).
void CopyWindowRow(float* to, const float* from, std::size_t count) {
  constexpr std::size_t kPiece = 4;
  if (count < kPiece) {
    for (std::size_t j = 0; j < count; ++j) to[j] = from[j];
    return;
  }
  for (std::size_t j = 0; j + kPiece < count; j += kPiece) {
    std::memcpy(to + j, from + j, kPiece * sizeof(float));
  }
  std::memcpy(to + count - kPiece, from + count - kPiece, kPiece * sizeof(float));
}

}  // namespace

LayerScratch FieldScratch(const LayerSpec& layer, Shape in, Shape out) {
  const std::size_t field = FieldSize(layer, in);
  const std::uint64_t pixels = std::uint64_t{out.height} * out.width;
  const auto tile_pixels = static_cast<std::size_t>(
      std::min<std::uint64_t>(pixels, std::max<std::size_t>(1, kTileFloats / field)));
  const std::size_t product_pixels = std::min(tile_pixels, kProductPixels);
  return {std::uint64_t{tile_pixels} * field, std::uint64_t{product_pixels} * field};
}

// Most windows lie inside the image and are copied row by row without GatherField's padding
// checks.
void GatherFields(const LayerPlan& at, std::span<const float> in, ConvPixels tile,
                  std::span<float> fields) {
  const std::size_t k = at.layer.kernel;
  const std::size_t c = at.in.channels;
  const std::size_t row_floats = k * c;
  const std::size_t in_row_floats = std::size_t{at.in.width} * c;
  float* target = fields.data();
  std::size_t oy = tile.first / at.out.width;
  std::size_t ox = tile.first % at.out.width;
  WindowRange rows = Cover(oy, at.layer, at.pad_top, at.in.height);
  for (std::size_t p = 0; p < tile.count; ++p, target += k * row_floats) {
    const WindowRange cols = Cover(ox, at.layer, at.pad_left, at.in.width);
    if (rows.count == k && cols.count == k) {
      const float* source = in.data() + rows.begin * in_row_floats + cols.begin * c;
      for (std::size_t ky = 0; ky < k; ++ky) {
        CopyWindowRow(target + ky * row_floats, source + ky * in_row_floats, row_floats);
      }
    } else {
      GatherField(at, in, oy, ox, std::span<float>(target, k * row_floats));
    }
    if (++ox == at.out.width) {
      ox = 0;
      rows = Cover(++oy, at.layer, at.pad_top, at.in.height);
    }
  }
}

void ScatterAddFields(const LayerPlan& at, ConvPixels block, const float* field_gradients,
                      std::span<float> in_gradient) {
  const std::size_t k = at.layer.kernel;
  const std::size_t c = at.in.channels;
  const std::size_t field_size = FieldSize(at.layer, at.in);
  for (std::size_t p = 0; p < block.count; ++p) {
    const std::size_t pixel = block.first + p;
    const float* field_gradient = field_gradients + p * field_size;
    const WindowRange rows = Cover(pixel / at.out.width, at.layer, at.pad_top, at.in.height);
    const WindowRange cols = Cover(pixel % at.out.width, at.layer, at.pad_left, at.in.width);
    const auto length = static_cast<Eigen::Index>(cols.count * c);
    for (std::size_t r = 0; r < rows.count; ++r) {
      VectorMap target(in_gradient.data() + ((rows.begin + r) * at.in.width + cols.begin) * c,
                       length);
      target += ConstVectorMap(field_gradient + ((rows.first + r) * k + cols.first) * c, length);
    }
  }
}

}  // namespace edgesgd::layers
