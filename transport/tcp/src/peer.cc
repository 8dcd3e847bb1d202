#include "edgesgd/tcp/peer.h"

#include <algorithm>

#include "session_events.h"

namespace edgesgd::tcp {

HostResult<> Peer::Open(const PeerSettings& settings) {
  DriverOptions options = settings.network;
  options.listen = settings.listen;
  options.dial.clear();
  for (const protocol::PeerId neighbour : settings.config.mixing.neighbour_ids()) {
    const auto target = std::find_if(
        settings.neighbours.begin(), settings.neighbours.end(),
        [neighbour](const DialTarget& candidate) { return candidate.peer == neighbour; });
    if (target == settings.neighbours.end()) {
      return HostError(Status::InvalidArgument("a neighbour has no address"),
                       "neighbour " + std::to_string(neighbour) + " has no address");
    }
    options.dial.push_back(*target);
  }
  EDGESGD_HOST_TRY(TakeMemory(protocol::GossipPeerSession::ArenaBytes(settings.config)));
  if (const Status init = session_.Init(arena(), settings.config, settings.gossip); !init.ok()) {
    return HostError(init);
  }
  options.max_frame_bytes = protocol::GossipPeerSession::MaxFrameBytes(settings.config);
  // Neighbours open with a model-sized exchange, but an authenticating dialler's first record
  // is its empty key confirmation: until that proves the key, a connection holds a control
  // frame's bytes. Without keys nothing can be proved, and the exchange is the first frame.
  if (options.auth_keys != nullptr) options.max_first_frame_bytes = wire::kMaxControlFrameBytes;
  options.auth_device = settings.config.mixing.peer;
  EDGESGD_HOST_TRY(driver_.Open(options));
  const char* log_name = options.log_name;
  driver_.SetAfterSessionCall([this, log_name] {
    internal::DrainSessionEvents<protocol::GossipRoundEvent, protocol::GossipRejectEvent>(
        session_, on_round_, on_reject_, log_name, protocol::GossipRejectReasonName);
  });
  return {};
}

}  // namespace edgesgd::tcp
