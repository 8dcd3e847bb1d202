#include "edgesgd/core/quant_schedule.h"

#include <cmath>

#include "edgesgd/core/internal/reduce.h"

namespace edgesgd {

Result<std::uint32_t> DqBits(const QuantScheduleParams& params, float gradient_norm,
                             std::uint32_t round, std::uint32_t rounds) {
  QuantScheduleParams dq = params;
  dq.kind = QuantScheduleKind::kDq;
  EDGESGD_TRY(ValidateQuantScheduleParams(dq));
  if (rounds == 0) return Status::InvalidArgument();
  if (!(gradient_norm >= 0.0f && gradient_norm <= std::numeric_limits<float>::max())) {
    return Status::InvalidArgument();
  }
  const std::uint32_t remaining = round < rounds ? rounds - 1 - round : 0;
  // Double precision: rho^(remaining / 2) underflows float long before it stops mattering.
  const double scaled = static_cast<double>(gradient_norm) *
                        std::pow(static_cast<double>(params.dq_rho), 0.5 * remaining) *
                        static_cast<double>(params.dq_k);
  // Past kMaxQsgdLevels every width is clipped to at most 16 bits anyway; comparing first keeps
  // the conversion below in range.
  if (!(scaled <= static_cast<double>(kMaxQsgdLevels))) return params.bits_max;
  const auto levels = static_cast<std::uint32_t>(std::ceil(scaled));
  const std::uint32_t bits = QsgdBitsPerCoordinate(levels);  // 1 + ceil(log2(s + 1))
  if (bits < params.bits_min) return params.bits_min;
  if (bits > params.bits_max) return params.bits_max;
  return bits;
}

Status QuantSchedule::Init(const QuantScheduleParams& params, std::uint32_t codec_levels,
                           std::uint32_t rounds) {
  EDGESGD_TRY(ValidateQuantScheduleParams(params));
  if (rounds == 0) return Status::InvalidArgument();
  std::uint32_t max_levels = codec_levels;
  if (params.kind == QuantScheduleKind::kFixed) {
    if (codec_levels < 1 || codec_levels > kMaxQsgdLevels) return Status::InvalidArgument();
  } else {
    EDGESGD_TRY_ASSIGN(max_levels, QsgdLevelsForBits(params.bits_max));
  }
  params_ = params;
  codec_levels_ = codec_levels;
  rounds_ = rounds;
  max_levels_ = max_levels;
  return Status::Ok();
}

Result<std::uint32_t> QuantSchedule::Levels(std::uint32_t round, float gradient_norm) const {
  if (!initialized()) return Status::FailedPrecondition();
  if (params_.kind == QuantScheduleKind::kFixed) return codec_levels_;
  EDGESGD_TRY_ASSIGN(const std::uint32_t bits, DqBits(params_, gradient_norm, round, rounds_));
  return QsgdLevelsForBits(bits);
}

Result<std::uint32_t> QuantSchedule::LevelsForGradient(std::uint32_t round,
                                                       std::span<const float> gradient) const {
  if (!initialized()) return Status::FailedPrecondition();
  if (params_.kind == QuantScheduleKind::kFixed) return codec_levels_;
  return Levels(round, std::sqrt(internal::SumSquares(gradient)));
}

bool QuantSchedule::Accepts(std::uint32_t levels) const {
  if (!initialized()) return false;
  if (params_.kind == QuantScheduleKind::kFixed) return levels == codec_levels_;
  for (std::uint32_t bits = params_.bits_min; bits <= params_.bits_max; ++bits) {
    const Result<std::uint32_t> allowed = QsgdLevelsForBits(bits);
    if (allowed.ok() && allowed.value() == levels) return true;
  }
  return false;
}

}  // namespace edgesgd
