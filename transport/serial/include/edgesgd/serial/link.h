#pragma once

// A reliable link over a serial byte stream, on top of the framing of framing.h: stop-and-wait
// with an alternating sequence bit. A sender has at most one frame unacknowledged, so a receiver
// never needs more than one frame of buffer (the flow control a microcontroller can afford), and
// a lost frame or acknowledgement is retransmitted after a timeout. Each link frame's payload is
//
//   kind (1 byte) || body
//     kSync    nonce (4 bytes, LE)   "I (re)started": the receiver resets, answers kSyncAck
//     kSyncAck nonce, own (4 + 4)    the handshake's answer: the kSync's nonce echoed, and the
//                                    answering end's own nonce
//     kData0/1 data                  data with sequence bit 0 or 1, answered by kAck0/1
//     kAck0/1  (empty)
//
// Both ends Start with a nonce, which must differ from the end's previous one (a boot counter or
// a random number), and send kSync until its kSyncAck arrives; only then may data flow. A peer
// that restarts (a microcontroller reset) sends kSync with a new nonce: the other end resets both
// directions, abandoning a frame it had not seen acknowledged (counted; the sessions above
// recover from lost frames by their own retries). A
// duplicate (its acknowledgement was lost) is acknowledged again and not delivered twice.
//
// Sans-I/O like the framing: the caller reads the port into Receive, writes what Output holds
// and reports it with Written, and calls OnTimer once NextWakeup has passed. All memory comes from
// one caller buffer of BufferBytes(max_payload), of any alignment; nothing allocates or throws, so
// the link builds for Cortex-M.
//
// A delivered data payload starts at a kPayloadAlignment (8-byte) aligned address, whatever the
// alignment of the caller's buffer: the receiver's frame buffer is placed so that the byte after
// the 1-byte header lands on the boundary. A protocol session (whose frames must be 8-byte
// aligned, wire::kFrameAlignment) decodes a payload in place, without a copy.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "edgesgd/core/status.h"
#include "edgesgd/serial/framing.h"

namespace edgesgd::serial {

// Nanoseconds on the caller's monotonic clock (the sessions' protocol::TimeNs).
using TimeNs = std::uint64_t;
inline constexpr TimeNs kNever = ~TimeNs{0};

struct LinkOptions {
  // An unacknowledged frame is sent again after retransmit_ns plus byte_ns per encoded byte (the
  // frame's own time on the line: a 32 KB model takes seconds on a UART).
  TimeNs retransmit_ns = 200'000'000;
  TimeNs byte_ns = 0;
  std::uint32_t max_attempts = 25;  // sends of one frame before the link reports failure
};

struct LinkCounters {
  std::uint64_t data_sent = 0;        // distinct data frames accepted by Send
  std::uint64_t retransmissions = 0;  // data and kSync frames sent again after a timeout
  std::uint64_t delivered = 0;        // data frames handed up
  std::uint64_t duplicates = 0;       // data frames received again (acknowledged, not delivered)
  std::uint64_t abandoned = 0;        // unacknowledged frames dropped because the peer restarted
  std::uint64_t resyncs = 0;          // kSync frames received
  std::uint64_t unknown = 0;          // frames of no known kind or size, or out of place
  std::uint64_t control_dropped = 0;  // acknowledgements not queued (the peer will ask again)
  std::uint64_t peer_restarts = 0;    // the known peer announced another nonce: it restarted
};

enum class LinkState : std::uint8_t {
  kIdle,     // before Start
  kSyncing,  // sending kSync, waiting for its kSyncAck
  kReady,    // data may flow
  kFailed,   // a frame went unacknowledged max_attempts times; Start again to recover
};

class Link {
 public:
  static constexpr std::size_t kHeaderBytes = 1;
  static constexpr std::size_t kNonceBytes = 4;
  static constexpr std::size_t kControlFrameBytes =
      MaxEncodedBytes(kHeaderBytes + 2 * kNonceBytes);
  static constexpr std::size_t kControlSlots = 2;
  // Delivered payloads start at addresses that are a multiple of this.
  static constexpr std::size_t kPayloadAlignment = 8;

  // Bytes Init takes for payloads of up to `max_payload` bytes: the encoded data frame kept for
  // retransmission, the receiver's frame buffer and up to kPayloadAlignment - 1 bytes skipped to
  // align the payloads it delivers.
  static constexpr std::size_t BufferBytes(std::size_t max_payload) {
    const std::size_t frame = MaxEncodedBytes(kHeaderBytes + max_payload);
    return frame + (frame - 1) + (kPayloadAlignment - 1);
  }

  // Takes BufferBytes(max_payload) bytes of `memory` (any alignment). Errors: kInvalidArgument
  // (no payload room, no attempts or a zero retransmission time), kResourceExhausted (memory too
  // small).
  Status Init(std::span<std::byte> memory, std::size_t max_payload, const LinkOptions& options);

  // (Re)starts the link: forgets both directions (an unacknowledged frame is abandoned) and
  // begins the handshake with `nonce`.
  void Start(TimeNs now, std::uint32_t nonce);

  // Consumes bytes read from the port. At most one data payload is delivered per call (as
  // FrameDecoder::Step: `consumed` tells how far it read; call again with the rest). The payload
  // starts at a kPayloadAlignment aligned address and stays valid until the next Receive.
  FrameDecoder::Step Receive(std::span<const std::byte> bytes);

  // Whether Send would take a frame now: the link is ready and the last frame was acknowledged.
  bool CanSend() const {
    return state_ == LinkState::kReady && !awaiting_ack_ && writing_ != Writing::kData;
  }
  // Queues `payload` (at most max_payload bytes) for sending. Errors: kUnavailable when
  // !CanSend(), kInvalidArgument when too long.
  Status Send(std::span<const std::byte> payload, TimeNs now) { return Send({payload}, now); }
  // As Send, for a payload made of up to kMaxSendParts `parts` back to back (encoded without
  // joining them: an authenticated record's header and tag around a frame that stays put).
  static constexpr std::size_t kMaxSendParts = 3;
  Status Send(std::initializer_list<std::span<const std::byte>> parts, TimeNs now);

  // Bytes to write to the port now (empty: nothing), whole frames one after another; report how
  // many were written with Written.
  std::span<const std::byte> Output();
  void Written(std::size_t bytes);

  // When OnTimer is due (kNever: nothing to time out).
  TimeNs NextWakeup() const;
  void OnTimer(TimeNs now);

  // Nothing left to do: no frame (data or kSync) unacknowledged, none queued or being written,
  // no acknowledgement waiting to go out. A device may stop driving an idle link.
  bool Idle() const {
    return state_ != LinkState::kSyncing && !awaiting_ack_ && !tx_queued_ && !sync_deferred_ &&
           writing_ == Writing::kNothing && control_count_ == 0;
  }

  LinkState state() const { return state_; }
  const LinkCounters& counters() const { return counters_; }
  const DecoderCounters& decoder_counters() const { return decoder_.counters(); }

 private:
  enum Kind : std::uint8_t {
    kSync = 0x10,
    kSyncAck = 0x11,
    kData0 = 0x20,
    kData1 = 0x21,
    kAck0 = 0x30,
    kAck1 = 0x31,
  };
  struct ControlFrame {
    std::array<std::byte, kControlFrameBytes> bytes{};
    std::size_t length = 0;
  };
  enum class Writing : std::uint8_t { kNothing, kControl, kData };

  void Handle(std::span<const std::byte> frame, FrameDecoder::Step& step);
  // Queues an acknowledgement, or a kSyncAck of `echo` with our `own` nonce.
  void QueueControl(Kind kind, std::uint32_t echo, std::uint32_t own);
  void LearnPeer(std::uint32_t nonce);
  void EncodeSync();
  void Transmit(TimeNs now);  // (re)queues the kept frame and restarts its timer
  void ResetDirections();

  LinkOptions options_;
  std::size_t max_payload_ = 0;
  std::span<std::byte> tx_;  // the encoded frame kept until acknowledged (data or kSync)
  std::size_t tx_length_ = 0;
  FrameDecoder decoder_{{}};
  LinkState state_ = LinkState::kIdle;
  std::uint32_t nonce_ = 0;
  std::uint32_t peer_nonce_ = 0;  // the peer's, from its kSync or kSyncAck
  bool peer_known_ = false;       // learnt since Start
  bool awaiting_ack_ = false;  // a data frame is out
  bool tx_queued_ = false;     // the kept frame is waiting to be written
  bool sync_deferred_ = false;  // Start came while a data frame was being written
  std::uint8_t tx_sequence_ = 0;
  std::uint8_t rx_expected_ = 0;
  std::uint32_t attempts_ = 0;
  TimeNs retransmit_at_ = kNever;
  std::array<ControlFrame, kControlSlots> control_{};
  std::size_t control_count_ = 0;
  Writing writing_ = Writing::kNothing;
  std::size_t written_ = 0;  // bytes of the frame in progress already written
  LinkCounters counters_;
};

}  // namespace edgesgd::serial
