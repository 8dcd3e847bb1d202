#include <array>
#include <cmath>
#include <limits>

#include "edgesgd/core/data/partition.h"
#include "edgesgd/core/data/random_variates.h"

namespace edgesgd {
namespace {

// Round words of the set-up stream, one per partitioner, so their draws never coincide.
constexpr std::uint32_t kIidRound = 0x50494944u;        // "PIID"
constexpr std::uint32_t kDirichletRound = 0x50444952u;  // "PDIR"
// Tensor words within the Dirichlet round: proportions of class c use c, the assignment uses
// this one (classes are < 256).
constexpr std::uint32_t kAssignmentTensor = 0xFFFFFFFFu;

constexpr std::uint32_t SetupStream() {
  return StreamId(RandomPurpose::kDataSampling, kDataSetupWorker);
}

Status CheckOutputs(std::size_t num_samples, std::size_t num_workers,
                    std::span<std::uint32_t> indices, std::span<std::size_t> offsets) {
  if (num_samples == 0 || num_workers == 0) {
    return Status::InvalidArgument("there are no samples or no workers");
  }
  if (num_samples > std::numeric_limits<std::uint32_t>::max()) {
    return Status::InvalidArgument("more than 2^32 - 1 samples to partition");
  }
  if (indices.size() != num_samples || offsets.size() != num_workers + 1) {
    return Status::InvalidArgument(
        "the index buffer must hold num_samples and the offsets num_workers + 1");
  }
  return Status::Ok();
}

Status CheckLabels(const DatasetView& data) {
  if (!data.has_labels() || data.labels.size() != data.num_samples) {
    return Status::InvalidArgument("the dataset has no labels, or not one per sample");
  }
  if (data.num_classes == 0 || data.num_classes > 256) {
    return Status::InvalidArgument("num_classes must be in 1..256");
  }
  for (const std::uint8_t label : data.labels) {
    if (label >= data.num_classes) return Status::OutOfRange("a label is not below num_classes");
  }
  return Status::Ok();
}

// Contiguous chunks whose sizes differ by at most one, larger ones first.
void EqualOffsets(std::size_t num_samples, std::span<std::size_t> offsets) {
  const std::size_t workers = offsets.size() - 1;
  const std::size_t base = num_samples / workers;
  const std::size_t extra = num_samples % workers;
  offsets[0] = 0;
  for (std::size_t w = 0; w < workers; ++w) {
    offsets[w + 1] = offsets[w] + base + (w < extra ? 1 : 0);
  }
}

}  // namespace

Status PartitionIid(std::size_t num_samples, std::size_t num_workers, std::uint64_t seed,
                    std::span<std::uint32_t> indices, std::span<std::size_t> offsets) {
  EDGESGD_TRY(CheckOutputs(num_samples, num_workers, indices, offsets));
  for (std::size_t i = 0; i < num_samples; ++i) indices[i] = static_cast<std::uint32_t>(i);
  CounterRng rng(seed, kIidRound, 0, SetupStream());
  EDGESGD_TRY(ShuffleIndices(indices, rng));
  EqualOffsets(num_samples, offsets);
  return Status::Ok();
}

Status PartitionSortedByLabel(const DatasetView& data, std::size_t num_workers,
                              std::span<std::uint32_t> indices, std::span<std::size_t> offsets) {
  EDGESGD_TRY(CheckOutputs(data.num_samples, num_workers, indices, offsets));
  EDGESGD_TRY(CheckLabels(data));
  // Counting sort: stable and O(n) with a fixed 256-entry table.
  std::array<std::size_t, 257> starts{};
  for (const std::uint8_t label : data.labels) ++starts[label + 1u];
  for (std::size_t c = 1; c < starts.size(); ++c) starts[c] += starts[c - 1];
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    indices[starts[data.labels[i]]++] = static_cast<std::uint32_t>(i);
  }
  EqualOffsets(data.num_samples, offsets);
  return Status::Ok();
}

Status PartitionDirichlet(const DatasetView& data, std::size_t num_workers, float alpha,
                          std::uint64_t seed, std::span<std::uint32_t> indices,
                          std::span<std::size_t> offsets, std::span<std::byte> scratch) {
  EDGESGD_TRY(CheckOutputs(data.num_samples, num_workers, indices, offsets));
  EDGESGD_TRY(CheckLabels(data));
  if (!(alpha > 0.0f) || !std::isfinite(alpha)) {
    return Status::InvalidArgument("the Dirichlet alpha must be positive and finite");
  }
  if (num_workers > std::numeric_limits<std::uint32_t>::max()) {
    return Status::InvalidArgument("more than 2^32 - 1 workers");
  }
  const std::size_t classes = data.num_classes;
  if (scratch.size() < DirichletScratchBytes(classes, num_workers)) {
    return Status::ResourceExhausted("the scratch is smaller than DirichletScratchBytes");
  }
  Arena arena(scratch);
  // remaining[c * W + w]: samples of class c still owed to worker w.
  EDGESGD_TRY_ASSIGN(const std::span<std::uint32_t> remaining,
                     arena.Allocate<std::uint32_t>(classes * num_workers));
  EDGESGD_TRY_ASSIGN(const std::span<std::uint32_t> class_left,
                     arena.Allocate<std::uint32_t>(classes));
  EDGESGD_TRY_ASSIGN(const std::span<std::size_t> cursor, arena.Allocate<std::size_t>(num_workers));
  EDGESGD_TRY_ASSIGN(const std::span<float> weights, arena.Allocate<float>(num_workers));

  for (const std::uint8_t label : data.labels) ++class_left[label];

  for (std::size_t c = 0; c < classes; ++c) {
    // One stream per class: a libm difference in one class's Gamma rejection loop cannot
    // shift the draws of the others.
    NormalRng normal(
        CounterRng(seed, kDirichletRound, static_cast<std::uint32_t>(c), SetupStream()));
    float max_log = -std::numeric_limits<float>::infinity();
    for (std::size_t w = 0; w < num_workers; ++w) {
      weights[w] = SampleLogGamma(alpha, normal);
      if (weights[w] > max_log) max_log = weights[w];
    }
    // Normalise from logs (log-sum-exp): small alpha gives variates far below float's range.
    float total = 0.0f;
    for (std::size_t w = 0; w < num_workers; ++w) {
      weights[w] = std::exp(weights[w] - max_log);
      total += weights[w];
    }
    // Cut the class at rounded cumulative proportions; the last cut is exactly n_c.
    const float class_size = static_cast<float>(class_left[c]);
    float cumulative = 0.0f;
    std::uint32_t previous_cut = 0;
    for (std::size_t w = 0; w < num_workers; ++w) {
      cumulative += weights[w];
      std::uint32_t cut = class_left[c];
      if (w + 1 < num_workers) {
        const float scaled = std::floor(class_size * (cumulative / total) + 0.5f);
        cut = scaled >= class_size ? class_left[c] : static_cast<std::uint32_t>(scaled);
        if (cut < previous_cut) cut = previous_cut;
      }
      remaining[c * num_workers + w] = cut - previous_cut;
      previous_cut = cut;
    }
  }

  offsets[0] = 0;
  for (std::size_t w = 0; w < num_workers; ++w) {
    std::size_t owned = 0;
    for (std::size_t c = 0; c < classes; ++c) owned += remaining[c * num_workers + w];
    offsets[w + 1] = offsets[w] + owned;
    cursor[w] = offsets[w];
  }

  // Give each sample, in index order, to a worker drawn with probability proportional to what
  // that worker is still owed of the sample's class: a uniformly random assignment of the
  // class's samples to the quotas, without an n-sized shuffle buffer.
  CounterRng assign(seed, kDirichletRound, kAssignmentTensor, SetupStream());
  for (std::size_t i = 0; i < data.num_samples; ++i) {
    const std::uint8_t c = data.labels[i];
    std::uint32_t draw = assign.NextBelow(class_left[c]);
    const std::span<std::uint32_t> owed = remaining.subspan(c * num_workers, num_workers);
    std::size_t w = 0;
    while (draw >= owed[w]) draw -= owed[w++];
    --owed[w];
    --class_left[c];
    indices[cursor[w]++] = static_cast<std::uint32_t>(i);
  }
  return Status::Ok();
}

}  // namespace edgesgd
