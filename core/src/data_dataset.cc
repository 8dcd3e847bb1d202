#include <algorithm>
#include <cmath>
#include <limits>

#include "edgesgd/core/data/dataset.h"

namespace edgesgd {
namespace {

constexpr std::size_t kMaxIndex = std::numeric_limits<std::uint32_t>::max();

// Whether `out` can hold `rows` rows of `data`'s shape.
bool BuffersFit(const DatasetView& data, const BatchBuffers& out, std::size_t rows) {
  if (out.features.size() / data.feature_dim < rows) return false;
  if (data.has_labels() && out.labels.size() < rows) return false;
  if (data.has_targets() && out.targets.size() < rows) return false;
  return true;
}

// Features held, whichever their width.
std::size_t StoredFeatures(const DatasetView& data) {
  return data.has_byte_features() ? data.feature_bytes.size() : data.features.size();
}

void CopyRow(const DatasetView& data, std::size_t source, std::size_t slot,
             const BatchBuffers& out) {
  const std::span<float> to = out.features.subspan(slot * data.feature_dim, data.feature_dim);
  if (data.has_byte_features()) {
    const std::span<const std::uint8_t> from =
        data.feature_bytes.subspan(source * data.feature_dim, data.feature_dim);
    // A division, as the byte was scaled when read into floats: every byte value rounds the same.
    for (std::size_t k = 0; k < to.size(); ++k) {
      to[k] = static_cast<float>(from[k]) / data.byte_divisor;
    }
  } else {
    const std::span<const float> row = data.Row(source);
    std::copy(row.begin(), row.end(), to.begin());
  }
  if (data.has_labels()) out.labels[slot] = data.labels[source];
  if (data.has_targets()) out.targets[slot] = data.targets[source];
}

DatasetView BatchView(const DatasetView& data, const BatchBuffers& out, std::size_t rows) {
  DatasetView batch;
  batch.features = out.features.first(rows * data.feature_dim);
  if (data.has_labels()) batch.labels = out.labels.first(rows);
  if (data.has_targets()) batch.targets = out.targets.first(rows);
  batch.num_samples = rows;
  batch.feature_dim = data.feature_dim;
  batch.num_classes = data.num_classes;
  return batch;
}

// Cheap shape check for the gather paths (labels were range-checked when the source was
// validated; re-reading every label per batch would cost a pass over the whole dataset).
Status CheckSourceShape(const DatasetView& data) {
  if (data.feature_dim == 0 || data.num_samples == 0) {
    return Status::InvalidArgument("the dataset has no samples or no features");
  }
  if (data.has_byte_features() && (!data.features.empty() || !(data.byte_divisor > 0.0f) ||
                                   !std::isfinite(data.byte_divisor))) {
    return Status::InvalidArgument("byte features come alone, with a positive finite divisor");
  }
  const std::size_t stored = StoredFeatures(data);
  if (stored / data.feature_dim != data.num_samples || stored % data.feature_dim != 0) {
    return Status::InvalidArgument("the feature count is not num_samples * feature_dim");
  }
  if (data.has_labels() && data.labels.size() != data.num_samples) {
    return Status::InvalidArgument("the label count differs from num_samples");
  }
  if (data.has_targets() && data.targets.size() != data.num_samples) {
    return Status::InvalidArgument("the target count differs from num_samples");
  }
  if (!data.has_labels() && !data.has_targets()) {
    return Status::InvalidArgument("the dataset has neither labels nor targets");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateDataset(const DatasetView& data) {
  EDGESGD_TRY(CheckSourceShape(data));
  if (data.num_classes > 0 && data.has_labels()) {
    for (const std::uint8_t label : data.labels) {
      if (label >= data.num_classes) return Status::OutOfRange("a label is not below num_classes");
    }
  }
  return Status::Ok();
}

Result<DatasetView> SliceRows(const DatasetView& data, std::size_t begin, std::size_t count) {
  if (begin > data.num_samples || count > data.num_samples - begin) {
    return Status::OutOfRange("the rows lie past the dataset's end");
  }
  if (StoredFeatures(data) < data.num_samples * data.feature_dim) {
    return Status::OutOfRange("the dataset has fewer features than num_samples * feature_dim");
  }
  DatasetView slice = data;
  if (data.has_byte_features()) {
    slice.feature_bytes =
        data.feature_bytes.subspan(begin * data.feature_dim, count * data.feature_dim);
  } else {
    slice.features = data.features.subspan(begin * data.feature_dim, count * data.feature_dim);
  }
  if (data.has_labels()) {
    if (data.labels.size() < begin + count) {
      return Status::OutOfRange("the dataset has fewer labels than the rows need");
    }
    slice.labels = data.labels.subspan(begin, count);
  }
  if (data.has_targets()) {
    if (data.targets.size() < begin + count) {
      return Status::OutOfRange("the dataset has fewer targets than the rows need");
    }
    slice.targets = data.targets.subspan(begin, count);
  }
  slice.num_samples = count;
  return slice;
}

Result<DatasetView> GatherRows(const DatasetView& data, std::span<const std::uint32_t> indices,
                               const BatchBuffers& out) {
  EDGESGD_TRY(CheckSourceShape(data));
  const std::size_t rows = indices.empty() ? data.num_samples : indices.size();
  if (!BuffersFit(data, out, rows)) {
    return Status::InvalidArgument("the batch buffers cannot hold the rows");
  }
  for (const std::uint32_t index : indices) {
    if (index >= data.num_samples) {
      return Status::OutOfRange("a row index is not below num_samples");
    }
  }
  for (std::size_t slot = 0; slot < rows; ++slot) {
    CopyRow(data, indices.empty() ? slot : indices[slot], slot, out);
  }
  return BatchView(data, out, rows);
}

Result<DatasetView> SampleBatch(const DatasetView& data, std::span<const std::uint32_t> pool,
                                std::size_t batch_size, CounterRng& rng, const BatchBuffers& out) {
  EDGESGD_TRY(CheckSourceShape(data));
  if (batch_size == 0 || !BuffersFit(data, out, batch_size)) {
    return Status::InvalidArgument(
        "the batch size is 0 or the batch buffers cannot hold the batch");
  }
  const std::size_t pool_size = pool.empty() ? data.num_samples : pool.size();
  if (pool_size > kMaxIndex) {
    return Status::InvalidArgument("the sample pool has more than 2^32 - 1 entries");
  }
  // Validate the pool before drawing so a bad shard fails the same way whatever is drawn.
  for (const std::uint32_t index : pool) {
    if (index >= data.num_samples) {
      return Status::OutOfRange("a pool index is not below num_samples");
    }
  }
  const auto bound = static_cast<std::uint32_t>(pool_size);
  for (std::size_t slot = 0; slot < batch_size; ++slot) {
    const std::uint32_t draw = rng.NextBelow(bound);
    CopyRow(data, pool.empty() ? draw : pool[draw], slot, out);
  }
  return BatchView(data, out, batch_size);
}

Status ShuffleIndices(std::span<std::uint32_t> indices, CounterRng& rng) {
  if (indices.size() > kMaxIndex) {
    return Status::InvalidArgument("more than 2^32 - 1 indices to shuffle");
  }
  for (std::size_t i = indices.size(); i > 1; --i) {
    const std::uint32_t j = rng.NextBelow(static_cast<std::uint32_t>(i));
    std::swap(indices[i - 1], indices[j]);
  }
  return Status::Ok();
}

}  // namespace edgesgd
