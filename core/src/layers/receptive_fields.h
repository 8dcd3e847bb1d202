#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "layers/layer_type.h"

// Receptive fields of a convolution: a layer gathers the fields of a tile of output positions
// into the rows of a matrix in its own scratch and multiplies it by the weights, which is where
// the time goes. Shared by the kinds that multiply fields by filters.
namespace edgesgd::layers {

// Values of one receptive field, [ky][kx][channel] (below 2^32 in a valid spec: the layer has
// more weights than that).
inline std::size_t FieldSize(const LayerSpec& layer, Shape in) {
  return std::size_t{layer.kernel} * layer.kernel * in.channels;
}

// The backward products take at most this many output positions at a time, which bounds the
// shared scratch for their receptive fields' gradient.
inline constexpr std::size_t kProductPixels = 256;

// Own scratch: one tile of fields, as many as fit in 16,384 floats (at least one), so it stays
// bounded however large the image; a layer whose fields all fit keeps them from the forward
// pass for the backward one. Shared scratch: the fields' gradient of one product.
LayerScratch FieldScratch(const LayerSpec& layer, Shape in, Shape out);

// Output positions of a conv layer: `count` of them from position `first` (row-major).
struct ConvPixels {
  std::size_t first = 0;
  std::size_t count = 0;
};

// Gathers the receptive fields of a tile's positions into consecutive rows of `fields`, with
// zeros where a window hangs over the padding.
void GatherFields(const LayerPlan& at, std::span<const float> in, ConvPixels tile,
                  std::span<float> fields);

// Adds a block's fields' gradient (one row per position) back onto the input positions they
// were gathered from.
void ScatterAddFields(const LayerPlan& at, ConvPixels block, const float* field_gradients,
                      std::span<float> in_gradient);

enum class ConvPass { kForward, kBackward };

// Calls visit(block, fields) for consecutive blocks of up to kProductPixels output positions
// (the last of each tile fewer), with the block's receptive fields (one row of FieldSize values
// per position). Fields are gathered a tile at a time into at.scratch, unless the backward pass
// finds the forward pass's still there: one tile covering the whole output.
template <typename Visit>
void ForEachConvBlock(const LayerPlan& at, std::span<const float> in, ConvPass pass, Visit visit) {
  const std::size_t field_size = FieldSize(at.layer, at.in);
  const std::size_t pixels = std::size_t{at.out.height} * at.out.width;
  const std::size_t tile_pixels = at.scratch.size() / field_size;
  const std::size_t block_pixels = std::min(tile_pixels, kProductPixels);
  const bool kept = pass == ConvPass::kBackward && tile_pixels == pixels;
  for (ConvPixels tile; tile.first < pixels; tile.first += tile_pixels) {
    tile.count = std::min(tile_pixels, pixels - tile.first);
    if (!kept) GatherFields(at, in, tile, at.scratch);
    for (std::size_t done = 0; done < tile.count; done += block_pixels) {
      const ConvPixels block{tile.first + done, std::min(block_pixels, tile.count - done)};
      visit(block, at.scratch.data() + done * field_size);
    }
  }
}

}  // namespace edgesgd::layers
