#pragma once

// A parameter-server run inside one process over real loopback TCP: the server's driver on the
// calling thread, every worker's driver on a thread of its own. For benchmarks and tests that
// want the socket path without process management (each process of a real deployment runs one
// SessionDriver instead).

#include <functional>
#include <span>
#include <string>

#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/server_session.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::tcp {

struct LoopbackOptions {
  // When set, every connection is authenticated (worker i as device i + 1; the ring must hold
  // those keys).
  const auth::KeyRing* keys = nullptr;
  // DriverOptions' socket settings, on every connection at both ends.
  std::size_t socket_send_buffer_bytes = 0;
  std::size_t receive_low_watermark_bytes = kDefaultReceiveLowWatermarkBytes;
};

struct LoopbackResult {
  DriverStop server_stop = DriverStop::kStopped;
  DriverCounters server_counters;
};

// Runs `server` and `workers` (initialized, not started; worker i must have device id i + 1)
// until the server's driver returns, then joins the worker threads (they end when the server
// sends Leave or goes away). `after_server_call` is the server driver's SetAfterSessionCall hook.
// Errors: those of SessionDriver::Open (no loopback, no free port).
HostResult<LoopbackResult> RunOnLoopback(protocol::ServerSession& server,
                                         std::span<protocol::WorkerSession* const> workers,
                                         std::function<void()> after_server_call,
                                         const LoopbackOptions& options = {});

}  // namespace edgesgd::tcp
