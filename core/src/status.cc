#include "edgesgd/core/status.h"

namespace edgesgd {

const char* Status::str() const {
  switch (code_) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

const char* Status::reason() const {
  if (reason_ != nullptr) return reason_;
  return ok() ? "ok" : str();
}

}  // namespace edgesgd
