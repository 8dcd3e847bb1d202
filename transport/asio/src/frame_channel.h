#pragma once

// One TCP connection carrying size-prefixed frames: the only place where edgesgd reads frames
// from and writes frames to a socket. Everything between the socket and a complete frame —
// the length prefix and its limit, the aligned receive buffer, the bounded send queue, the
// write and idle deadlines — lives here; the driver sees whole frames in, whole frames out.
// A per-frame transform (e.g. authentication: a tag appended on send, checked and stripped on
// receive) belongs in exactly two places: FrameChannel::Send (outgoing bytes) and
// FrameChannel::DeliverFrame (incoming bytes).
//
// Lifetime: Asio handlers refer to the channel, so a channel object lives as long as the
// driver; after Close() it can be reused once pending_operations() is 0.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "edgesgd/asio/asio.h"
#include "edgesgd/asio/session_driver.h"

namespace edgesgd::tcp::internal {

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
};
const char* CloseReasonName(CloseReason reason);

class FrameChannel;

// What a channel reports to its driver. Called from Asio handlers; OnChannelClosed may also be
// called from inside Send or Close.
class ChannelEvents {
 public:
  virtual void OnChannelFrame(FrameChannel& channel, std::span<const std::byte> frame) = 0;
  virtual void OnChannelClosed(FrameChannel& channel, CloseReason reason) = 0;
  virtual void OnChannelConnected(FrameChannel& channel) = 0;
  virtual TimeNs ChannelNow() const = 0;

 protected:
  ~ChannelEvents() = default;
};

class FrameChannel {
 public:
  FrameChannel(asio::io_context& io, ChannelEvents& events, const DriverOptions& options,
               DriverCounters& counters);
  FrameChannel(const FrameChannel&) = delete;
  FrameChannel& operator=(const FrameChannel&) = delete;

  asio::ip::tcp::socket& socket() { return socket_; }

  // An accepted socket is open: set TCP_NODELAY and start reading.
  void BeginAccepted();
  // Connects to `endpoint` (the socket must be closed); OnChannelConnected or OnChannelClosed
  // follows. Frames queued meanwhile are written once connected.
  void Connect(const asio::ip::tcp::endpoint& endpoint);

  // Queues a copy of `frame`. False when the queue is full (the caller decides: disconnect a
  // slow connected peer, or drop the frame of a peer that is not connected). The queue slot's
  // buffer is reused, so after warm-up this does not allocate.
  bool Send(std::span<const std::byte> frame);

  // Closes the socket (pending operations finish with operation_aborted) and empties the
  // queue; reports OnChannelClosed once unless `silent`.
  void Close(CloseReason reason, bool silent = false);

  // Half-closes: no more sends (the peer reads what was written, then end-of-stream), while
  // reads go on until the peer closes. Closing a socket with unread received bytes makes
  // Linux send a reset, which can destroy the last frames in flight to the peer; this does not.
  void ShutdownSend();

  // Enforces the hello, idle, write and connect deadlines.
  void CheckDeadlines(TimeNs now);

  bool connected() const { return state_ == State::kOpen; }
  bool connecting() const { return state_ == State::kConnecting; }
  bool closed() const { return state_ == State::kClosed; }
  bool reusable() const { return state_ == State::kClosed && pending_ == 0; }
  std::size_t queued_frames() const { return queued_; }
  bool queue_full() const { return queued_ == slots_.size(); }
  std::uint32_t pending_operations() const { return pending_; }

  // Driver bookkeeping: which peer the connection belongs to.
  PeerId peer = 0;
  bool bound = false;    // peer is known (dialled, or identified by its first frame)
  bool dialled = false;  // an outbound connection that the driver reconnects
  std::size_t dial_index = 0;
  TimeNs opened_at = 0;

 private:
  enum class State : std::uint8_t { kClosed, kConnecting, kOpen };

  void Opened();
  void ReadMore();
  void OnRead(const asio::error_code& error, std::size_t bytes);
  void DeliverFrame(std::span<const std::byte> frame);
  void WriteFront();
  void OnWritten(const asio::error_code& error, std::size_t bytes);
  std::byte* receive_bytes() { return reinterpret_cast<std::byte*>(receive_words_.data()); }

  asio::ip::tcp::socket socket_;
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
  TimeNs last_read_ = 0;
  bool heard_ = false;  // a frame has arrived (the hello deadline no longer applies)

  // Send: a ring of frame copies.
  std::vector<std::vector<std::byte>> slots_;
  std::size_t head_ = 0;
  std::size_t queued_ = 0;
  bool writing_ = false;
  TimeNs write_started_ = 0;
  TimeNs connect_started_ = 0;
};

}  // namespace edgesgd::tcp::internal
