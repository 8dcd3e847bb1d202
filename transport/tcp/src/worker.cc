#include "edgesgd/tcp/worker.h"

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/wire/wire_format.h"
#include "noise_key.h"
#include "serial_session.h"

namespace edgesgd::tcp {
namespace {

// A round's secure aggregation keys come from the operating system (getrandom).
Status OperatingSystemEntropy(void*, std::uint32_t, std::span<std::byte> out) {
  return platform::FillRandomBytes(out);
}

}  // namespace

Worker::Worker() = default;
Worker::Worker(asio::io_context& io) : SessionNode(io) {}
Worker::~Worker() = default;

HostResult<> Worker::Open(const WorkerSettings& settings) {
  const std::uint32_t device = settings.worker.device_id;
  if (device == 0 || device == wire::kUnassignedDevice) {
    return HostError(Status::InvalidArgument("a worker over TCP needs its device id"));
  }
  EDGESGD_HOST_TRY(TakeMemory(settings.memory_bytes));
  gradient_ = settings.worker.gradient;
  user_ = settings.worker.user;
  on_welcome_ = settings.on_welcome;
  protocol::WorkerOptions options = settings.worker;
  if (options.add_noise == nullptr) options.add_noise = &AddNoiseShare;
  if (options.noise_key.empty()) {
    HostResult<SecretKey> key = DrawNoiseKey();
    if (!key.ok()) return std::move(key).error();
    options.noise_key = *key;
  }
  if (options.secure_entropy == nullptr) options.secure_entropy = &OperatingSystemEntropy;
  options.gradient = gradient_ != nullptr ? &Gradient : nullptr;  // none: the session refuses
  options.user = this;
  if (options.codecs == nullptr) options.codecs = &AllCodecs();
  if (const Status init = session_.Init(arena(), options); !init.ok()) return HostError(init);
  DriverOptions network = settings.network;
  network.listen.reset();
  if (settings.serial) {
    // No connections: the driver brings the loop, the timer, signals and the after-call hook.
    network.dial.clear();
    network.auth_keys = nullptr;
    network.tls.reset();
    EDGESGD_HOST_TRY(driver_.Open(network));
    serial_ = std::make_unique<internal::SerialSession>(driver_.io(), driver_, session_);
    EDGESGD_HOST_TRY(serial_->Open(*settings.serial, settings.serial_max_frame_bytes,
                                   settings.serial_link, settings.network.auth_keys, device));
    wrapper_ = serial_.get();
  } else {
    network.dial.assign(1, DialTarget{protocol::kServerPeer, settings.server});
    network.auth_device = device;
    // Until the Welcome, the server sends control frames only: a server cannot make the worker
    // take a large buffer before the worker has accepted the run (see AfterSessionCall).
    network.max_frame_bytes = wire::kMaxControlFrameBytes;
    EDGESGD_HOST_TRY(driver_.Open(network));
  }
  driver_.SetAfterSessionCall([this] { AfterSessionCall(); });
  return {};
}

Status Worker::Gradient(void* user, std::span<const float> point, std::uint32_t round,
                        std::uint32_t local_step, std::span<float> gradient) {
  const Worker& self = *static_cast<const Worker*>(user);
  if (!self.ready_) return Status::FailedPrecondition("the worker has not accepted the run");
  return self.gradient_(self.user_, point, round, local_step, gradient);
}

Status Worker::status() const {
  if (!status_.ok()) return status_;
  if (!session_.status().ok()) return session_.status();
  if (!stop_) return Status::Ok();
  switch (*stop_) {
    case DriverStop::kFinished:
      return Status::Ok();
    case DriverStop::kGaveUp:
      return Status::Unavailable("gave up: no connection to the server within the give-up time");
    case DriverStop::kSignal:
      return Status::Cancelled("stopped by a signal before the run ended");
    case DriverStop::kStopped:
      return Status::Cancelled("stopped by Stop() before the run ended");
  }
  return Status::Internal("unknown driver stop");
}

void Worker::AfterSessionCall() {
  if (!session_.configured()) return;
  // The Welcome the session accepted (within the worker's memory) sizes the largest frame.
  driver_.SetMaxFrameBytes(
      protocol::WorkerReceiveFrameBytes(session_.config(), session_.workers()));
  if (ready_ || !status_.ok()) return;
  status_ = on_welcome_ ? on_welcome_(session_.config(), session_.workers()) : Status::Ok();
  if (status_.ok()) {
    ready_ = true;
  } else {
    driver_.RequestStop();
  }
}

}  // namespace edgesgd::tcp
