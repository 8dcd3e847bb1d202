#pragma once

#include <type_traits>
#include <utility>

#include "edgesgd/core/check.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

// A value or the Status explaining why there is none. T must be default-constructible (spans,
// sizes and small structs in practice); no heap, no exceptions.
template <typename T>
class [[nodiscard]] Result {
  static_assert(std::is_default_constructible_v<T>);

 public:
  constexpr Result(const T& value) : value_(value) {}  // NOLINT: implicit by design
  constexpr Result(T&& value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  // A failed result. Constructing one from an ok Status is a programmer error.
  constexpr Result(Status status) : status_(status) {  // NOLINT: implicit by design
    EDGESGD_CHECK(!status.ok());
  }

  constexpr bool ok() const { return status_.ok(); }
  constexpr Status status() const { return status_; }

  constexpr const T& value() const& {
    EDGESGD_CHECK(ok());
    return value_;
  }
  constexpr T& value() & {
    EDGESGD_CHECK(ok());
    return value_;
  }
  constexpr T&& value() && {
    EDGESGD_CHECK(ok());
    return std::move(value_);
  }
  constexpr const T& operator*() const& { return value(); }
  constexpr const T* operator->() const { return &value(); }

 private:
  T value_{};
  Status status_;
};

namespace internal {
template <typename T>
constexpr Status ToStatus(const Result<T>& result) {
  return result.status();
}
}  // namespace internal

}  // namespace edgesgd
