#include "edgesgd/serial/session_link.h"

#include <algorithm>
#include <type_traits>

#include "edgesgd/wire/wire_format.h"

namespace edgesgd::serial {

// The link's payloads go straight to OnFrame, which decodes them in place.
static_assert(Link::kPayloadAlignment % wire::kFrameAlignment == 0);
static_assert(std::is_same_v<TimeNs, protocol::TimeNs> && kNever == protocol::kNever);

Status SessionLink::Init(std::span<std::byte> memory, std::size_t max_frame_bytes,
                         protocol::Session& session, protocol::PeerId remote,
                         const LinkOptions& options) {
  EDGESGD_TRY(link_.Init(memory, max_frame_bytes, options));
  session_ = &session;
  remote_ = remote;
  max_frame_bytes_ = max_frame_bytes;
  peer_restarts_seen_ = link_.counters().peer_restarts;
  return Status::Ok();
}

void SessionLink::Start(TimeNs now, std::uint32_t nonce) {
  if (session_ == nullptr) return;
  nonce_ = nonce;
  link_.Start(now, nonce);
  session_->Start(now);
  Pump(now);
}

void SessionLink::Receive(std::span<const std::byte> bytes, TimeNs now) {
  if (session_ == nullptr) return;
  do {
    const FrameDecoder::Step step = link_.Receive(bytes);
    bytes = bytes.subspan(step.consumed);
    // A restart the link saw in these bytes came before the payload that ended them.
    NotePeerRestarts(now);
    if (step.delivered) {
      ++counters_.frames_received;
      session_->OnFrame(remote_, step.frame, now);
    }
    // Each acknowledgement received may free the link for the session's next frame.
    Pump(now);
  } while (!bytes.empty());
}

void SessionLink::Written(std::size_t bytes, TimeNs now) {
  if (session_ == nullptr) return;
  link_.Written(bytes);
  Pump(now);
}

TimeNs SessionLink::NextWakeup() const {
  if (session_ == nullptr) return kNever;
  return std::min(link_.NextWakeup(), session_->NextWakeup());
}

void SessionLink::OnTimer(TimeNs now) {
  if (session_ == nullptr) return;
  if (link_.NextWakeup() <= now) {
    link_.OnTimer(now);
    RestartIfFailed(now);
  }
  if (session_->NextWakeup() <= now) session_->OnTimer(now);
  Pump(now);
}

bool SessionLink::Finished() const {
  return session_ != nullptr && session_->Finished() && link_.Idle();
}

void SessionLink::Pump(TimeNs now) {
  // Polled only while the link can take the frame: until then it waits in the session.
  protocol::OutgoingFrame frame;
  while (link_.CanSend() && session_->PollFrame(frame)) {
    if (frame.to != remote_) {
      ++counters_.frames_misrouted;
    } else if (frame.bytes.size() > max_frame_bytes_) {
      ++counters_.frames_too_large;
    } else if (link_.Send(frame.bytes, now).ok()) {
      ++counters_.frames_sent;
    }
  }
}

void SessionLink::NotePeerRestarts(TimeNs now) {
  while (peer_restarts_seen_ < link_.counters().peer_restarts) {
    ++peer_restarts_seen_;
    ++counters_.peer_restarts;
    session_->OnPeerLost(remote_, now);
  }
}

void SessionLink::RestartIfFailed(TimeNs now) {
  if (link_.state() != LinkState::kFailed) return;
  ++counters_.link_restarts;
  // Whatever was in flight is gone and the far end may have dropped this device meanwhile: the
  // session recovers (a worker joins again) once the new handshake is done.
  session_->OnPeerLost(remote_, now);
  link_.Start(now, ++nonce_);
}

}  // namespace edgesgd::serial
