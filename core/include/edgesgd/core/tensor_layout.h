#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/core/result.h"

namespace edgesgd {

// Most tensors one model may have. Layouts are small values (no heap), so this is a fixed cap.
inline constexpr std::size_t kMaxTensors = 64;

// The tensors of a model laid end to end over one flat parameter vector. Codecs apply per tensor
// (each gets its own top-k budget, block, sign scale or bucket run), since tensors differ in
// scale. Dimensions fit in 32 bits because indices travel as u32.
class TensorLayout {
 public:
  constexpr TensorLayout() = default;

  // One tensor of `dimension` coordinates. Errors: kInvalidArgument if dimension is 0 or does
  // not fit in 32 bits.
  static constexpr Result<TensorLayout> Single(std::size_t dimension) {
    const std::uint64_t sizes[1] = {dimension};
    return FromSizes(std::span<const std::uint64_t>(sizes));
  }

  // Tensors of the given sizes, in order. Errors: kInvalidArgument if there are none, more than
  // kMaxTensors, a zero size, or a total above 2^32 - 1.
  static constexpr Result<TensorLayout> FromSizes(std::span<const std::uint64_t> sizes) {
    if (sizes.empty() || sizes.size() > kMaxTensors) {
      return Status::InvalidArgument("a layout has 1..64 tensors");
    }
    TensorLayout layout;
    std::uint64_t total = 0;
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      if (sizes[t] == 0 || sizes[t] > kMaxDimension - total) {
        return Status::InvalidArgument("a tensor is empty or the layout exceeds 2^32 - 1 floats");
      }
      layout.offsets_[t] = static_cast<std::uint32_t>(total);
      total += sizes[t];
    }
    layout.count_ = sizes.size();
    layout.offsets_[layout.count_] = static_cast<std::uint32_t>(total);
    return layout;
  }

  constexpr std::size_t tensor_count() const { return count_; }
  constexpr std::size_t dimension() const { return offsets_[count_]; }
  constexpr std::size_t offset(std::size_t tensor) const { return offsets_[tensor]; }
  constexpr std::size_t size(std::size_t tensor) const {
    return offsets_[tensor + 1] - offsets_[tensor];
  }

  // The coordinates of `tensor` within a flat vector laid out by this layout.
  template <typename T>
  constexpr std::span<T> Slice(std::span<T> flat, std::size_t tensor) const {
    return flat.subspan(offset(tensor), size(tensor));
  }

  friend constexpr bool operator==(const TensorLayout& a, const TensorLayout& b) {
    if (a.count_ != b.count_) return false;
    for (std::size_t t = 0; t <= a.count_; ++t) {
      if (a.offsets_[t] != b.offsets_[t]) return false;
    }
    return true;
  }

 private:
  static constexpr std::uint64_t kMaxDimension = 0xFFFFFFFFull;

  std::array<std::uint32_t, kMaxTensors + 1> offsets_{};
  std::size_t count_ = 0;
};

}  // namespace edgesgd
