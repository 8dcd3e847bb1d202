#include "edgesgd/protocol/server_types.h"

#include <cmath>

namespace edgesgd::protocol {

const char* RejectReasonName(RejectReason reason) {
  static constexpr std::array<const char*, kRejectReasonCount> kNames = {
      "malformed",   "unknown_sender",     "late",         "stale",
      "future",      "duplicate",          "not_selected", "wrong_codec",
      "bad_payload", "unexpected_message", "incompatible"};
  const auto index = static_cast<std::size_t>(reason);
  return index < kNames.size() ? kNames[index] : "unknown";
}

Status ValidateServerOptions(const ServerOptions& options) {
  if (options.workers < 1 || options.workers > kMaxWorkers) {
    return Status::InvalidArgument("workers must be in 1..16384");
  }
  if (options.quorum < 1 || options.quorum > options.workers) {
    return Status::InvalidArgument("quorum must be in 1..workers");
  }
  if (options.round_deadline_ns == 0) return Status::InvalidArgument("round deadline must be > 0");
  if (options.liveness_timeout_ns == 0) {
    return Status::InvalidArgument("liveness timeout must be > 0");
  }
  if (options.join_timeout_ns == 0) return Status::InvalidArgument("join timeout must be > 0");
  if (!(options.max_model_norm >= 0.0f) || !std::isfinite(options.max_model_norm)) {
    return Status::InvalidArgument("max model norm must be finite and >= 0 (0: no bound)");
  }
  return Status::Ok();
}

}  // namespace edgesgd::protocol
