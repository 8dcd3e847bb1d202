#pragma once

#include <cstdint>

namespace edgesgd {

// The reason an operation failed. One byte, so a Status fits in a register and costs nothing to
// return on a microcontroller.
enum class StatusCode : std::uint8_t {
  kOk = 0,
  kCancelled,
  kInvalidArgument,     // a parameter is out of its documented domain
  kOutOfRange,          // an index, size or value lies outside what the receiver allows
  kResourceExhausted,   // a caller-provided buffer or arena is too small
  kFailedPrecondition,  // the object is in the wrong state for the call (e.g. arena sealed)
  kDataLoss,            // received bytes are malformed or corrupt
  kUnavailable,         // a peer or resource is gone
  kDeadlineExceeded,
  kUnauthenticated,
  kNotFound,
  kAlreadyExists,
  kInternal,
};

// Outcome of an operation: kOk or the reason it failed. Status never carries a message: the edge
// of the program (CLI, log) pairs the code with context it knows.
class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  constexpr explicit Status(StatusCode code) : code_(code) {}

  static constexpr Status Ok() { return Status(); }
  static constexpr Status InvalidArgument() { return Status(StatusCode::kInvalidArgument); }
  static constexpr Status OutOfRange() { return Status(StatusCode::kOutOfRange); }
  static constexpr Status ResourceExhausted() { return Status(StatusCode::kResourceExhausted); }
  static constexpr Status FailedPrecondition() { return Status(StatusCode::kFailedPrecondition); }
  static constexpr Status DataLoss() { return Status(StatusCode::kDataLoss); }
  static constexpr Status Unavailable() { return Status(StatusCode::kUnavailable); }
  static constexpr Status DeadlineExceeded() { return Status(StatusCode::kDeadlineExceeded); }
  static constexpr Status Unauthenticated() { return Status(StatusCode::kUnauthenticated); }
  static constexpr Status NotFound() { return Status(StatusCode::kNotFound); }
  static constexpr Status Internal() { return Status(StatusCode::kInternal); }

  constexpr bool ok() const { return code_ == StatusCode::kOk; }
  constexpr StatusCode code() const { return code_; }

  // Upper-snake name of the code, e.g. "INVALID_ARGUMENT". Never null.
  const char* str() const;

  friend constexpr bool operator==(Status a, Status b) { return a.code_ == b.code_; }

 private:
  StatusCode code_ = StatusCode::kOk;
};

static_assert(sizeof(Status) == 1);

namespace internal {
constexpr Status ToStatus(Status status) { return status; }
}  // namespace internal

}  // namespace edgesgd

#define EDGESGD_INTERNAL_CONCAT_IMPL(a, b) a##b
#define EDGESGD_INTERNAL_CONCAT(a, b) EDGESGD_INTERNAL_CONCAT_IMPL(a, b)

// Returns early from the enclosing function when `expr` (a Status or Result) is not ok.
#define EDGESGD_TRY(expr)                                                   \
  do {                                                                      \
    if (const ::edgesgd::Status edgesgd_try_status =                        \
            ::edgesgd::internal::ToStatus(expr);                            \
        !edgesgd_try_status.ok()) {                                         \
      return edgesgd_try_status;                                            \
    }                                                                       \
  } while (false)

// `lhs = value of expr`, or return its Status early. `lhs` may declare a variable.
#define EDGESGD_TRY_ASSIGN(lhs, expr) \
  EDGESGD_INTERNAL_TRY_ASSIGN_IMPL(EDGESGD_INTERNAL_CONCAT(edgesgd_try_result_, __LINE__), lhs, expr)
#define EDGESGD_INTERNAL_TRY_ASSIGN_IMPL(result, lhs, expr) \
  auto result = (expr);                                    \
  if (!result.ok()) {                                      \
    return result.status();                                \
  }                                                        \
  lhs = static_cast<decltype(result)&&>(result).value()
