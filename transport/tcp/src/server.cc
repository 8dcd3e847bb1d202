#include "edgesgd/tcp/server.h"

#include <optional>
#include <utility>
#include <vector>

#include "arena_storage.h"
#include "checkpoint_file.h"
#include "edgesgd/platform/log.h"
#include "session_events.h"

namespace edgesgd::tcp {

class Server::Impl {
 public:
  Impl() = default;
  explicit Impl(asio::io_context& io) : driver_(io) {}

  Status Open(const ServerSettings& settings, std::string& detail);
  // After every call into the session: the checkpoint, then the callbacks.
  void AfterSessionCall();

  SessionDriver driver_;
  protocol::ServerSession session_;
  RoundCallback on_round_;
  RejectCallback on_reject_;
  Status status_;
  std::string detail_;

 private:
  // Writes the committed state to the checkpoint file. Errors as WriteFileAtomically's, or
  // SaveState's.
  Status SaveCheckpoint();

  std::optional<internal::ArenaStorage> arena_;
  std::vector<std::byte> state_;  // SaveState's bytes
  std::string checkpoint_;
  std::uint32_t checkpoint_every_ = 1;
  std::uint32_t saved_round_ = 0;
  const char* log_name_ = "";
};

Status Server::Impl::Open(const ServerSettings& settings, std::string& detail) {
  if (arena_) {  // the session keeps pointers into it
    detail = "already open";
    return Status::FailedPrecondition("already open");
  }
  if (settings.resume && settings.checkpoint.empty()) {
    detail = "resuming needs a checkpoint file";
    return Status::InvalidArgument("resuming needs a checkpoint file");
  }
  if (settings.checkpoint_every == 0) {
    detail = "checkpoints come every 1 or more rounds";
    return Status::InvalidArgument("checkpoints come every 1 or more rounds");
  }
  arena_.emplace(protocol::ServerSession::ArenaBytes(settings.run, settings.server));
  if (const Status init =
          session_.Init(arena_->arena(), settings.run, settings.server, settings.initial_model);
      !init.ok()) {
    detail = init.reason();
    return init;
  }
  checkpoint_ = settings.checkpoint;
  checkpoint_every_ = settings.checkpoint_every;
  log_name_ = settings.network.log_name;
  state_.resize(protocol::ServerSession::StateBytes(settings.run));
  if (settings.resume) {
    std::vector<std::byte> saved;
    EDGESGD_TRY(internal::ReadWholeFile(checkpoint_, saved, detail));
    if (const Status restored = session_.RestoreState(saved); !restored.ok()) {
      detail = "cannot resume from checkpoint " + checkpoint_ + ": " + restored.reason();
      return restored;
    }
    platform::Log(platform::LogLevel::kInfo, "%s: resuming at round %u of %u from %s", log_name_,
                  session_.round() + 1, settings.run.rounds, checkpoint_.c_str());
  }
  saved_round_ = session_.round();

  DriverOptions options = settings.network;
  options.listen = settings.listen;
  options.dial.clear();
  options.max_peer_id = settings.server.workers;
  options.max_frame_bytes = protocol::UpdateFrameBytes(settings.run);
  options.auth_device = 0;  // accepts only: each connection authenticates as its worker
  EDGESGD_TRY(driver_.Open(options, detail));
  driver_.SetAfterSessionCall([this] { AfterSessionCall(); });
  return Status::Ok();
}

void Server::Impl::AfterSessionCall() {
  // Durable before anything of the next round leaves: the driver sends the session's frames
  // only after this returns.
  const std::uint32_t round = session_.round();
  if (!checkpoint_.empty() && status_.ok() && round != saved_round_ &&
      (round % checkpoint_every_ == 0 || session_.Finished())) {
    status_ = SaveCheckpoint();
    if (!status_.ok()) driver_.RequestStop();
    saved_round_ = round;
  }
  internal::DrainSessionEvents<protocol::RoundEvent, protocol::RejectEvent>(
      session_, on_round_, on_reject_, log_name_, protocol::RejectReasonName);
}

Status Server::Impl::SaveCheckpoint() {
  const Result<std::size_t> bytes = session_.SaveState(state_);
  if (!bytes.ok()) {
    detail_ = "cannot encode the checkpoint";
    return bytes.status();
  }
  return internal::WriteFileAtomically(checkpoint_, std::span(state_).first(bytes.value()),
                                       detail_);
}

Server::Server() : impl_(std::make_unique<Impl>()) {}
Server::Server(asio::io_context& io) : impl_(std::make_unique<Impl>(io)) {}
Server::~Server() = default;

Status Server::Open(const ServerSettings& settings, std::string& detail) {
  return impl_->Open(settings, detail);
}
void Server::OnRound(RoundCallback callback) { impl_->on_round_ = std::move(callback); }
void Server::OnReject(RejectCallback callback) { impl_->on_reject_ = std::move(callback); }
void Server::Start(SessionDriver::DoneCallback on_done) {
  impl_->driver_.Start(impl_->session_, std::move(on_done));
}
DriverStop Server::Run() { return impl_->driver_.Run(impl_->session_); }
void Server::Stop() { impl_->driver_.RequestStop(); }
std::uint16_t Server::listen_port() const { return impl_->driver_.listen_port(); }
Status Server::status() const { return impl_->status_; }
const std::string& Server::detail() const { return impl_->detail_; }
const protocol::ServerSession& Server::session() const { return impl_->session_; }
const DriverCounters& Server::network_counters() const { return impl_->driver_.counters(); }

}  // namespace edgesgd::tcp
