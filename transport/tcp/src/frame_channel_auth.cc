#include "frame_channel.h"

#include <array>

#include "edgesgd/platform/log.h"
#include "edgesgd/platform/random_bytes.h"

// A connection's authentication (auth/connection_auth.h): the hellos, the initiator's key
// confirmation, sealing its records, and the rejection of what fails to authenticate.
namespace edgesgd::tcp::internal {

bool FrameChannel::FreshNonce(std::span<std::byte, auth::kNonceBytes> nonce) {
  if (platform::FillRandomBytes(nonce).ok()) return true;
  platform::Log(platform::LogLevel::kError, "%s: no random bytes for a nonce: closing",
                options_.log_name);
  Close(CloseReason::kUnauthenticated);
  return false;
}

bool FrameChannel::StartHandshake() {
  auth_.Reset();
  expected_ = dialled ? auth::kResponderHelloBytes : auth::kInitiatorHelloBytes;
  if (!dialled) return true;  // the responder speaks second
  std::array<std::byte, auth::kNonceBytes> nonce;
  if (!FreshNonce(nonce)) return false;
  if (!auth_
           .StartInitiator(*options_.auth_keys, options_.auth_device, nonce,
                           std::span(hello_out_).first<auth::kInitiatorHelloBytes>())
           .ok()) {
    platform::Log(platform::LogLevel::kError, "%s: no key for device %u: closing",
                  options_.log_name, options_.auth_device);
    Close(CloseReason::kUnauthenticated);
    return false;
  }
  WriteHandshake(auth::kInitiatorHelloBytes);
  return true;
}

bool FrameChannel::OnHello() {
  const std::span<const std::byte> hello(receive_bytes(), received_);
  if (dialled) {
    if (!auth_.AcceptResponderHello(hello).ok()) return RejectUnauthenticated("hello");
    confirmation_owed_ = true;
  } else {
    std::array<std::byte, auth::kNonceBytes> nonce;
    if (!FreshNonce(nonce)) return false;
    if (!auth_.StartResponder(*options_.auth_keys, hello, nonce, hello_out_).ok()) {
      return RejectUnauthenticated("hello");
    }
    WriteHandshake(auth::kResponderHelloBytes);
  }
  received_ = 0;
  expected_ = auth::kRecordHeaderBytes;
  established_ = true;
  if ((queued_ > 0 || confirmation_owed_) && !writing_) WriteFront();
  return true;
}

void FrameChannel::WriteConfirmation() {
  confirmation_owed_ = false;
  // hello_out_ is free: the initiator's hello has been written (this runs only when no write is
  // under way).
  constexpr std::size_t kHeader = auth::kRecordHeaderBytes;
  const Status sealed =
      auth_.SealDetached({}, std::span(hello_out_).first<kHeader>(),
                         std::span(hello_out_).subspan<kHeader, auth::kTagBytes>());
  if (!sealed.ok()) {
    platform::Log(platform::LogLevel::kError, "%s: cannot seal the key confirmation (%s): closing",
                  options_.log_name, sealed.str());
    Close(CloseReason::kUnauthenticated);
    return;
  }
  WriteHandshake(kHeader + auth::kTagBytes);
}

bool FrameChannel::RejectUnauthenticated(const char* what) {
  ++counters_.auth_rejected;
  const std::uint32_t device = bound ? peer : auth_.device();
  platform::Log(platform::LogLevel::kWarning, "%s: %s from %s %u rejected (%s): closing",
                options_.log_name, what, bound ? "peer" : "device",
                device == auth::kNoDevice ? 0u : device,
                auth::RejectReasonName(auth_.last_reject()));
  Close(CloseReason::kUnauthenticated);
  return false;
}

bool FrameChannel::Seal(SendSlot& slot, std::span<const std::byte> frame) {
  const Status sealed = auth_.SealDetached(frame, slot.record_header, slot.record_tag);
  if (sealed.ok()) return true;
  // The connection used up its sequence numbers: start a new one.
  platform::Log(platform::LogLevel::kWarning, "%s: cannot seal a frame for peer %u (%s): closing",
                options_.log_name, peer, sealed.str());
  Close(CloseReason::kUnauthenticated);
  return false;
}

}  // namespace edgesgd::tcp::internal
