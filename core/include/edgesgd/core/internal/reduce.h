#pragma once

// Float reductions with a fixed summation order. A plain left-to-right float sum is slow (one
// add latency per element) and a vectorised one differs between SSE2, AVX2, NEON and scalar.
// Here element i always goes to lane i % kLanes and lanes are combined in a fixed tree, so the
// compiler may vectorise the lanes however it likes and the result is the same bits on every
// architecture (with -ffp-contract=off, which the core is built with).

#include <array>
#include <bit>
#include <cstdint>
#include <cstddef>
#include <span>

namespace edgesgd::internal {

inline constexpr std::size_t kReduceLanes = 8;

// The fixed tree that folds the lanes into one sum. SIMD paths that accumulate lanes in
// registers finish with this, so they match LaneSum bit for bit.
inline float CombineLanes(const std::array<float, kReduceLanes>& lanes) {
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
         ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

template <typename Transform>
inline float LaneSum(std::span<const float> x, Transform transform) {
  std::array<float, kReduceLanes> lanes{};
  const std::size_t full = x.size() - x.size() % kReduceLanes;
  for (std::size_t i = 0; i < full; i += kReduceLanes) {
    for (std::size_t lane = 0; lane < kReduceLanes; ++lane) {
      lanes[lane] += transform(x[i + lane]);
    }
  }
  for (std::size_t i = full; i < x.size(); ++i) lanes[i - full] += transform(x[i]);
  return CombineLanes(lanes);
}

// Sum of |x_i|. |v| by clearing the sign bit: branch-free, and the same value as a comparison
// would give (NaN stays NaN).
inline float SumAbs(std::span<const float> x) {
  return LaneSum(x, [](float v) {
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0x7FFFFFFFu);
  });
}

// Sum of x_i^2.
inline float SumSquares(std::span<const float> x) {
  return LaneSum(x, [](float v) { return v * v; });
}

// Sum of x_i.
inline float Sum(std::span<const float> x) {
  return LaneSum(x, [](float v) { return v; });
}

}  // namespace edgesgd::internal
