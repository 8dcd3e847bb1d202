#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/random.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

// The worker id whose kDataSampling stream is reserved for set-up randomness that every worker
// must agree on (partitioning, synthetic data). Real workers use ids below
// kDataSetupWorker - 1 (kDataSetupWorker - 1 is reserved for synthetic generators), so a
// worker's mini-batch stream never replays a set-up draw.
inline constexpr std::uint32_t kDataSetupWorker = 0x00FFFFFFu;

// A non-owning view of a dataset (or of one mini-batch: a batch is a small dataset). Features
// are row-major, `feature_dim` floats per sample. Classification data carries `labels` (one
// byte per sample, each < num_classes); regression data carries `targets` (one float per
// sample) and num_classes = 0. A view may carry both. The caller keeps the memory alive.
//
// Features may be stored as bytes instead (`feature_bytes`, a quarter of the memory, e.g.
// image pixels): byte b stands for b / byte_divisor, computed when rows are gathered into a
// float batch (GatherRows, SampleBatch). A view holds either floats or bytes; Row() and the
// models read float features only.
struct DatasetView {
  std::span<const float> features;
  std::span<const std::uint8_t> labels;
  std::span<const float> targets;
  std::size_t num_samples = 0;
  std::size_t feature_dim = 0;
  std::size_t num_classes = 0;
  std::span<const std::uint8_t> feature_bytes = {};
  float byte_divisor = 255.0f;

  // Float features of sample `i` (i < num_samples; a programmer error otherwise).
  std::span<const float> Row(std::size_t i) const {
    return features.subspan(i * feature_dim, feature_dim);
  }
  bool has_labels() const { return !labels.empty(); }
  bool has_targets() const { return !targets.empty(); }
  bool has_byte_features() const { return !feature_bytes.empty(); }
};

// Checks the view's shape: features (or feature_bytes, not both) hold num_samples * feature_dim
// values, byte_divisor is positive and finite when there are bytes, feature_dim >= 1,
// at least one of labels/targets is present and each present one has num_samples entries, and
// (when num_classes > 0) every label is below num_classes. Reads every label (O(num_samples)).
// Errors: kInvalidArgument for a shape mismatch, kOutOfRange for a label >= num_classes.
// Does not allocate.
Status ValidateDataset(const DatasetView& data);

// Rows [begin, begin + count) of `data` as a view over the same memory (e.g. one client of the
// experiment A data). Errors: kOutOfRange if the range is not inside the dataset. Does not
// allocate.
Result<DatasetView> SliceRows(const DatasetView& data, std::size_t begin, std::size_t count);

// Caller memory a batch is gathered into. `features` needs batch_size * feature_dim floats;
// `labels` batch_size bytes if the source has labels (else may be empty); `targets`
// batch_size floats if the source has targets (else may be empty).
struct BatchBuffers {
  std::span<float> features;
  std::span<std::uint8_t> labels;
  std::span<float> targets;
};

// Copies rows `indices` of `data` into `out` (batch row i = data row indices[i]; every row in
// order when indices is empty) as floats and returns a view of the filled prefix of `out`.
// Reads data, indices; writes out. Errors: kInvalidArgument if a buffer is too small;
// kOutOfRange if an index is >= data.num_samples. Does not allocate.
Result<DatasetView> GatherRows(const DatasetView& data, std::span<const std::uint32_t> indices,
                               const BatchBuffers& out);

// Draws `batch_size` rows uniformly with replacement from `pool` (a worker's shard of sample
// indices; all of `data` when pool is empty) and gathers them into `out` as GatherRows does.
// Randomness comes only from `rng` (integer draws, so the batch is the same on every
// architecture); the conventional stream is CounterRng(seed, round, 0,
// StreamId(RandomPurpose::kDataSampling, worker)), which makes batch t a pure function of t.
// Errors: kInvalidArgument if batch_size is 0, a buffer is too small, or the pool/data is
// empty or larger than 2^32 - 1; kOutOfRange if a pool index is >= data.num_samples.
// Does not allocate.
Result<DatasetView> SampleBatch(const DatasetView& data, std::span<const std::uint32_t> pool,
                                std::size_t batch_size, CounterRng& rng, const BatchBuffers& out);

// Permutes `indices` uniformly (Fisher-Yates with exact integer draws from `rng`), e.g. to walk
// a shard epoch by epoch without replacement. Errors: kInvalidArgument if indices.size() does
// not fit in 32 bits. Does not allocate.
Status ShuffleIndices(std::span<std::uint32_t> indices, CounterRng& rng);

}  // namespace edgesgd
