#include "edgesgd/tcp/server.h"

#include "checkpoint_file.h"
#include "edgesgd/platform/log.h"
#include "noise_key.h"
#include "session_events.h"

namespace edgesgd::tcp {

HostResult<> Server::Open(const ServerSettings& settings) {
  if (settings.resume && settings.checkpoint.empty()) {
    return HostError(Status::InvalidArgument("resuming needs a checkpoint file"));
  }
  if (settings.checkpoint_every == 0) {
    return HostError(Status::InvalidArgument("checkpoints come every 1 or more rounds"));
  }
  if (IsPrivate(settings.run.privacy) && !settings.checkpoint.empty() &&
      settings.checkpoint_every != 1) {
    return HostError(Status::InvalidArgument(
        "a private run checkpoints every round: rounds re-run after a resume from an older "
        "checkpoint would spend privacy its account does not hold"));
  }
  if (settings.codecs == nullptr) return HostError(Status::InvalidArgument("no codec registry"));
  EDGESGD_HOST_TRY(TakeMemory(protocol::ServerSession::ArenaBytes(settings.run, settings.server)));
  protocol::ServerOptions session_options = settings.server;
  if (session_options.noise_key.empty()) {
    HostResult<SecretKey> key = DrawNoiseKey();
    if (!key.ok()) return std::move(key).error();
    session_options.noise_key = *key;
  }
  if (const Status init = session_.Init(arena(), *settings.codecs, settings.run, session_options,
                                        settings.initial_model);
      !init.ok()) {
    return HostError(init);
  }
  checkpoint_ = settings.checkpoint;
  checkpoint_every_ = settings.checkpoint_every;
  log_name_ = settings.network.log_name;
  state_.resize(session_.StateBytes());
  if (settings.resume) {
    HostResult<std::vector<std::byte>> saved = internal::ReadWholeFile(checkpoint_);
    if (!saved.ok()) return std::move(saved).error();
    if (const Status restored = session_.RestoreState(*saved, &resume_differs_in_);
        !restored.ok()) {
      std::string message =
          "cannot resume from checkpoint " + checkpoint_ + ": " + restored.reason();
      if (!resume_differs_in_.empty()) {
        message += " (it differs in " + std::string(resume_differs_in_) + ")";
      }
      return HostError(restored, std::move(message));
    }
    platform::Log(platform::LogLevel::kInfo, "%s: resuming at round %u of %u from %s", log_name_,
                  session_.round() + 1, settings.run.rounds, checkpoint_.c_str());
  }
  saved_round_ = session_.round();

  DriverOptions options = settings.network;
  options.listen = settings.listen;
  options.dial.clear();
  options.max_peer_id = settings.server.workers;
  options.max_frame_bytes =
      protocol::ServerReceiveFrameBytes(settings.run, settings.server.workers);
  options.auth_device = 0;  // accepts only: each connection authenticates as its worker
  // A worker opens with a Join: nothing larger before a connection has proved its device.
  options.max_first_frame_bytes = wire::kMaxControlFrameBytes;
  EDGESGD_HOST_TRY(driver_.Open(options));
  driver_.SetAfterSessionCall([this] { AfterSessionCall(); });
  return {};
}

void Server::AfterSessionCall() {
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

HostResult<> Server::SaveCheckpoint() {
  const Result<std::size_t> bytes = session_.SaveState(state_);
  if (!bytes.ok()) return HostError(bytes.status(), "cannot encode the checkpoint");
  return internal::WriteFileAtomically(checkpoint_, std::span(state_).first(bytes.value()));
}

}  // namespace edgesgd::tcp
