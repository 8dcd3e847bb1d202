#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>

#include "edgesgd/core/result.h"

namespace edgesgd {

enum class CodecKind : std::uint8_t {
  kIdentity = 0,  // dense fp32, 4d bytes
  kTopK,          // k largest |x| per tensor: u32 index + f32 value
  kRandK,         // k shared-seed random coordinates per tensor: values only
  kRandomBlock,   // one contiguous shared-seed block per tensor (wraps): start + values
  kSign,          // 1 bit per coordinate + one scale per tensor
  kQsgd,          // stochastic s-level quantization over buckets: packed levels + bucket norms
  kRegTopK,       // RegTop-k: top_k's payload, coordinates chosen by a posterior-regularised score
};
inline constexpr std::size_t kCodecCount = 7;

// What a sign payload's per-tensor scale is.
enum class SignScale : std::uint8_t {
  kMeanAbs,  // mean |x| of the tensor (EF-signSGD, keeps magnitude for error feedback)
  kUnit,     // 1 (plain signSGD and majority vote)
};

// Whether rand_k rescales kept values by d/k. Error feedback wants the biased form (kNone);
// unbiased estimation without feedback wants kUnbiased.
enum class RandKScaling : std::uint8_t { kNone, kUnbiased };

// Parameters of every codec in one plain struct, so a configuration is a value that can be
// copied, compared and sent in a welcome message; each codec reads only its own fields.
struct CodecParams {
  CodecKind kind = CodecKind::kIdentity;
  // top_k, rand_k: fraction of each tensor's coordinates kept, in (0, 1]; each tensor keeps
  // SparseCount(size, k_ratio) coordinates (at least one).
  float k_ratio = 0.01f;
  RandKScaling rand_k_scaling = RandKScaling::kNone;
  // random_block: each tensor sends max(1, floor(size / block_ratio)) coordinates; >= 1.
  std::uint32_t block_ratio = 64;
  SignScale sign_scale = SignScale::kMeanAbs;
  // qsgd: number of nonzero levels s in 1..kMaxQsgdLevels; a coordinate costs
  // 1 + ceil(log2(s + 1)) bits. QsgdLevelsForBits converts from a bit budget.
  std::uint32_t qsgd_levels = 127;
  // qsgd: coordinates sharing one norm; >= 1. 512 as in the QSGD paper's experiments.
  std::uint32_t qsgd_bucket = 512;
  // reg_top_k (ALGORITHMS.md §3; keeps k_ratio like top_k): the score of coordinate j is
  // tanh(|1 + Delta_j| / mu) * |a_j|. mu > 0 sets how strongly a coordinate whose last aggregate
  // cancelled the worker's own contribution (Delta_j near -1) is held back; 4 is the paper's
  // choice for linear regression, 5 for ResNet-18.
  float reg_top_k_mu = 4.0f;
  // reg_top_k: Delta of a coordinate with no posterior (not sent last round, or no round yet),
  // > 0. Large enough that tanh(|1 + Q| / mu) is 1 in float, so such a coordinate scores |a_j|
  // exactly as in Top-k.
  float reg_top_k_q = 1e8f;

  friend constexpr bool operator==(const CodecParams&, const CodecParams&) = default;
};

// 2^15 - 1: the most levels a 16-bit field (sign + 15 level bits) holds.
inline constexpr std::uint32_t kMaxQsgdLevels = 32767;
inline constexpr std::uint32_t kMinQsgdBits = 2;
inline constexpr std::uint32_t kMaxQsgdBits = 16;

// Coordinates a sparsifier keeps of a tensor of `size`: round(size * ratio), at least 1 and at
// most `size`. Errors: kInvalidArgument unless 0 < ratio <= 1.
constexpr Result<std::size_t> SparseCount(std::size_t size, float ratio) {
  if (!(ratio > 0.0f) || ratio > 1.0f) return Status::InvalidArgument();
  const double exact = static_cast<double>(size) * static_cast<double>(ratio);
  auto count = static_cast<std::size_t>(exact + 0.5);
  if (count < 1) count = 1;
  if (count > size) count = size;
  return count;
}

// Bits one quantized coordinate occupies: a sign bit plus ceil(log2(levels + 1)) level bits.
constexpr std::uint32_t QsgdBitsPerCoordinate(std::uint32_t levels) {
  std::uint32_t level_bits = 0;
  while ((std::uint64_t{1} << level_bits) < std::uint64_t{levels} + 1) ++level_bits;
  return 1 + level_bits;
}

// The largest level count that fits `bits` per coordinate: 2^(bits-1) - 1.
// Errors: kInvalidArgument unless 2 <= bits <= 16 (one bit leaves no room for a level; that
// codec is `sign`).
constexpr Result<std::uint32_t> QsgdLevelsForBits(std::uint32_t bits) {
  if (bits < kMinQsgdBits || bits > kMaxQsgdBits) return Status::InvalidArgument();
  return (std::uint32_t{1} << (bits - 1)) - 1;
}

// reg_top_k's mu: positive and finite (NaN fails).
constexpr bool ValidRegTopKMu(float mu) {
  return mu > 0.0f && mu <= std::numeric_limits<float>::max();
}
// reg_top_k's Q: positive and finite (NaN fails).
constexpr bool ValidRegTopKQ(float q) {
  return q > 0.0f && q <= std::numeric_limits<float>::max();
}

// Checks the fields the codec of `params.kind` reads. Errors: kInvalidArgument.
constexpr Status ValidateCodecParams(const CodecParams& params) {
  switch (params.kind) {
    case CodecKind::kIdentity:
      return Status::Ok();
    case CodecKind::kTopK:
    case CodecKind::kRandK:
      if (!(params.k_ratio > 0.0f) || params.k_ratio > 1.0f) return Status::InvalidArgument();
      return Status::Ok();
    case CodecKind::kRegTopK:
      if (!(params.k_ratio > 0.0f) || params.k_ratio > 1.0f) return Status::InvalidArgument();
      if (!ValidRegTopKMu(params.reg_top_k_mu) || !ValidRegTopKQ(params.reg_top_k_q)) {
        return Status::InvalidArgument();
      }
      return Status::Ok();
    case CodecKind::kRandomBlock:
      return params.block_ratio >= 1 ? Status::Ok() : Status::InvalidArgument();
    case CodecKind::kSign:
      return Status::Ok();
    case CodecKind::kQsgd:
      if (params.qsgd_levels < 1 || params.qsgd_levels > kMaxQsgdLevels) {
        return Status::InvalidArgument();
      }
      return params.qsgd_bucket >= 1 ? Status::Ok() : Status::InvalidArgument();
  }
  return Status::InvalidArgument();
}

// Lower-snake name used by the CLI and the wire ("top_k").
constexpr std::string_view CodecName(CodecKind kind) {
  switch (kind) {
    case CodecKind::kIdentity: return "identity";
    case CodecKind::kTopK: return "top_k";
    case CodecKind::kRandK: return "rand_k";
    case CodecKind::kRandomBlock: return "random_block";
    case CodecKind::kSign: return "sign";
    case CodecKind::kQsgd: return "qsgd";
    case CodecKind::kRegTopK: return "reg_top_k";
  }
  return "unknown";
}

// Inverse of CodecName. Errors: kNotFound for an unknown name.
constexpr Result<CodecKind> ParseCodecKind(std::string_view name) {
  for (std::size_t i = 0; i < kCodecCount; ++i) {
    const auto kind = static_cast<CodecKind>(i);
    if (CodecName(kind) == name) return kind;
  }
  return Status::NotFound();
}

}  // namespace edgesgd
