#include "edgesgd/tcp/peer.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "arena_storage.h"
#include "session_events.h"

namespace edgesgd::tcp {

class Peer::Impl {
 public:
  Impl() = default;
  explicit Impl(asio::io_context& io) : driver_(io) {}

  Status Open(const PeerSettings& settings, std::string& detail);

  SessionDriver driver_;
  protocol::GossipPeerSession session_;
  RoundCallback on_round_;
  RejectCallback on_reject_;

 private:
  std::optional<internal::ArenaStorage> arena_;
};

Status Peer::Impl::Open(const PeerSettings& settings, std::string& detail) {
  if (arena_) {  // the session keeps pointers into it
    detail = "already open";
    return Status::FailedPrecondition("already open");
  }
  DriverOptions options = settings.network;
  options.listen = settings.listen;
  options.dial.clear();
  for (const protocol::PeerId neighbour : settings.config.mixing.neighbour_ids()) {
    const auto target = std::find_if(
        settings.neighbours.begin(), settings.neighbours.end(),
        [neighbour](const DialTarget& candidate) { return candidate.peer == neighbour; });
    if (target == settings.neighbours.end()) {
      detail = "neighbour " + std::to_string(neighbour) + " has no address";
      return Status::InvalidArgument("a neighbour has no address");
    }
    options.dial.push_back(*target);
  }
  arena_.emplace(protocol::GossipPeerSession::ArenaBytes(settings.config));
  if (const Status init = session_.Init(arena_->arena(), settings.config, settings.gossip);
      !init.ok()) {
    detail = init.reason();
    return init;
  }
  options.max_frame_bytes = protocol::GossipPeerSession::MaxFrameBytes(settings.config);
  options.auth_device = settings.config.mixing.peer;
  EDGESGD_TRY(driver_.Open(options, detail));
  const char* log_name = options.log_name;
  driver_.SetAfterSessionCall([this, log_name] {
    internal::DrainSessionEvents<protocol::GossipRoundEvent, protocol::GossipRejectEvent>(
        session_, on_round_, on_reject_, log_name, protocol::GossipRejectReasonName);
  });
  return Status::Ok();
}

Peer::Peer() : impl_(std::make_unique<Impl>()) {}
Peer::Peer(asio::io_context& io) : impl_(std::make_unique<Impl>(io)) {}
Peer::~Peer() = default;

Status Peer::Open(const PeerSettings& settings, std::string& detail) {
  return impl_->Open(settings, detail);
}
void Peer::OnRound(RoundCallback callback) { impl_->on_round_ = std::move(callback); }
void Peer::OnReject(RejectCallback callback) { impl_->on_reject_ = std::move(callback); }
void Peer::Start(SessionDriver::DoneCallback on_done) {
  impl_->driver_.Start(impl_->session_, std::move(on_done));
}
DriverStop Peer::Run() { return impl_->driver_.Run(impl_->session_); }
void Peer::Stop() { impl_->driver_.RequestStop(); }
std::uint16_t Peer::listen_port() const { return impl_->driver_.listen_port(); }
const protocol::GossipPeerSession& Peer::session() const { return impl_->session_; }
const DriverCounters& Peer::network_counters() const { return impl_->driver_.counters(); }

}  // namespace edgesgd::tcp
