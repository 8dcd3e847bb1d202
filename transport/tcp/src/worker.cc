#include "edgesgd/tcp/worker.h"

#include <optional>
#include <utility>

#include "arena_storage.h"
#include "edgesgd/wire/wire_format.h"

namespace edgesgd::tcp {

class Worker::Impl {
 public:
  Impl() = default;
  explicit Impl(asio::io_context& io) : driver_(io) {}

  Status Open(const WorkerSettings& settings, std::string& detail);

  SessionDriver driver_;
  protocol::WorkerSession session_;
  Status status_;

 private:
  // The session's gradient callback: the caller's, once on_welcome accepted the run.
  static Status Gradient(void* user, std::span<const float> point, std::uint32_t round,
                         std::uint32_t local_step, std::span<float> gradient);
  // After every call into the session: on_welcome once the Welcome configured it.
  void AfterSessionCall();

  std::optional<internal::ArenaStorage> arena_;
  protocol::GradientFunction gradient_ = nullptr;
  void* user_ = nullptr;
  std::function<Status(const protocol::RunConfig&, std::uint32_t)> on_welcome_;
  bool ready_ = false;  // on_welcome accepted the run
};

Status Worker::Impl::Open(const WorkerSettings& settings, std::string& detail) {
  if (arena_) {  // the session keeps pointers into it
    detail = "already open";
    return Status::FailedPrecondition("already open");
  }
  const std::uint32_t device = settings.worker.device_id;
  if (device == 0 || device == wire::kUnassignedDevice) {
    detail = "a worker over TCP needs its device id";
    return Status::InvalidArgument("a worker over TCP needs its device id");
  }
  gradient_ = settings.worker.gradient;
  user_ = settings.worker.user;
  on_welcome_ = settings.on_welcome;
  protocol::WorkerOptions options = settings.worker;
  options.gradient = gradient_ != nullptr ? &Gradient : nullptr;  // none: the session refuses
  options.user = this;
  arena_.emplace(settings.memory_bytes);
  if (const Status init = session_.Init(arena_->arena(), options); !init.ok()) {
    detail = init.reason();
    return init;
  }
  DriverOptions network = settings.network;
  network.listen.reset();
  network.dial.assign(1, DialTarget{protocol::kServerPeer, settings.server});
  network.auth_device = device;
  EDGESGD_TRY(driver_.Open(network, detail));
  driver_.SetAfterSessionCall([this] { AfterSessionCall(); });
  return Status::Ok();
}

Status Worker::Impl::Gradient(void* user, std::span<const float> point, std::uint32_t round,
                              std::uint32_t local_step, std::span<float> gradient) {
  const Impl& self = *static_cast<const Impl*>(user);
  if (!self.ready_) return Status::FailedPrecondition("the worker has not accepted the run");
  return self.gradient_(self.user_, point, round, local_step, gradient);
}

void Worker::Impl::AfterSessionCall() {
  if (ready_ || !status_.ok() || !session_.configured()) return;
  status_ = on_welcome_ ? on_welcome_(session_.config(), session_.workers()) : Status::Ok();
  if (status_.ok()) {
    ready_ = true;
  } else {
    driver_.RequestStop();
  }
}

Worker::Worker() : impl_(std::make_unique<Impl>()) {}
Worker::Worker(asio::io_context& io) : impl_(std::make_unique<Impl>(io)) {}
Worker::~Worker() = default;

Status Worker::Open(const WorkerSettings& settings, std::string& detail) {
  return impl_->Open(settings, detail);
}
void Worker::Start(SessionDriver::DoneCallback on_done) {
  impl_->driver_.Start(impl_->session_, std::move(on_done));
}
DriverStop Worker::Run() { return impl_->driver_.Run(impl_->session_); }
void Worker::Stop() { impl_->driver_.RequestStop(); }
Status Worker::status() const { return impl_->status_; }
const protocol::WorkerSession& Worker::session() const { return impl_->session_; }
const DriverCounters& Worker::network_counters() const { return impl_->driver_.counters(); }

}  // namespace edgesgd::tcp
