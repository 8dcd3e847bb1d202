#include "edgesgd/serial/link.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace edgesgd::serial {
namespace {

void PutNonce(std::span<std::byte> out, std::uint32_t nonce) {
  for (std::size_t i = 0; i < Link::kNonceBytes; ++i) {
    out[i] = static_cast<std::byte>((nonce >> (8 * i)) & 0xFFu);
  }
}

std::uint32_t GetNonce(std::span<const std::byte> in) {
  std::uint32_t nonce = 0;
  for (std::size_t i = 0; i < Link::kNonceBytes; ++i) {
    nonce |= std::to_integer<std::uint32_t>(in[i]) << (8 * i);
  }
  return nonce;
}

}  // namespace

Status Link::Init(std::span<std::byte> memory, std::size_t max_payload,
                  const LinkOptions& options) {
  if (max_payload == 0 || options.max_attempts == 0 || options.retransmit_ns == 0) {
    return Status::InvalidArgument(
        "a link needs room for a payload, at least one attempt and a retransmission time");
  }
  const std::size_t frame = MaxEncodedBytes(kHeaderBytes + max_payload);
  if (memory.size() < BufferBytes(max_payload)) {
    return Status::ResourceExhausted("the link's memory is smaller than Link::BufferBytes");
  }
  options_ = options;
  max_payload_ = max_payload;
  tx_ = memory.first(frame);
  // The decoder unstuffs a frame to the start of its buffer: start that buffer one header byte
  // before an aligned address, and the payload after the header is aligned.
  const auto after_header = reinterpret_cast<std::uintptr_t>(memory.data()) + frame + kHeaderBytes;
  const std::size_t skip =
      (kPayloadAlignment - after_header % kPayloadAlignment) % kPayloadAlignment;
  decoder_ = FrameDecoder(memory.subspan(frame + skip, frame - 1));
  state_ = LinkState::kIdle;
  return Status::Ok();
}

void Link::ResetDirections() {
  if (awaiting_ack_) ++counters_.abandoned;
  awaiting_ack_ = false;
  tx_queued_ = writing_ == Writing::kData;  // a frame half written must still be finished
  tx_sequence_ = 0;
  rx_expected_ = 0;
  attempts_ = 0;
  retransmit_at_ = kNever;
}

void Link::Start(TimeNs now, std::uint32_t nonce) {
  ResetDirections();
  decoder_.Reset();
  peer_known_ = false;
  nonce_ = nonce;
  state_ = LinkState::kSyncing;
  // tx_ is busy until a frame half written is finished; its kSync follows it (Written).
  sync_deferred_ = writing_ == Writing::kData;
  if (!sync_deferred_) EncodeSync();
  Transmit(now);
}

void Link::EncodeSync() {
  std::array<std::byte, kHeaderBytes + kNonceBytes> body{};
  body[0] = static_cast<std::byte>(kSync);
  PutNonce(std::span(body).subspan(kHeaderBytes), nonce_);
  tx_length_ = EncodeFrame(body, tx_).value();  // tx_ holds any control-sized frame
}

void Link::Transmit(TimeNs now) {
  tx_queued_ = true;
  ++attempts_;
  retransmit_at_ = now + options_.retransmit_ns + tx_length_ * options_.byte_ns;
}

Status Link::Send(std::initializer_list<std::span<const std::byte>> parts, TimeNs now) {
  if (!CanSend()) {
    return Status::Unavailable("the link is not ready or a frame is still unacknowledged");
  }
  std::size_t payload_bytes = 0;
  for (const std::span<const std::byte> part : parts) payload_bytes += part.size();
  if (payload_bytes > max_payload_) {
    return Status::InvalidArgument("the payload is larger than the link's maximum");
  }
  // Encoded straight from a header byte and the parts: the stuffing runs over all of them.
  const std::array<std::byte, kHeaderBytes> header{
      static_cast<std::byte>(tx_sequence_ == 0 ? kData0 : kData1)};
  std::array<std::span<const std::byte>, kMaxSendParts + 1> all;
  if (parts.size() > kMaxSendParts) return Status::InvalidArgument("too many payload parts");
  all[0] = header;
  std::copy(parts.begin(), parts.end(), all.begin() + 1);
  const Result<std::size_t> length = EncodeFrame(std::span(all).first(parts.size() + 1), tx_);
  if (!length.ok()) return length.status();
  tx_length_ = length.value();
  awaiting_ack_ = true;
  attempts_ = 0;
  ++counters_.data_sent;
  Transmit(now);
  return Status::Ok();
}

FrameDecoder::Step Link::Receive(std::span<const std::byte> bytes) {
  FrameDecoder::Step step;
  while (step.consumed < bytes.size() && !step.delivered) {
    const FrameDecoder::Step part = decoder_.Push(bytes.subspan(step.consumed));
    step.consumed += part.consumed;
    if (part.delivered) Handle(part.frame, step);
  }
  return step;
}

void Link::Handle(std::span<const std::byte> frame, FrameDecoder::Step& step) {
  if (frame.empty()) {
    ++counters_.unknown;
    return;
  }
  const auto kind = std::to_integer<std::uint8_t>(frame[0]);
  const std::span<const std::byte> body = frame.subspan(kHeaderBytes);
  switch (kind) {
    case kSync:
      if (body.size() != kNonceBytes || state_ == LinkState::kIdle) break;
      ++counters_.resyncs;
      LearnPeer(GetNonce(body));
      QueueControl(kSyncAck, GetNonce(body), nonce_);
      return;
    case kSyncAck:
      if (body.size() != 2 * kNonceBytes) break;
      if (GetNonce(body) != nonce_) return;  // the answer to an earlier Start
      LearnPeer(GetNonce(body.subspan(kNonceBytes)));
      if (state_ == LinkState::kSyncing) {
        state_ = LinkState::kReady;
        tx_queued_ = false;
        attempts_ = 0;
        retransmit_at_ = kNever;
      }
      return;
    case kData0:
    case kData1: {
      // The peer sends data only once it has our kSyncAck, which answered its kSync: whether
      // our own handshake is done does not matter to this direction.
      if (!peer_known_) break;
      const std::uint8_t sequence = kind == kData0 ? 0 : 1;
      QueueControl(sequence == 0 ? kAck0 : kAck1, 0, 0);
      if (sequence != rx_expected_) {
        ++counters_.duplicates;
        return;
      }
      rx_expected_ ^= 1u;
      ++counters_.delivered;
      step.delivered = true;
      step.frame = body;
      return;
    }
    case kAck0:
    case kAck1:
      if (!body.empty()) break;
      if (awaiting_ack_ && (kind == kAck0 ? 0 : 1) == tx_sequence_) {
        awaiting_ack_ = false;
        if (writing_ != Writing::kData) tx_queued_ = false;
        tx_sequence_ ^= 1u;
        retransmit_at_ = kNever;
      }
      return;
    default:
      break;
  }
  ++counters_.unknown;
}

void Link::LearnPeer(std::uint32_t nonce) {
  // The first nonce since our Start opens the receiving direction (the peer sends data only
  // once its handshake is done, so nothing is lost); another one means the peer restarted, and
  // whatever either direction held belongs to its previous life; the same one again is a repeat.
  if (peer_known_ && nonce == peer_nonce_) return;
  if (peer_known_) ++counters_.peer_restarts;
  if (peer_known_ && state_ == LinkState::kReady) ResetDirections();
  rx_expected_ = 0;
  peer_known_ = true;
  peer_nonce_ = nonce;
}

void Link::QueueControl(Kind kind, std::uint32_t echo, std::uint32_t own) {
  if (control_count_ == kControlSlots) {
    ++counters_.control_dropped;
    return;
  }
  std::array<std::byte, kHeaderBytes + 2 * kNonceBytes> body{};
  body[0] = static_cast<std::byte>(kind);
  const bool handshake = kind == kSyncAck;
  if (handshake) {
    PutNonce(std::span(body).subspan(kHeaderBytes), echo);
    PutNonce(std::span(body).subspan(kHeaderBytes + kNonceBytes), own);
  }
  const std::size_t size = kHeaderBytes + (handshake ? 2 * kNonceBytes : 0);
  ControlFrame& slot = control_[control_count_++];
  slot.length = EncodeFrame(std::span(body).first(size), slot.bytes).value();
}

std::span<const std::byte> Link::Output() {
  if (writing_ == Writing::kNothing) {
    // Acknowledgements first: they are small and release the peer.
    if (control_count_ > 0) {
      writing_ = Writing::kControl;
    } else if (tx_queued_) {
      writing_ = Writing::kData;
    } else {
      return {};
    }
    written_ = 0;
  }
  if (writing_ == Writing::kControl) {
    return std::span<const std::byte>(control_[0].bytes).subspan(written_,
                                                                  control_[0].length - written_);
  }
  return std::span<const std::byte>(tx_).subspan(written_, tx_length_ - written_);
}

void Link::Written(std::size_t bytes) {
  if (writing_ == Writing::kNothing) return;
  const std::size_t length = writing_ == Writing::kControl ? control_[0].length : tx_length_;
  written_ = std::min(length, written_ + bytes);
  if (written_ < length) return;
  if (writing_ == Writing::kControl) {
    std::move(control_.begin() + 1, control_.begin() + static_cast<std::ptrdiff_t>(control_count_),
              control_.begin());
    --control_count_;
  } else {
    tx_queued_ = sync_deferred_;
    if (sync_deferred_) EncodeSync();
    sync_deferred_ = false;
  }
  writing_ = Writing::kNothing;
}

TimeNs Link::NextWakeup() const {
  const bool waiting = state_ == LinkState::kSyncing || awaiting_ack_;
  return waiting ? retransmit_at_ : kNever;
}

void Link::OnTimer(TimeNs now) {
  if (now < NextWakeup() || NextWakeup() == kNever) return;
  if (attempts_ >= options_.max_attempts) {
    state_ = LinkState::kFailed;
    awaiting_ack_ = false;
    tx_queued_ = writing_ == Writing::kData;
    retransmit_at_ = kNever;
    return;
  }
  ++counters_.retransmissions;
  Transmit(now);
}

}  // namespace edgesgd::serial
