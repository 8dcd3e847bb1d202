#pragma once

// A parameter-server worker over TCP, ready to embed: a WorkerSession with the memory the device
// offers, dialling its server through a SessionDriver, on the caller's event loop or its own. The
// caller brings the model's gradient (WorkerOptions::gradient and user) and its data: the run's
// configuration arrives in the server's Welcome, and on_welcome hears of it before the first
// gradient is asked for, so a worker that draws its data shard by id and worker count builds
// it then.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "edgesgd/core/status.h"
#include "edgesgd/platform/result.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/serial/link.h"
#include "edgesgd/tcp/serial_line.h"
#include "edgesgd/tcp/session_driver.h"
#include "edgesgd/tcp/session_node.h"

namespace edgesgd::tcp {

struct WorkerSettings {
  Endpoint server;
  // The session's options: device_id (1..workers; required over TCP, where it names the
  // connection), the caller's gradient function and user pointer, the codecs the device can run
  // (every known codec when left null), samples per step, the Join retry and heartbeat
  // intervals.
  protocol::WorkerOptions worker;
  // Memory the device offers the run (advertised in its Join: a server whose run needs more
  // refuses the worker). Reserved up front, touched only as the session takes it.
  std::size_t memory_bytes = std::size_t{256} << 20;
  // Called once, after the Welcome and before the first gradient, with the run's configuration
  // and worker count. A non-ok Status stops the worker (status() returns it). Optional.
  std::function<Status(const protocol::RunConfig& config, std::uint32_t workers)> on_welcome;
  // The connection policy: timeouts, send queue, give-up time, frame authentication (auth_keys
  // must hold this device's key), TLS, signals, log name. The Worker sets dial (the server) and
  // auth_device (device_id) itself.
  DriverOptions network;
  // Set: the server is reached through this serial line instead of TCP (`server`, dial and TLS
  // are then unused). A gateway on the line's other end (`edgesgd bridge`, tcp::SerialBridge)
  // relays the frames. With network.auth_keys the line itself is authenticated with this
  // device's key, which the gateway holds too; without, it carries plain frames.
  std::optional<SerialLine> serial;
  // The serial link's largest frame (its two buffers are about twice this) and its timers.
  std::size_t serial_max_frame_bytes = std::size_t{4} << 20;
  serial::LinkOptions serial_link;
};

namespace internal {
class SerialSession;
}  // namespace internal

// Start's `on_done` runs once the server ended the run (Leave), refused the worker, on_welcome
// refused the run, or a signal, the give-up time or Stop ended it.
class Worker : public SessionNode<protocol::WorkerSession> {
 public:
  Worker();
  explicit Worker(asio::io_context& io);
  ~Worker();

  // Takes the memory budget, initialises the session and resolves the server's address. Once.
  // Reads `settings` (auth_keys must outlive the Worker). Errors, the message a line for
  // people: kFailedPrecondition (opened before), kInvalidArgument (no device id, or what
  // WorkerSession::Init refuses: no gradient, zero intervals, a budget below
  // WorkerSession::InitArenaBytes()) and those of SessionDriver::Open.
  HostResult<> Open(const WorkerSettings& settings);

  // kOk while the worker runs and once the server ended the run; otherwise why the worker
  // stopped short: on_welcome's refusal (its Status), the server's refusal (the session's
  // status; session().failure_reason() has the server's text), kUnavailable when it gave up
  // without a connection (DriverOptions::give_up_ns), kCancelled after a signal or Stop().
  Status status() const;

 private:
  // The session's gradient callback: the caller's, once on_welcome accepted the run.
  static Status Gradient(void* user, std::span<const float> point, std::uint32_t round,
                         std::uint32_t local_step, std::span<float> gradient);
  // After every call into the session: on_welcome once the Welcome configured it.
  void AfterSessionCall();

  protocol::GradientFunction gradient_ = nullptr;
  void* user_ = nullptr;
  std::function<Status(const protocol::RunConfig&, std::uint32_t)> on_welcome_;
  bool ready_ = false;  // on_welcome accepted the run
  Status status_;
  std::unique_ptr<internal::SerialSession> serial_;  // WorkerSettings::serial
};

}  // namespace edgesgd::tcp
