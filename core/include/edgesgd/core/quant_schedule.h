#pragma once

// Quantization schedules for the qsgd codec (ALGORITHMS.md §5): which level count s_t a round's
// update is quantized with. A schedule is a strategy chosen by QuantScheduleKind:
//
//   kFixed  every round uses the codec's own qsgd_levels (plain QSGD).
//   kDq     DQ-SGD [reconstructed rule]: from the norm of the round's gradient, the rounds left
//           and the contraction rho = 1 - eta * mu of a strongly convex problem,
//             s_t    = ceil(||g_t|| * rho^((T - 1 - t) / 2) * K)
//             bits_t = 1 + ceil(log2(s_t + 1)), clipped to [bits_min, bits_max]
//           and the round quantizes with the most levels bits_t holds: 2^(bits_t - 1) - 1.
//           Few bits early and while gradients are small, more towards the end, where the
//           quantization error is no longer damped by the remaining contraction.
//
// Who decides: each worker applies the rule to its own gradient. A qsgd payload carries its level
// count (wire QuantizedPayload.levels), so receivers decode every frame with the levels it names
// and only check that the schedule could have produced them (Accepts); nothing extra travels and
// no round waits for a broadcast s_t. Buffers are sized once for max_levels(): a round never
// needs more. Nothing here allocates.

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "edgesgd/core/codec_params.h"
#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

enum class QuantScheduleKind : std::uint8_t {
  kFixed = 0,  // the codec's qsgd_levels every round
  kDq = 1,     // DQ-SGD: levels from the gradient norm and the rounds left
};
inline constexpr std::size_t kQuantScheduleCount = 2;

struct QuantScheduleParams {
  QuantScheduleKind kind = QuantScheduleKind::kFixed;
  // kDq: the clip range of bits_t, 2 <= bits_min <= bits_max <= 16 (kMinQsgdBits..kMaxQsgdBits).
  std::uint32_t bits_min = 2;
  std::uint32_t bits_max = 8;
  // kDq: K > 0, finite. In the analysis K = sqrt(T L eta^2 d / (2 n eps_Q)); in practice one
  // tuned constant.
  float dq_k = 20.0f;
  // kDq: the contraction rho in (0, 1]; 1 makes the level count depend on the norm only.
  float dq_rho = 0.99f;

  friend constexpr bool operator==(const QuantScheduleParams&, const QuantScheduleParams&) =
      default;
};

// Checks the fields `params.kind` reads (kFixed reads none). NaN fails every range check.
// Errors: kInvalidArgument.
constexpr Status ValidateQuantScheduleParams(const QuantScheduleParams& params) {
  switch (params.kind) {
    case QuantScheduleKind::kFixed:
      return Status::Ok();
    case QuantScheduleKind::kDq:
      if (params.bits_min < kMinQsgdBits || params.bits_max > kMaxQsgdBits ||
          params.bits_min > params.bits_max) {
        return Status::InvalidArgument();
      }
      if (!(params.dq_k > 0.0f && params.dq_k <= std::numeric_limits<float>::max())) {
        return Status::InvalidArgument();
      }
      if (!(params.dq_rho > 0.0f && params.dq_rho <= 1.0f)) return Status::InvalidArgument();
      return Status::Ok();
  }
  return Status::InvalidArgument();
}

// Lower-case name used by the CLI ("fixed", "dq").
constexpr std::string_view QuantScheduleName(QuantScheduleKind kind) {
  switch (kind) {
    case QuantScheduleKind::kFixed: return "fixed";
    case QuantScheduleKind::kDq: return "dq";
  }
  return "unknown";
}

// DQ-SGD's bits_t for a gradient of norm `gradient_norm` in round `round` of `rounds` (T >= 1;
// a round >= T counts as the last), clipped to [bits_min, bits_max]. A level count too large to
// represent clips to bits_max. Reads only its arguments; does not allocate.
// Errors: kInvalidArgument for invalid kDq parameters (ValidateQuantScheduleParams, whatever
// `params.kind` says), rounds == 0, or a norm that is negative or not finite.
Result<std::uint32_t> DqBits(const QuantScheduleParams& params, float gradient_norm,
                             std::uint32_t round, std::uint32_t rounds);

// A run's schedule: the parameters, the codec's fixed level count and the run's length, checked
// once at Init; afterwards Levels() answers every round. Plain value, no buffers.
class QuantSchedule {
 public:
  // `codec_levels` is the codec's qsgd_levels (what kFixed uses; 1..kMaxQsgdLevels) and
  // `rounds` the run's T >= 1. Errors: kInvalidArgument for invalid parameters.
  Status Init(const QuantScheduleParams& params, std::uint32_t codec_levels,
              std::uint32_t rounds);

  // The level count of round `round` for a gradient of norm `gradient_norm` (read by kDq only).
  // Does not allocate. Errors: kFailedPrecondition before Init; kInvalidArgument (kDq) for a
  // norm that is negative or not finite.
  Result<std::uint32_t> Levels(std::uint32_t round, float gradient_norm) const;

  // The same for a gradient given as a vector: its Euclidean norm (summed in the fixed lane
  // order of the codecs) goes into Levels. kFixed does not read `gradient`.
  Result<std::uint32_t> LevelsForGradient(std::uint32_t round,
                                          std::span<const float> gradient) const;

  // The most levels any round uses: what payload and frame buffers are sized for. 0 before Init.
  std::uint32_t max_levels() const { return max_levels_; }

  // Whether a received payload's level count is one this schedule produces (kFixed: the codec's;
  // kDq: 2^(b-1) - 1 for some b in [bits_min, bits_max]). Receivers reject anything else.
  bool Accepts(std::uint32_t levels) const;

  const QuantScheduleParams& params() const { return params_; }
  bool initialized() const { return max_levels_ != 0; }

 private:
  QuantScheduleParams params_;
  std::uint32_t codec_levels_ = 0;
  std::uint32_t rounds_ = 0;
  std::uint32_t max_levels_ = 0;
};

}  // namespace edgesgd
