#pragma once

#include <cstdint>

namespace edgesgd {

// The kind of failure; one byte.
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

// `text`, or nullptr where Status texts are dropped (EDGESGD_STATUS_REASONS=0, below). Status
// keeps its reason through it, and so does a table that holds a literal until it becomes a
// Status: the text is then not stored in flash either.
constexpr const char* KeptReason(const char* text) {
#if defined(EDGESGD_STATUS_REASONS) && !EDGESGD_STATUS_REASONS
  (void)text;
  return nullptr;
#else
  return text;
#endif
}

// Outcome of an operation: kOk, or the reason it failed as a code and a one-line static text
// ("k ratio must be in (0, 1]"). The text is a string literal (never freed, never copied), so a
// Status stays two words, needs no heap and is returned in registers. Every layer — core, wire,
// protocol, transport and the command line — reports through it: the place that checks a value
// says why it refused it, and callers only add context (a flag name, a file path).
//
// Builds short of flash define EDGESGD_STATUS_REASONS=0: the texts are dropped at compile time
// and reason() falls back to the code's name.
class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  constexpr explicit Status(StatusCode code, const char* reason = nullptr)
      : reason_(KeptReason(reason)), code_(code) {}

  static constexpr Status Ok() { return Status(); }
  static constexpr Status Cancelled(const char* why = nullptr) {
    return Status(StatusCode::kCancelled, why);
  }
  static constexpr Status InvalidArgument(const char* why = nullptr) {
    return Status(StatusCode::kInvalidArgument, why);
  }
  static constexpr Status OutOfRange(const char* why = nullptr) {
    return Status(StatusCode::kOutOfRange, why);
  }
  static constexpr Status ResourceExhausted(const char* why = nullptr) {
    return Status(StatusCode::kResourceExhausted, why);
  }
  static constexpr Status FailedPrecondition(const char* why = nullptr) {
    return Status(StatusCode::kFailedPrecondition, why);
  }
  static constexpr Status DataLoss(const char* why = nullptr) {
    return Status(StatusCode::kDataLoss, why);
  }
  static constexpr Status Unavailable(const char* why = nullptr) {
    return Status(StatusCode::kUnavailable, why);
  }
  static constexpr Status DeadlineExceeded(const char* why = nullptr) {
    return Status(StatusCode::kDeadlineExceeded, why);
  }
  static constexpr Status Unauthenticated(const char* why = nullptr) {
    return Status(StatusCode::kUnauthenticated, why);
  }
  static constexpr Status NotFound(const char* why = nullptr) {
    return Status(StatusCode::kNotFound, why);
  }
  static constexpr Status AlreadyExists(const char* why = nullptr) {
    return Status(StatusCode::kAlreadyExists, why);
  }
  static constexpr Status Internal(const char* why = nullptr) {
    return Status(StatusCode::kInternal, why);
  }

  constexpr bool ok() const { return code_ == StatusCode::kOk; }
  constexpr StatusCode code() const { return code_; }

  // Upper-snake name of the code, e.g. "INVALID_ARGUMENT". Never null.
  const char* str() const;

  // Why the operation failed, in one line: the text given where the failure was found, or the
  // code's name when there is none ("ok" for kOk). Never null.
  const char* reason() const;

  // Whether a text was given (false under EDGESGD_STATUS_REASONS=0).
  constexpr bool has_reason() const { return reason_ != nullptr; }

  // Equal codes; the texts are explanations, not part of the outcome.
  friend constexpr bool operator==(Status a, Status b) { return a.code_ == b.code_; }

 private:
  const char* reason_ = nullptr;
  StatusCode code_ = StatusCode::kOk;
};

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
