#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

// How a dataset is split over workers. Every partitioner writes the same compressed form into
// caller spans: `indices` (num_samples entries, a permutation of 0..num_samples-1) and
// `offsets` (num_workers + 1 entries); worker w owns indices[offsets[w], offsets[w + 1]).
// All of them are pure functions of their inputs and seed, so every worker computes the same
// split locally without exchanging it. Their randomness uses the reserved set-up stream
// StreamId(RandomPurpose::kDataSampling, kDataSetupWorker) with a per-partitioner round word.
struct PartitionView {
  std::span<const std::uint32_t> indices;
  std::span<const std::size_t> offsets;

  std::size_t num_workers() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  // The sample indices of worker w (w < num_workers()).
  std::span<const std::uint32_t> Worker(std::size_t w) const {
    return indices.subspan(offsets[w], offsets[w + 1] - offsets[w]);
  }
};

// IID: a seeded uniform shuffle of all samples, then contiguous equal chunks (the first
// num_samples % num_workers workers get one extra sample). Writes indices, offsets.
// Errors: kInvalidArgument if num_workers or num_samples is 0, num_samples does not fit in
// 32 bits, indices.size() != num_samples or offsets.size() != num_workers + 1.
// Does not allocate.
Status PartitionIid(std::size_t num_samples, std::size_t num_workers, std::uint64_t seed,
                    std::span<std::uint32_t> indices, std::span<std::size_t> offsets);

// Label-sorted, unshuffled (the "non-IID" split of D-PSGD/DeTAG experiments): samples ordered
// by label (stable: ascending index within a label), then contiguous equal chunks as in
// PartitionIid. With 16 workers over 10 balanced classes each worker holds one or two classes.
// Reads data.labels (num_classes in 1..256). Same errors as PartitionIid, plus kInvalidArgument
// if data has no labels or num_classes is 0, kOutOfRange for a label >= num_classes.
// Does not allocate (a 256-entry count table lives on the stack).
Status PartitionSortedByLabel(const DatasetView& data, std::size_t num_workers,
                              std::span<std::uint32_t> indices, std::span<std::size_t> offsets);

// Scratch PartitionDirichlet needs for `num_classes` classes over `num_workers` workers.
constexpr std::size_t DirichletScratchBytes(std::size_t num_classes, std::size_t num_workers) {
  return kArenaAlignment + ArenaBytesFor<std::uint32_t>(num_classes * num_workers) +
         ArenaBytesFor<std::uint32_t>(num_classes) + ArenaBytesFor<std::size_t>(num_workers) +
         ArenaBytesFor<float>(num_workers);
}

// Dirichlet label skew (Hsu et al. 2019): for each class c, proportions p_c ~ Dir(alpha * 1)
// over the workers (normalised Gamma(alpha) variates, see SampleLogGamma; one RNG stream per
// class), the class's n_c samples are cut at round(n_c * cumsum(p_c)), and which samples of the
// class go to which worker is a uniformly random assignment (sequential draws without
// replacement). Small alpha (0.1) gives each worker few classes; large alpha (100) approaches
// IID. A worker may receive no samples at small alpha; callers that cannot train on an empty
// shard check offsets. Within a worker, indices ascend. Reads data.labels; writes indices,
// offsets; uses `scratch` (DirichletScratchBytes). Errors: as PartitionSortedByLabel, plus
// kInvalidArgument if alpha is not finite and > 0, kResourceExhausted if scratch is too small.
// Does not allocate.
Status PartitionDirichlet(const DatasetView& data, std::size_t num_workers, float alpha,
                          std::uint64_t seed, std::span<std::uint32_t> indices,
                          std::span<std::size_t> offsets, std::span<std::byte> scratch);

}  // namespace edgesgd
