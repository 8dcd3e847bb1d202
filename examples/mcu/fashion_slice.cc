#include "fashion_slice.h"

#include <algorithm>

namespace edgesgd::mcu {
namespace {

constexpr float kPixelScale = 1.0f / 255.0f;

void ConvertRow(const ImageSlice& slice, std::size_t row, const ImageBuffers& out,
                std::size_t at) {
  const std::span<const std::uint8_t> pixels =
      slice.pixels.subspan(row * kImageFeatures, kImageFeatures);
  const std::span<float> features = out.features.subspan(at * kImageFeatures, kImageFeatures);
  for (std::size_t i = 0; i < kImageFeatures; ++i) {
    features[i] = static_cast<float>(pixels[i]) * kPixelScale;
  }
  out.labels[at] = slice.labels[row];
}

DatasetView ViewOf(const ImageBuffers& buffers, std::size_t rows) {
  return DatasetView{.features = buffers.features.first(rows * kImageFeatures),
                     .labels = buffers.labels.first(rows),
                     .targets = {},
                     .num_samples = rows,
                     .feature_dim = kImageFeatures,
                     .num_classes = kImageClasses};
}

}  // namespace

std::size_t ImageBuffers::capacity() const {
  return std::min(features.size() / kImageFeatures, labels.size());
}

Result<DatasetView> SampleImages(const ImageSlice& slice, std::size_t first, std::size_t count,
                                 std::size_t batch, CounterRng& rng, const ImageBuffers& out) {
  if (count == 0 || batch == 0 || batch > out.capacity() || count > 0xFFFFFFFFu) {
    return Status::InvalidArgument();
  }
  if (first > slice.size() || count > slice.size() - first) return Status::OutOfRange();
  for (std::size_t i = 0; i < batch; ++i) {
    ConvertRow(slice, first + rng.NextBelow(static_cast<std::uint32_t>(count)), out, i);
  }
  return ViewOf(out, batch);
}

Result<Evaluation> EvaluateImages(Model& model, std::span<const float> params,
                                  const ImageSlice& slice, const ImageBuffers& buffers) {
  const std::size_t chunk = buffers.capacity();
  if (chunk == 0 || slice.size() == 0) return Status::InvalidArgument();
  // Sums in double: the slice is small, but chunk means should not lose digits when combined.
  double loss_sum = 0.0;
  double correct = 0.0;
  for (std::size_t first = 0; first < slice.size(); first += chunk) {
    const std::size_t rows = std::min(chunk, slice.size() - first);
    for (std::size_t i = 0; i < rows; ++i) ConvertRow(slice, first + i, buffers, i);
    EDGESGD_TRY_ASSIGN(const Evaluation part, model.Evaluate(params, ViewOf(buffers, rows)));
    loss_sum += static_cast<double>(part.loss) * static_cast<double>(rows);
    correct += static_cast<double>(part.accuracy) * static_cast<double>(rows);
  }
  const auto n = static_cast<double>(slice.size());
  return Evaluation{.loss = static_cast<float>(loss_sum / n),
                    .accuracy = static_cast<float>(correct / n)};
}

}  // namespace edgesgd::mcu
