#pragma once

// Byzantine-robust aggregation of a round's compressed updates (docs/algorithms.md, robust
// aggregation). Where MeanAggregator decodes every update into one running sum, a robust rule
// needs the updates side by side: each is decoded into its own row of an n x d matrix, and the
// round's aggregate is computed from the rows.
//
//   kMedian             coordinate-wise median (the mean of the two middle values for even n)
//   kTrimmedMean        per coordinate, the mean of the values left after dropping the b largest
//                       and b smallest, b = min(f, (n - 1) / 2)
//   kMultiKrum          score_i = sum of the squared distances from u_i to its n - f - 2 nearest
//                       other updates (at least 1); the mean of the n - f updates with the lowest
//                       scores (ties: lower row first)   (Blanchard et al. 2017)
//   kCenteredClipping   L times: v += (1/n) sum_i (u_i - v) min(1, tau / |u_i - v|), starting
//                       from the previous round's aggregate (0 in the first round)
//                       (Karimireddy, He and Jaggi 2021)
//
// Memory (StateBytes, all at Init): n x d floats of rows, d floats of aggregate (the centre v of
// centered clipping, kept across rounds), and the rule's scratch: n floats of one coordinate's
// values for median and trimmed mean, n x n + n doubles and n indices for multi-Krum, d floats
// of step for centered clipping; plus the codec's decode scratch.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd {

enum class RobustRule : std::uint8_t {
  kNone = 0,  // the plain mean (MeanAggregator)
  kMedian = 1,
  kTrimmedMean = 2,
  kMultiKrum = 3,
  kCenteredClipping = 4,
};

// Lower-snake names ("trimmed_mean"), as the CLI spells them; "unknown" outside the enum.
constexpr std::string_view RobustRuleName(RobustRule rule) {
  switch (rule) {
    case RobustRule::kNone:
      return "none";
    case RobustRule::kMedian:
      return "median";
    case RobustRule::kTrimmedMean:
      return "trimmed_mean";
    case RobustRule::kMultiKrum:
      return "multi_krum";
    case RobustRule::kCenteredClipping:
      return "centered_clipping";
  }
  return "unknown";
}

inline constexpr std::uint32_t kMaxClipIterations = 100;

struct RobustParams {
  RobustRule rule = RobustRule::kNone;
  // f: faulty updates per round the rule is sized for (trimmed mean, multi-Krum).
  std::uint32_t byzantine = 1;
  float clip_radius = 1.0f;           // tau > 0 (centered clipping)
  std::uint32_t clip_iterations = 1;  // L in 1..kMaxClipIterations (centered clipping)

  friend constexpr bool operator==(const RobustParams&, const RobustParams&) = default;
};

// Checks the fields `params.rule` reads. Errors: kInvalidArgument with the reason.
constexpr Status ValidateRobustParams(const RobustParams& params) {
  switch (params.rule) {
    case RobustRule::kNone:
    case RobustRule::kMedian:
    case RobustRule::kTrimmedMean:
    case RobustRule::kMultiKrum:
      return Status::Ok();
    case RobustRule::kCenteredClipping:
      if (!(params.clip_radius > 0.0f &&
            params.clip_radius <= std::numeric_limits<float>::max())) {
        return Status::InvalidArgument("the clipping radius tau must be positive and finite");
      }
      if (params.clip_iterations < 1 || params.clip_iterations > kMaxClipIterations) {
        return Status::InvalidArgument("centered clipping's iterations L must be in 1..100");
      }
      return Status::Ok();
  }
  return Status::InvalidArgument("unknown robust aggregation rule");
}

// `params` with the fields its rule does not read at their defaults.
constexpr RobustParams NormalizedRobustParams(const RobustParams& params) {
  RobustParams out;
  out.rule = params.rule;
  if (params.rule == RobustRule::kTrimmedMean || params.rule == RobustRule::kMultiKrum) {
    out.byzantine = params.byzantine;
  }
  if (params.rule == RobustRule::kCenteredClipping) {
    out.clip_radius = params.clip_radius;
    out.clip_iterations = params.clip_iterations;
  }
  return out;
}

class RobustAggregator {
 public:
  // Exact arena bytes Init takes for rounds of at most `max_updates` updates; 0 for bad
  // parameters, kNone, an empty layout or no updates.
  static constexpr std::size_t StateBytes(const TensorLayout& layout, const CodecParams& codec,
                                          const RobustParams& params,
                                          std::uint32_t max_updates) {
    if (layout.tensor_count() == 0 || max_updates == 0 || params.rule == RobustRule::kNone ||
        !ValidateRobustParams(params).ok() || !EncodedShape(codec, layout).ok()) {
      return 0;
    }
    const std::size_t d = layout.dimension();
    const std::size_t n = max_updates;
    std::size_t scratch = 0;
    switch (params.rule) {
      case RobustRule::kMedian:
      case RobustRule::kTrimmedMean:
        scratch = ArenaBytesFor<float>(n);
        break;
      case RobustRule::kMultiKrum:
        scratch = ArenaBytesFor<double>(n * n) + ArenaBytesFor<double>(n) +
                  ArenaBytesFor<std::uint32_t>(n);
        break;
      default:
        scratch = ArenaBytesFor<float>(d);
        break;
    }
    return ArenaBytesFor<float>(n * d) + ArenaBytesFor<float>(d) + scratch +
           ArenaBytes(CodecScratchBytes(codec, layout));
  }

  // Takes all memory from `arena`; decodes with the operations of `codecs` (which must outlive
  // it). Errors: kInvalidArgument (empty layout, bad parameters, kNone, no updates),
  // kFailedPrecondition (codec not registered, arena sealed), kResourceExhausted (arena too
  // small; nothing is taken then).
  Status Init(Arena& arena, const CodecRegistry& codecs, const TensorLayout& layout,
              const CodecParams& codec, const RobustParams& params, std::uint32_t max_updates);

  // Forgets the round's updates (centered clipping keeps its centre). Does not allocate.
  void Reset() { count_ = 0; }

  // Decodes `payload` (with `params`: the Init codec, per-frame parameters allowed, scratch no
  // larger) into the next row. Errors: kFailedPrecondition before Init or with all rows taken;
  // kInvalidArgument for parameters of another codec; kDataLoss for a malformed payload
  // (nothing is kept). Does not allocate.
  Status Add(const CodecParams& params, const PayloadView& payload, const CodecContext& context);

  // The rule's aggregate of the round's rows (d floats, valid until the next Aggregate or
  // RestoreCenter). Centered clipping moves its centre to the result. Errors:
  // kFailedPrecondition before Init or with no updates. Does not allocate.
  Result<std::span<const float>> Aggregate();

  std::uint32_t count() const { return count_; }

  // Centered clipping's centre, what a checkpoint must keep (empty for the other rules), and
  // its restore from such bytes at any alignment (kInvalidArgument for a wrong size or a value
  // that is not finite, with nothing changed).
  std::span<const float> center() const;
  Status RestoreCenter(std::span<const std::byte> saved);

 private:
  std::span<const float> Row(std::size_t i) const {
    return std::span<const float>(rows_).subspan(i * dimension_, dimension_);
  }
  void Median();
  void TrimmedMean();
  void MultiKrum();
  void CenteredClipping();

  const CodecOps* ops_ = nullptr;
  TensorLayout layout_;
  CodecParams codec_;
  RobustParams params_;
  std::size_t dimension_ = 0;
  std::uint32_t capacity_ = 0;
  std::uint32_t count_ = 0;
  std::span<float> rows_;
  std::span<float> aggregate_;
  std::span<float> column_;            // median, trimmed mean
  std::span<double> distances_;        // multi-Krum
  std::span<double> scores_;           // multi-Krum
  std::span<std::uint32_t> order_;     // multi-Krum
  std::span<float> step_;              // centered clipping
  std::span<std::byte> codec_scratch_;
};

}  // namespace edgesgd
