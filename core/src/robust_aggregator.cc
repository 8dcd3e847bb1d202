#include "edgesgd/core/robust_aggregator.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace edgesgd {

Status RobustAggregator::Init(Arena& arena, const CodecRegistry& codecs,
                              const TensorLayout& layout, const CodecParams& codec,
                              const RobustParams& params, std::uint32_t max_updates) {
  if (layout.tensor_count() == 0) return Status::InvalidArgument("the layout has no tensors");
  EDGESGD_TRY(ValidateRobustParams(params));
  if (params.rule == RobustRule::kNone) {
    return Status::InvalidArgument("no robust rule: the plain mean is MeanAggregator's");
  }
  if (max_updates == 0) return Status::InvalidArgument("a round must hold at least one update");
  EDGESGD_TRY(EncodedShape(codec, layout));
  EDGESGD_TRY_ASSIGN(const CodecOps* ops, codecs.For(codec));
  if (arena.sealed()) return Status::FailedPrecondition("the arena is sealed");
  if (arena.remaining_bytes() < StateBytes(layout, codec, params, max_updates)) {
    return Status::ResourceExhausted("the arena is too small for the robust aggregator's rows");
  }
  const std::size_t d = layout.dimension();
  const std::size_t n = max_updates;
  EDGESGD_TRY_ASSIGN(rows_, arena.Allocate<float>(n * d));
  EDGESGD_TRY_ASSIGN(aggregate_, arena.Allocate<float>(d));
  if (params.rule == RobustRule::kMedian || params.rule == RobustRule::kTrimmedMean) {
    EDGESGD_TRY_ASSIGN(column_, arena.Allocate<float>(n));
  } else if (params.rule == RobustRule::kMultiKrum) {
    EDGESGD_TRY_ASSIGN(distances_, arena.Allocate<double>(n * n));
    EDGESGD_TRY_ASSIGN(scores_, arena.Allocate<double>(n));
    EDGESGD_TRY_ASSIGN(order_, arena.Allocate<std::uint32_t>(n));
  } else {
    EDGESGD_TRY_ASSIGN(step_, arena.Allocate<float>(d));
  }
  EDGESGD_TRY_ASSIGN(codec_scratch_, arena.AllocateBytes(CodecScratchBytes(codec, layout)));
  std::fill(aggregate_.begin(), aggregate_.end(), 0.0f);
  ops_ = ops;
  layout_ = layout;
  codec_ = codec;
  params_ = params;
  dimension_ = d;
  capacity_ = max_updates;
  count_ = 0;
  return Status::Ok();
}

Status RobustAggregator::Add(const CodecParams& params, const PayloadView& payload,
                             const CodecContext& context) {
  if (ops_ == nullptr) return Status::FailedPrecondition("Init has not been called");
  if (count_ == capacity_) {
    return Status::FailedPrecondition("the round already holds as many updates as it was sized for");
  }
  if (CodecIdOf(params) != CodecIdOf(codec_) ||
      CodecScratchBytes(params, layout_) > codec_scratch_.size()) {
    return Status::InvalidArgument("the parameters are not of the aggregator's codec");
  }
  const std::span<float> row = rows_.subspan(count_ * dimension_, dimension_);
  std::fill(row.begin(), row.end(), 0.0f);
  // A payload that fails to decode leaves a partial row behind, but count_ does not take it.
  EDGESGD_TRY(ops_->decode_add(params, layout_, context, payload, 1.0f, row, codec_scratch_));
  ++count_;
  return Status::Ok();
}

Result<std::span<const float>> RobustAggregator::Aggregate() {
  if (ops_ == nullptr || count_ == 0) {
    return Status::FailedPrecondition("Init has not been called, or no update was added");
  }
  switch (params_.rule) {
    case RobustRule::kMedian:
      Median();
      break;
    case RobustRule::kTrimmedMean:
      TrimmedMean();
      break;
    case RobustRule::kMultiKrum:
      MultiKrum();
      break;
    default:
      CenteredClipping();
      break;
  }
  return std::span<const float>(aggregate_);
}

void RobustAggregator::Median() {
  const std::size_t n = count_;
  const std::span<float> column = column_.first(n);
  const auto middle = column.begin() + static_cast<std::ptrdiff_t>(n / 2);
  for (std::size_t j = 0; j < dimension_; ++j) {
    for (std::size_t i = 0; i < n; ++i) column[i] = rows_[i * dimension_ + j];
    std::nth_element(column.begin(), middle, column.end());
    float median = *middle;
    if (n % 2 == 0) {
      // The lower middle value is the largest of the half nth_element put before `middle`.
      const float lower = *std::max_element(column.begin(), middle);
      median = 0.5f * (lower + median);
    }
    aggregate_[j] = median;
  }
}

void RobustAggregator::TrimmedMean() {
  const std::size_t n = count_;
  const std::size_t trim = std::min<std::size_t>(params_.byzantine, (n - 1) / 2);
  const std::span<float> column = column_.first(n);
  const float kept = static_cast<float>(n - 2 * trim);
  for (std::size_t j = 0; j < dimension_; ++j) {
    for (std::size_t i = 0; i < n; ++i) column[i] = rows_[i * dimension_ + j];
    std::sort(column.begin(), column.end());
    float sum = 0.0f;
    for (std::size_t i = trim; i < n - trim; ++i) sum += column[i];
    aggregate_[j] = sum / kept;
  }
}

void RobustAggregator::MultiKrum() {
  const std::size_t n = count_;
  for (std::size_t a = 0; a < n; ++a) {
    distances_[a * n + a] = 0.0;
    for (std::size_t b = a + 1; b < n; ++b) {
      double squared = 0.0;
      const std::span<const float> u = Row(a);
      const std::span<const float> v = Row(b);
      for (std::size_t j = 0; j < dimension_; ++j) {
        const double difference = static_cast<double>(u[j]) - static_cast<double>(v[j]);
        squared += difference * difference;
      }
      distances_[a * n + b] = squared;
      distances_[b * n + a] = squared;
    }
  }
  const std::size_t f = params_.byzantine;
  // n - f - 2 neighbours, clamped to 1..n-1 so that small rounds still rank their updates.
  std::size_t neighbours = n > f + 2 ? n - f - 2 : 1;
  if (neighbours > n - 1) neighbours = n - 1;
  for (std::size_t a = 0; a < n; ++a) {
    // nth_element reorders the row in place: each row is read only here, for its own score.
    const std::span<double> row = distances_.subspan(a * n, n);
    double score = 0.0;
    if (n > 1) {
      row[a] = std::numeric_limits<double>::infinity();  // not its own neighbour
      std::nth_element(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(neighbours - 1),
                       row.end());
      for (std::size_t k = 0; k < neighbours; ++k) score += row[k];
    }
    scores_[a] = score;
  }
  for (std::size_t i = 0; i < n; ++i) order_[i] = static_cast<std::uint32_t>(i);
  const std::span<std::uint32_t> order = order_.first(n);
  // Insertion sort by score, stable (ties keep the lower row first): std::stable_sort may take
  // heap memory, and n is one round's cohort.
  for (std::size_t i = 1; i < n; ++i) {
    const std::uint32_t row = order[i];
    std::size_t at = i;
    while (at > 0 && scores_[order[at - 1]] > scores_[row]) {
      order[at] = order[at - 1];
      --at;
    }
    order[at] = row;
  }
  const std::size_t selected = n > f ? n - f : 1;
  // The mean of the selected rows, summed in row order so the result does not depend on the
  // sort's order among equal scores.
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(selected));
  std::fill(aggregate_.begin(), aggregate_.end(), 0.0f);
  for (std::size_t k = 0; k < selected; ++k) {
    const std::span<const float> u = Row(order[k]);
    for (std::size_t j = 0; j < dimension_; ++j) aggregate_[j] += u[j];
  }
  const float count = static_cast<float>(selected);
  for (float& value : aggregate_) value /= count;
}

void RobustAggregator::CenteredClipping() {
  const std::size_t n = count_;
  const double radius = static_cast<double>(params_.clip_radius);
  for (std::uint32_t iteration = 0; iteration < params_.clip_iterations; ++iteration) {
    std::fill(step_.begin(), step_.end(), 0.0f);
    for (std::size_t i = 0; i < n; ++i) {
      const std::span<const float> u = Row(i);
      double squared = 0.0;
      for (std::size_t j = 0; j < dimension_; ++j) {
        const double difference = static_cast<double>(u[j]) - static_cast<double>(aggregate_[j]);
        squared += difference * difference;
      }
      const double norm = std::sqrt(squared);
      const float weight = norm > radius ? static_cast<float>(radius / norm) : 1.0f;
      for (std::size_t j = 0; j < dimension_; ++j) step_[j] += weight * (u[j] - aggregate_[j]);
    }
    const float count = static_cast<float>(n);
    for (std::size_t j = 0; j < dimension_; ++j) aggregate_[j] += step_[j] / count;
  }
}

std::span<const float> RobustAggregator::center() const {
  if (params_.rule != RobustRule::kCenteredClipping) return {};
  return aggregate_;
}

Status RobustAggregator::RestoreCenter(std::span<const std::byte> saved) {
  if (saved.size() != center().size_bytes()) {
    return Status::InvalidArgument("the saved centre has the wrong size");
  }
  for (std::size_t at = 0; at < saved.size(); at += sizeof(float)) {
    float value = 0.0f;
    std::memcpy(&value, saved.data() + at, sizeof(value));
    if (!std::isfinite(value)) {
      return Status::InvalidArgument("the saved centre holds a NaN or an infinity");
    }
  }
  if (!saved.empty()) std::memcpy(aggregate_.data(), saved.data(), saved.size());
  return Status::Ok();
}

}  // namespace edgesgd
