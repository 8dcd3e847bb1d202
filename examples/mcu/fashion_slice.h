#pragma once

// The Fashion-MNIST slice compiled into the Cortex-M training images: a few hundred training
// and held-out images, 2x2-averaged to 14x14 bytes, generated at build time from Debian's
// dataset-fashion-mnist files by make_fashion_slice.py (see CMakeLists.txt). Pixels stay bytes
// in flash; the helpers below convert the rows a computation needs into float buffers the
// caller owns, so RAM holds one batch, never the dataset.

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/model.h"
#include "edgesgd/core/random.h"
#include "edgesgd/core/result.h"

namespace edgesgd::mcu {

inline constexpr std::size_t kImageSide = 14;
inline constexpr std::size_t kImageFeatures = kImageSide * kImageSide;
inline constexpr std::size_t kImageClasses = 10;

struct ImageSlice {
  std::span<const std::uint8_t> pixels;  // size() * kImageFeatures bytes, row-major images
  std::span<const std::uint8_t> labels;  // one class 0-9 per image
  constexpr std::size_t size() const { return labels.size(); }

  // The first min(count, size()) images, e.g. to follow the training loss on a subset: on the
  // emulator an evaluation costs as much as training on the same images.
  constexpr ImageSlice First(std::size_t count) const {
    const std::size_t n = count < size() ? count : size();
    return ImageSlice{pixels.first(n * kImageFeatures), labels.first(n)};
  }
};

// Defined by the generated source: the first images of the training split, and of the test
// split (held out: never trained on).
extern const ImageSlice kTrainSlice;
extern const ImageSlice kTestSlice;

// Float buffers rows are converted into: `features` holds rows * kImageFeatures floats,
// `labels` rows bytes; their capacity bounds a batch or an evaluation chunk.
struct ImageBuffers {
  std::span<float> features;
  std::span<std::uint8_t> labels;
  std::size_t capacity() const;
};

// Draws `batch` rows uniformly with replacement from rows [first, first + count) of `slice`
// with `rng` (integer draws: the same batch on every architecture), converts them (pixel / 255)
// into `out` and returns the view. Errors: kInvalidArgument for an empty range or batch, a
// batch above out.capacity(); kOutOfRange for a range outside the slice. Does not allocate.
Result<DatasetView> SampleImages(const ImageSlice& slice, std::size_t first, std::size_t count,
                                 std::size_t batch, CounterRng& rng, const ImageBuffers& out);

// Mean loss and accuracy of `model` at `params` over all of `slice`, converting
// out.capacity() rows at a time. Errors: those of Model::Evaluate; kInvalidArgument for
// buffers without room for a row. Does not allocate.
Result<Evaluation> EvaluateImages(Model& model, std::span<const float> params,
                                  const ImageSlice& slice, const ImageBuffers& buffers);

}  // namespace edgesgd::mcu
