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
  if (max_frame_bytes == 0) return Status::InvalidArgument("the largest frame is 0 bytes");
  EDGESGD_TRY(link_.Init(memory, LinkPayloadBytes(max_frame_bytes), options));
  session_ = &session;
  remote_ = remote;
  max_frame_bytes_ = max_frame_bytes;
  peer_restarts_seen_ = link_.counters().peer_restarts;
  return Status::Ok();
}

Status SessionLink::EnableAuthentication(auth::ConnectionAuth& auth, const auth::KeyRing& keys,
                                         std::uint32_t device,
                                         std::span<const std::byte, auth::kNonceBytes> boot_nonce) {
  if (session_ == nullptr || link_.state() != LinkState::kIdle) {
    return Status::FailedPrecondition("authentication is enabled after Init and before Start");
  }
  if (keys.Find(device) == nullptr) return Status::NotFound("no key for the device");
  if (auth.max_payload_bytes() < max_frame_bytes_) {
    return Status::InvalidArgument("the authentication's record limit is below the link's frames");
  }
  auth_ = &auth;
  keys_ = &keys;
  device_ = device;
  std::copy(boot_nonce.begin(), boot_nonce.end(), boot_nonce_.begin());
  return Status::Ok();
}

void SessionLink::Start(TimeNs now, std::uint32_t nonce) {
  if (session_ == nullptr) return;
  nonce_ = nonce;
  auth_retry_at_ = kNever;
  ResetAuthentication();
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
    if (step.delivered && !Deliver(step.frame, now)) {
      // A wrong key fails every time: retrying at once would flood the line and the logs.
      ++counters_.auth_rejected;
      auth_retry_at_ = now + kAuthRetryNs;
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
  return std::min({link_.NextWakeup(), session_->NextWakeup(), auth_retry_at_});
}

void SessionLink::OnTimer(TimeNs now) {
  if (session_ == nullptr) return;
  if (link_.NextWakeup() <= now) {
    link_.OnTimer(now);
    RestartIfFailed(now);
  }
  if (auth_retry_at_ <= now) RestartLink(now);
  if (session_->NextWakeup() <= now) session_->OnTimer(now);
  Pump(now);
}

bool SessionLink::Finished() const {
  return session_ != nullptr && session_->Finished() && link_.Idle();
}

bool SessionLink::Deliver(std::span<const std::byte> payload, TimeNs now) {
  if (auth_retry_at_ != kNever) return true;  // the failed connection's, ignored until the retry
  if (auth_ == nullptr) {
    ++counters_.frames_received;
    session_->OnFrame(remote_, payload, now);
    return true;
  }
  if (!auth_->established()) {
    // Before the gateway's hello, anything else is out of place.
    return !hello_due_ && auth_->AcceptResponderHello(payload).ok();
  }
  const Result<std::span<const std::byte>> frame = auth_->Open(payload);
  if (!frame.ok()) return false;
  ++counters_.frames_received;
  session_->OnFrame(remote_, *frame, now);
  return true;
}

void SessionLink::ResetAuthentication() {
  if (auth_ == nullptr) return;
  auth_->Reset();
  hello_due_ = true;
}

void SessionLink::Pump(TimeNs now) {
  if (auth_retry_at_ != kNever) return;
  if (auth_ != nullptr && hello_due_ && link_.CanSend()) {
    // This connection's nonce: the boot's, plus the connection count in its last four bytes.
    std::array<std::byte, auth::kNonceBytes> nonce = boot_nonce_;
    ++connections_;
    for (std::size_t i = 0; i < 4; ++i) {
      nonce[nonce.size() - 1 - i] ^= static_cast<std::byte>((connections_ >> (8 * i)) & 0xFFu);
    }
    std::array<std::byte, auth::kInitiatorHelloBytes> hello{};
    if (auth_->StartInitiator(*keys_, device_, nonce, hello).ok() && link_.Send(hello, now).ok()) {
      hello_due_ = false;
    }
    auth::Zeroize(nonce);
  }
  // Polled only while the link can take the frame: until then it waits in the session.
  protocol::OutgoingFrame frame;
  while (authenticated() && link_.CanSend() && session_->PollFrame(frame)) {
    if (frame.to != remote_) {
      ++counters_.frames_misrouted;
    } else if (frame.bytes.size() > max_frame_bytes_) {
      ++counters_.frames_too_large;
    } else if (SendFrame(link_, auth_, frame.bytes, now)) {
      ++counters_.frames_sent;
    }
  }
}

bool SendFrame(Link& link, auth::ConnectionAuth* auth, std::span<const std::byte> frame,
               TimeNs now) {
  if (auth == nullptr) return link.Send(frame, now).ok();
  std::array<std::byte, auth::kRecordHeaderBytes> header{};
  std::array<std::byte, auth::kTagBytes> tag{};
  return auth->SealDetached(frame, header, tag).ok() && link.Send({header, frame, tag}, now).ok();
}

void SessionLink::NotePeerRestarts(TimeNs now) {
  while (peer_restarts_seen_ < link_.counters().peer_restarts) {
    ++peer_restarts_seen_;
    ++counters_.peer_restarts;
    ResetAuthentication();
    session_->OnPeerLost(remote_, now);
  }
}

void SessionLink::RestartIfFailed(TimeNs now) {
  if (link_.state() != LinkState::kFailed) return;
  ++counters_.link_restarts;
  RestartLink(now);
}

void SessionLink::RestartLink(TimeNs now) {
  auth_retry_at_ = kNever;
  // Whatever was in flight is gone and the far end may have dropped this device meanwhile: the
  // session recovers (a worker joins again) once the new handshake is done.
  session_->OnPeerLost(remote_, now);
  ResetAuthentication();
  link_.Start(now, ++nonce_);
}

}  // namespace edgesgd::serial
