#pragma once

// The result of a host call (Linux: the TCP and simulation libraries, the data-file readers, the
// command line): a value, or a HostError — the Status that says what kind of failure it was, with
// the line for people that names what its static reason cannot (a file, a line, a flag, a peer).
// Host only: it holds a std::string. Core, wire and protocol report a plain Status.
//
//   HostResult<Config> ReadConfig(const std::string& path) {
//     if (...) return HostError(Status::NotFound(), "cannot open " + path);
//     return config;
//   }
//   HostResult<Config> config = ReadConfig(path);
//   if (!config.ok()) return std::move(config).error().WithContext("--config");
//   // what the caller's caller prints: "--config: cannot open /etc/run.conf"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "edgesgd/core/check.h"
#include "edgesgd/core/status.h"

namespace edgesgd {

namespace internal {
// What an ok HostResult's message() refers to.
inline const std::string& NoMessage() {
  static const std::string empty;
  return empty;
}
}  // namespace internal

class HostError {
 public:
  // `status` is not ok; `message` is the whole line for people ("corrupt: label 12 of sample 1
  // in /d/labels.npy is outside 0-9").
  HostError(Status status, std::string message) : status_(status), message_(std::move(message)) {
    EDGESGD_CHECK(!status.ok());
  }
  // A failure whose reason says it all: the message is status.reason().
  explicit HostError(Status status) : HostError(status, status.reason()) {}

  Status status() const { return status_; }
  const std::string& message() const { return message_; }

  // Prefixes what the caller was doing: "reading keys.txt: " + message().
  HostError WithContext(std::string_view context) && {
    message_.insert(0, std::string(context) + ": ");
    return std::move(*this);
  }

 private:
  Status status_;
  std::string message_;
};

// A T, or the HostError explaining why there is none. HostResult<> (void) is ok or an error.
template <typename T = void>
class [[nodiscard]] HostResult {
 public:
  HostResult(T value) : outcome_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  HostResult(HostError error) : outcome_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return outcome_.index() == 0; }

  // kOk, or the error's status.
  Status status() const { return ok() ? Status::Ok() : error().status(); }
  // Empty when ok, else the error's whole line.
  const std::string& message() const { return ok() ? internal::NoMessage() : error().message(); }

  const T& value() const& {
    EDGESGD_CHECK(ok());
    return std::get<0>(outcome_);
  }
  T& value() & {
    EDGESGD_CHECK(ok());
    return std::get<0>(outcome_);
  }
  T&& value() && {
    EDGESGD_CHECK(ok());
    return std::get<0>(std::move(outcome_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const HostError& error() const& {
    EDGESGD_CHECK(!ok());
    return std::get<1>(outcome_);
  }
  HostError&& error() && {
    EDGESGD_CHECK(!ok());
    return std::get<1>(std::move(outcome_));
  }

  HostResult WithContext(std::string_view context) && {
    if (ok()) return std::move(*this);
    return std::move(*this).error().WithContext(context);
  }

 private:
  std::variant<T, HostError> outcome_;
};

template <>
class [[nodiscard]] HostResult<void> {
 public:
  HostResult() = default;
  HostResult(HostError error) : error_(std::move(error)) {}  // NOLINT: implicit

  bool ok() const { return !error_.has_value(); }
  Status status() const { return ok() ? Status::Ok() : error_->status(); }
  const std::string& message() const { return ok() ? internal::NoMessage() : error_->message(); }

  const HostError& error() const& {
    EDGESGD_CHECK(!ok());
    return *error_;
  }
  HostError&& error() && {
    EDGESGD_CHECK(!ok());
    return std::move(*error_);
  }

  HostResult WithContext(std::string_view context) && {
    if (ok()) return std::move(*this);
    return std::move(*this).error().WithContext(context);
  }

 private:
  std::optional<HostError> error_;
};

}  // namespace edgesgd

// Returns the error of `expr` (a HostResult) from the enclosing function when it is not ok.
#define EDGESGD_HOST_TRY(expr)                                                  \
  do {                                                                          \
    if (auto edgesgd_host_try_result = (expr); !edgesgd_host_try_result.ok()) { \
      return std::move(edgesgd_host_try_result).error();                        \
    }                                                                           \
  } while (false)
