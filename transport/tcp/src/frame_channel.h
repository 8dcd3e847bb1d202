#pragma once

// One TCP connection carrying size-prefixed frames: the only place where edgesgd reads frames
// from and writes frames to a socket. Everything between the socket and a complete frame —
// the length prefix and its limit, the aligned receive buffer, the bounded send queue, the
// write and idle deadlines — lives here; the driver sees whole frames in, whole frames out.
// Frame authentication (edgesgd/auth, on when DriverOptions::auth_keys is set) lives here too:
// the hellos when a connection opens, records sealed in WriteFront (not in Send: a dialled
// peer's queue outlives its connection, and each connection has its own keys and sequence
// numbers) and opened in DeliverFrame; the driver only checks that an accepted connection's
// first frame names the device it authenticated as.
//
// TLS (DriverOptions::tls) sits below everything else: once TCP is up, the channel runs the TLS
// handshake on a stream layered over its socket, and only then starts the hellos and frames;
// reads and writes go through that stream. A connection that has not finished its handshake
// counts as neither connected for writes nor heard from.
//
// Lifetime: Asio handlers refer to the channel, so a channel object lives as long as the
// driver; after Close() it can be reused once pending_operations() is 0.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/tcp/asio.h"
#include "edgesgd/tcp/session_driver.h"

namespace edgesgd::tcp::internal {

#if EDGESGD_TCP_TLS
using TlsContext = asio::ssl::context;
using TlsStream = asio::ssl::stream<asio::ip::tcp::socket&>;
#else
struct TlsContext {};  // never created: Open refuses DriverOptions::tls in this build
struct TlsStream {};
#endif

enum class CloseReason : std::uint8_t {
  kEndOfStream,  // the peer closed, or a read/write error (reset, broken pipe)
  kOversized,    // length prefix above the limit
  kMalformed,    // length prefix below the minimum frame
  kUnidentified, // no valid first frame
  kHelloTimeout,
  kIdleTimeout,
  kWriteTimeout,
  kConnectTimeout,
  kQueueOverflow,
  kReplaced,     // a newer connection of the same peer took over
  kShutdown,     // the driver is stopping
  // A hello or record failed authentication (DriverOptions::auth_keys).
  kUnauthenticated,
  kTlsFailed,  // the TLS handshake failed or did not finish in time (DriverOptions::tls)
  kEvicted,    // unidentified, the oldest of too many (DriverOptions::max_unidentified_connections)
};
const char* CloseReasonName(CloseReason reason);

// The first time at which `now - start > timeout` holds, the form every deadline is checked in;
// kNever when the timeout is (or the sum would overflow).
constexpr TimeNs DeadlineAfter(TimeNs start, TimeNs timeout) {
  return timeout >= kNever - start - 1 ? kNever : start + timeout + 1;
}

class FrameChannel;

// A frame the driver hands to several channels (a server's broadcast goes to every worker):
// copied once from the session and written by each channel from the same bytes.
struct SharedFrame {
  std::unique_ptr<std::byte[]> storage;
  std::size_t capacity = 0;
  std::size_t size = 0;
  std::uint32_t holders = 0;  // channels that have it queued, and the driver while routing it
  std::span<const std::byte> bytes() const { return {storage.get(), size}; }
  // Makes room for `bytes` bytes, keeping nothing.
  void Reserve(std::size_t bytes);
};

// The driver's shared frames, reused once no channel holds them. They are few (the broadcasts
// still being written), so when one must grow every free one grows with it: after warm-up,
// copying a frame allocates nothing. Outlives every channel that holds its frames.
class SharedFramePool {
 public:
  // A frame holding a copy of `bytes`, held by the caller: hand it to channels with Send, then
  // Release it.
  SharedFrame& Copy(std::span<const std::byte> bytes);
  // One more holder of `frame` (a channel queueing it), or one fewer: the pool takes it back
  // when the last one lets go.
  static void Hold(SharedFrame& frame) { ++frame.holders; }
  void Release(SharedFrame& frame);

 private:
  std::vector<std::unique_ptr<SharedFrame>> frames_;
  std::vector<SharedFrame*> free_;
  std::size_t largest_ = 0;  // bytes of the largest frame copied so far
};

// What a channel reports to its driver. Called from Asio handlers; OnChannelClosed may also be
// called from inside Send or Close, OnChannelDeadline from inside Connect and Send.
class ChannelEvents {
 public:
  virtual void OnChannelFrame(FrameChannel& channel, std::span<const std::byte> frame) = 0;
  virtual void OnChannelClosed(FrameChannel& channel, CloseReason reason) = 0;
  virtual void OnChannelConnected(FrameChannel& channel) = 0;
  // The channel started something with a deadline (a connect, a handshake, a write): its
  // NextDeadline() is now `deadline`, which CheckDeadlines must see in time.
  virtual void OnChannelDeadline(TimeNs deadline) = 0;
  // Called at the end of every completion handler of the channel (its operation no longer
  // counts as pending): the driver settles what the handler changed — a closed link, an emptied
  // queue, a channel that became reusable().
  virtual void OnChannelHandled(FrameChannel& channel) = 0;
  virtual TimeNs ChannelNow() const = 0;

 protected:
  ~ChannelEvents() = default;
};

class FrameChannel {
 public:
  // `tls` (the driver's, outliving the channel) is set when DriverOptions::tls is.
  FrameChannel(asio::io_context& io, ChannelEvents& events, const DriverOptions& options,
               DriverCounters& counters, TlsContext* tls, SharedFramePool& frames);
  ~FrameChannel();  // lets go of the frames still queued
  FrameChannel(const FrameChannel&) = delete;
  FrameChannel& operator=(const FrameChannel&) = delete;

  asio::ip::tcp::socket& socket() { return socket_; }

  // An accepted socket is open: set TCP_NODELAY and start reading.
  void BeginAccepted();
  // Connects to `endpoint` (the socket must be closed); OnChannelConnected or OnChannelClosed
  // follows. Frames queued meanwhile are written once connected.
  void Connect(const asio::ip::tcp::endpoint& endpoint);

  // Sends `frame`, which may change once this returns: when nothing is queued on an open plain
  // connection, writes what the socket takes at once and queues a copy of the rest only;
  // otherwise queues a copy of the whole frame. False when the queue is full (the caller
  // decides: disconnect a slow connected peer, or drop the frame of a peer that is not
  // connected). The queue slot's buffer is reused, so after warm-up this does not allocate.
  bool Send(std::span<const std::byte> frame);
  // Whether Send(std::span) would write at once: an open connection without TLS, nothing queued
  // or being written, and its hellos (if any) done.
  bool CanWriteNow() const;
  // Queues `frame` (from the pool given at construction) without copying it, holding it until
  // it is written or dropped. False as for Send. Does not allocate.
  bool Send(SharedFrame& frame);

  // Closes the socket (pending operations finish with operation_aborted) and empties the
  // queue; reports OnChannelClosed once unless `silent`.
  void Close(CloseReason reason, bool silent = false);

  // Half-closes: no more sends (the peer reads what was written, then end-of-stream), while
  // reads go on until the peer closes. Closing a socket with unread received bytes makes
  // Linux send a reset, which can destroy the last frames in flight to the peer; this does not.
  void ShutdownSend();

  // Enforces the hello, idle, write and connect deadlines.
  void CheckDeadlines(TimeNs now);
  // The earliest of those deadlines in the channel's current state (kNever: none). It only
  // moves later by itself (a read, a finished write); whatever makes it earlier is reported
  // through OnChannelDeadline.
  TimeNs NextDeadline() const;

  bool connected() const { return state_ == State::kOpen; }
  // The current (or, once closed, the last) connection got as far as carrying frames: TCP, TLS
  // and the authentication hellos done.
  bool established() const { return established_; }
  bool connecting() const { return state_ == State::kConnecting; }
  bool closed() const { return state_ == State::kClosed; }
  bool reusable() const { return state_ == State::kClosed && pending_ == 0; }
  // An accepted connection, open, whose first frame has not arrived.
  bool unidentified() const { return !dialled && state_ == State::kOpen && !heard_; }
  std::size_t queued_frames() const { return queued_; }
  bool queue_full() const { return queued_ == slots_.size(); }
  std::uint32_t pending_operations() const { return pending_; }
  // The device an authenticated connection's hellos named (auth::kNoDevice before, or without
  // DriverOptions::auth_keys).
  std::uint32_t authenticated_device() const {
    return auth_.established() ? auth_.device() : auth::kNoDevice;
  }

  // Driver bookkeeping: which peer the connection belongs to.
  PeerId peer = 0;
  bool bound = false;    // peer is known (dialled, or identified by its first frame)
  bool dialled = false;  // an outbound connection that the driver reconnects
  std::size_t dial_index = 0;
  TimeNs opened_at = 0;

 private:
  enum class State : std::uint8_t { kClosed, kConnecting, kOpen };
  class Completion;

  void Opened();
  // After TCP (and TLS) are up: the authentication hellos, or straight to frames.
  void BeginFraming();
  // TLS: the handshake on a fresh stream over the socket; BeginFraming once it is done.
  void StartTls();
  bool tls_pending() const { return tls_context_ != nullptr && !tls_ready_; }
  // Reads and writes through the TLS stream when there is one, else the socket.
  template <typename Handler>
  void AsyncReadSome(std::span<std::byte> into, Handler&& handler);
  template <typename Buffers, typename Handler>
  void AsyncWrite(const Buffers& buffers, Handler&& handler);
  void ReadMore();
  // SO_RCVLOWAT for the next read: DriverOptions::receive_low_watermark_bytes, or the rest of the
  // frame's body if less; 1 for a prefix.
  void SetLowWatermark();
  // At the idle deadline: whether the socket holds more bytes than at the last read or check,
  // bytes the low watermark kept from waking the reader.
  bool MoreBytesWaiting();
  void OnRead(const asio::error_code& error, std::size_t bytes);
  void DeliverFrame(std::span<const std::byte> frame);
  // The largest frame the next length prefix may announce: DriverOptions::max_frame_bytes, or
  // max_first_frame_bytes before an accepted connection's first frame (with authentication,
  // its first record: the dialler's key confirmation).
  std::size_t FrameLimit() const;
  // Back to the initial receive buffer (not while a frame in it is being delivered).
  void ReleaseReceiveBuffer();
  // Authentication (when DriverOptions::auth_keys is set): every connection opens with the
  // hellos (the dialling side is the initiator), then each frame travels as a record, sealed
  // when it is written and opened before it is delivered. False after closing the connection.
  bool authenticating() const { return options_.auth_keys != nullptr; }
  bool StartHandshake();
  // This side's nonce for the hellos; false after closing the connection when the platform
  // has no random bytes.
  bool FreshNonce(std::span<std::byte, auth::kNonceBytes> nonce);
  bool OnHello();
  // Writes the first `bytes` of hello_out_: a hello, or the key confirmation.
  void WriteHandshake(std::size_t bytes);
  // The initiator's first record is empty: it proves the key before any frame, so a responder
  // holds a connection that has proved nothing to its first-frame limit (FrameLimit), however
  // large the frames that follow. A responder delivers no empty record to its session.
  void WriteConfirmation();
  bool RejectUnauthenticated(const char* what);
  void WriteFront();
  void OnWritten(const asio::error_code& error, std::size_t bytes);
  std::byte* receive_bytes() { return reinterpret_cast<std::byte*>(receive_words_.data()); }

  asio::ip::tcp::socket socket_;
  TlsContext* tls_context_ = nullptr;
  // One per connection (a TLS session cannot be reused), replaced when the channel reopens.
  std::optional<TlsStream> tls_;
  bool tls_ready_ = false;  // handshake done on the current connection
  ChannelEvents& events_;
  const DriverOptions& options_;
  DriverCounters& counters_;
  State state_ = State::kClosed;
  std::uint32_t pending_ = 0;  // Asio operations whose handler has not run yet

  // Receive: u64 words keep the frame 8-byte aligned; grows to the largest frame seen.
  std::vector<std::uint64_t> receive_words_;
  std::size_t received_ = 0;  // bytes of the current prefix or frame
  std::size_t expected_ = 0;  // wire::kFramePrefixBytes, then the frame's length
  bool reading_body_ = false;
  std::size_t low_watermark_ = 1;          // SO_RCVLOWAT now set on the socket
  std::size_t waiting_at_idle_check_ = 0;  // bytes the socket held at the last idle check
  TimeNs last_read_ = 0;
  bool heard_ = false;  // a frame has arrived (the hello deadline no longer applies)
  bool proved_ = false;  // the peer's key confirmation has arrived (frames may be large)
  bool delivering_ = false;  // inside DeliverFrame: the frame lives in the receive buffer
  bool established_ = false;
  bool confirmation_owed_ = false;  // an initiator's key confirmation is still to be written

  auth::ConnectionAuth auth_;
  std::array<std::byte, auth::kResponderHelloBytes> hello_out_{};

  // Send: a ring of queued frames, each a copy in the slot's own buffer or a shared frame;
  // with authentication, each with its record's header and tag (sealed in WriteFront, written
  // around the frame).
  struct SendSlot {
    SharedFrame own;  // the slot's buffer: grows to the largest frame copied, never cleared
    SharedFrame* frame = nullptr;  // &own, or a shared frame this channel holds
    std::array<std::byte, auth::kRecordHeaderBytes> record_header{};
    std::array<std::byte, auth::kTagBytes> record_tag{};
    // A record Send began writing directly: `own` holds the rest of its frame, and these the
    // header and tag bytes already written (0 for any other record). Such a rest means nothing
    // on another connection.
    bool rest = false;
    std::size_t header_written = 0;
    std::size_t tag_written = 0;
  };
  // Seals `frame`'s record header and tag into `slot`; on failure logs and closes the connection
  // and returns false.
  bool Seal(SendSlot& slot, std::span<const std::byte> frame);
  // Seals (with authentication) and writes `frame`'s record as far as the socket takes it
  // without blocking; queues what it did not take in `slot`.
  void WriteNow(SendSlot& slot, std::span<const std::byte> frame);
  // The slot the next frame is queued in, or nullptr when the queue is full.
  SendSlot* NextSlot();
  // Puts `frame` (the slot's own or a held shared one) in `slot` and writes it if it is next.
  void Enqueue(SendSlot& slot, SharedFrame& frame);
  // Grows the free slots' own buffers (not those queued or being written: their bytes stay
  // where the write reads them) to at least `bytes`.
  void GrowFreeSlots(std::size_t bytes);
  // Lets go of every queued frame and empties the queue.
  void DropQueue();
  void Dequeue();  // the front frame
  SharedFramePool& frames_;
  std::vector<SendSlot> slots_;
  std::size_t head_ = 0;
  std::size_t queued_ = 0;
  bool writing_ = false;
  TimeNs write_started_ = 0;
  TimeNs connect_started_ = 0;
};

}  // namespace edgesgd::tcp::internal
