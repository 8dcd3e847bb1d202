#include "frame_channel.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "edgesgd/core/check.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/wire/frame_decoder.h"

namespace edgesgd::tcp::internal {

const char* CloseReasonName(CloseReason reason) {
  switch (reason) {
    case CloseReason::kEndOfStream: return "connection closed";
    case CloseReason::kOversized: return "frame length above the limit";
    case CloseReason::kMalformed: return "frame length below the minimum";
    case CloseReason::kUnidentified: return "first frame did not identify a valid peer";
    case CloseReason::kHelloTimeout: return "no first frame before the hello timeout";
    case CloseReason::kIdleTimeout: return "nothing received before the idle timeout";
    case CloseReason::kWriteTimeout: return "a frame write did not finish before the deadline";
    case CloseReason::kConnectTimeout: return "connect timed out";
    case CloseReason::kQueueOverflow: return "send queue full (peer not reading)";
    case CloseReason::kReplaced: return "replaced by a newer connection of the same peer";
    case CloseReason::kShutdown: return "shutting down";
    case CloseReason::kUnauthenticated: return "authentication failed";
    case CloseReason::kTlsFailed: return "TLS handshake failed";
    case CloseReason::kEvicted: return "too many connections without a first frame: oldest closed";
  }
  return "closed";
}

namespace {
// First receive buffer: any control frame, and small models, without growing.
constexpr std::size_t kInitialReceiveBytes = 4096;
}  // namespace

// One finished Asio operation of the channel, declared first thing in its handler: counted down
// at once, and the driver hears of it once the handler is done.
class FrameChannel::Completion {
 public:
  explicit Completion(FrameChannel& channel) : channel_(channel) { --channel_.pending_; }
  ~Completion() { channel_.events_.OnChannelHandled(channel_); }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

 private:
  FrameChannel& channel_;
};

void SharedFrame::Reserve(std::size_t bytes) {
  if (capacity >= bytes) return;
  storage = std::make_unique_for_overwrite<std::byte[]>(bytes);
  capacity = bytes;
}

SharedFrame& SharedFramePool::Copy(std::span<const std::byte> bytes) {
  if (bytes.size() > largest_) {
    largest_ = bytes.size();
    for (SharedFrame* frame : free_) frame->Reserve(largest_);
  }
  if (free_.empty()) {
    frames_.push_back(std::make_unique<SharedFrame>());
    frames_.back()->Reserve(largest_);
    free_.push_back(frames_.back().get());
  }
  SharedFrame& frame = *free_.back();
  free_.pop_back();
  frame.Reserve(largest_);  // it may have been held when the largest frame grew the others
  frame.size = bytes.size();
  frame.holders = 1;
  if (!bytes.empty()) std::memcpy(frame.storage.get(), bytes.data(), bytes.size());
  return frame;
}

void SharedFramePool::Release(SharedFrame& frame) {
  EDGESGD_CHECK(frame.holders > 0);
  if (--frame.holders == 0) free_.push_back(&frame);
}

FrameChannel::FrameChannel(asio::io_context& io, ChannelEvents& events,
                           const DriverOptions& options, DriverCounters& counters, TlsContext* tls,
                           SharedFramePool& frames)
    : socket_(io),
      tls_context_(tls),
      events_(events),
      options_(options),
      counters_(counters),
      receive_words_(kInitialReceiveBytes / sizeof(std::uint64_t)),
      frames_(frames),
      slots_(std::max<std::size_t>(options.send_queue_frames, 1)) {
  if (authenticating()) {
    // The digest states are allocated here, once per channel; connections reuse them. The
    // record layer's own limit is the largest frame there is: the driver's limit, which can
    // change while the channel lives (SessionDriver::SetMaxFrameBytes), is checked in OnRead.
    EDGESGD_CHECK(auth_.Init(wire::kMaxFrameBytes).ok());
  }
}

void FrameChannel::BeginAccepted() {
  state_ = State::kOpen;
  Opened();
}

void FrameChannel::Connect(const asio::ip::tcp::endpoint& endpoint) {
  state_ = State::kConnecting;
  // Not established until this attempt's framing is up: a refused reconnect must not count as
  // a link that came up (the driver's give-up clock would restart on every attempt).
  established_ = false;
  connect_started_ = events_.ChannelNow();
  events_.OnChannelDeadline(NextDeadline());
  ++pending_;
  socket_.async_connect(endpoint, [this](const asio::error_code& error) {
    const Completion completion(*this);
    if (state_ != State::kConnecting) return;  // closed meanwhile (timeout, shutdown)
    if (error) {
      ++counters_.connect_failures;
      Close(CloseReason::kEndOfStream);
      return;
    }
    ++counters_.connected;
    state_ = State::kOpen;
    Opened();
    events_.OnChannelConnected(*this);
    if (state_ == State::kOpen && queued_ > 0 && !writing_) WriteFront();
  });
}

void FrameChannel::Opened() {
  asio::error_code ignored;
  // Request/response rounds of small frames: Nagle's delay would cost ~40 ms per round.
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  // Send's direct writes take what the socket holds and never wait (asynchronous operations
  // are unaffected).
  socket_.non_blocking(true, ignored);
  if (options_.socket_send_buffer_bytes > 0) {
    socket_.set_option(
        asio::socket_base::send_buffer_size(static_cast<int>(options_.socket_send_buffer_bytes)),
        ignored);
  }
  opened_at = events_.ChannelNow();
  last_read_ = opened_at;
  waiting_at_idle_check_ = 0;
  low_watermark_ = 1;
  heard_ = false;
  proved_ = false;
  established_ = false;
  confirmation_owed_ = false;
  received_ = 0;
  expected_ = wire::kFramePrefixBytes;
  reading_body_ = false;
  events_.OnChannelDeadline(NextDeadline());
  if (tls_context_ != nullptr) {
    StartTls();
    return;
  }
  BeginFraming();
}

void FrameChannel::BeginFraming() {
  if (authenticating()) {
    if (!StartHandshake()) return;
  } else {
    established_ = true;
  }
  ReadMore();
}

void FrameChannel::StartTls() {
#if EDGESGD_TCP_TLS
  tls_ready_ = false;
  tls_.emplace(socket_, *tls_context_);
  ++pending_;
  tls_->async_handshake(
      dialled ? asio::ssl::stream_base::client : asio::ssl::stream_base::server,
      [this](const asio::error_code& error) {
        const Completion completion(*this);
        if (state_ != State::kOpen) return;
        if (error) {
          ++counters_.tls_failures;
          char who[48];
          std::snprintf(who, sizeof(who), dialled ? "peer %u" : "an accepted connection", peer);
          platform::Log(platform::LogLevel::kWarning, "%s: TLS handshake with %s failed: %s",
                        options_.log_name, who, error.message().c_str());
          Close(CloseReason::kTlsFailed);
          return;
        }
        tls_ready_ = true;
        BeginFraming();
        // Frames queued while connecting go out now (with authentication, after the hellos).
        if (state_ == State::kOpen && !authenticating() && queued_ > 0 && !writing_) {
          WriteFront();
        }
      });
#endif
}

template <typename Handler>
void FrameChannel::AsyncReadSome(std::span<std::byte> into, Handler&& handler) {
#if EDGESGD_TCP_TLS
  if (tls_) {
    tls_->async_read_some(asio::buffer(into.data(), into.size()), std::forward<Handler>(handler));
    return;
  }
#endif
  socket_.async_read_some(asio::buffer(into.data(), into.size()), std::forward<Handler>(handler));
}

template <typename Buffers, typename Handler>
void FrameChannel::AsyncWrite(const Buffers& buffers, Handler&& handler) {
#if EDGESGD_TCP_TLS
  if (tls_) {
    asio::async_write(*tls_, buffers, std::forward<Handler>(handler));
    return;
  }
#endif
  asio::async_write(socket_, buffers, std::forward<Handler>(handler));
}

void FrameChannel::WriteHandshake(std::size_t bytes) {
  writing_ = true;
  write_started_ = events_.ChannelNow();
  events_.OnChannelDeadline(NextDeadline());
  ++pending_;
  AsyncWrite(asio::buffer(hello_out_.data(), bytes),
             [this](const asio::error_code& error, std::size_t written) {
               const Completion completion(*this);
               writing_ = false;
               if (state_ != State::kOpen) return;
               if (error) {
                 Close(CloseReason::kEndOfStream);
                 return;
               }
               counters_.bytes_sent += written;
               if (queued_ > 0 || confirmation_owed_) WriteFront();
             });
}

void FrameChannel::ReadMore() {
  SetLowWatermark();
  ++pending_;
  AsyncReadSome(std::span(receive_bytes() + received_, expected_ - received_),
                [this](const asio::error_code& error, std::size_t bytes) {
                  const Completion completion(*this);
                  OnRead(error, bytes);
                });
}

void FrameChannel::SetLowWatermark() {
  // Not under TLS: the TLS layer may hold raw bytes of the frame already, so fewer than the
  // frame's remaining bytes may ever reach the socket.
  if (options_.receive_low_watermark_bytes <= 1 || tls_context_ != nullptr) return;
  const std::size_t wanted =
      reading_body_ ? std::min(options_.receive_low_watermark_bytes, expected_ - received_) : 1;
  if (wanted == low_watermark_) return;
  asio::error_code ignored;
  socket_.set_option(asio::socket_base::receive_low_watermark(static_cast<int>(wanted)), ignored);
  low_watermark_ = wanted;
}

void FrameChannel::OnRead(const asio::error_code& error, std::size_t bytes) {
  if (state_ != State::kOpen) return;
  if (error) {
    Close(CloseReason::kEndOfStream);
    return;
  }
  received_ += bytes;
  counters_.bytes_received += bytes;
  last_read_ = events_.ChannelNow();
  waiting_at_idle_check_ = 0;
  if (received_ < expected_) {
    ReadMore();
    return;
  }
  if (authenticating() && !auth_.established()) {
    if (OnHello()) ReadMore();
    return;
  }
  if (!reading_body_) {
    const std::span<const std::byte> prefix(receive_bytes(), received_);
    const std::size_t limit = FrameLimit();
    Result<std::size_t> length = authenticating() ? auth_.ReadRecordLength(prefix)
                                                  : wire::ReadFrameLength(prefix, limit);
    if (authenticating() && length.ok() && length.value() - auth::kRecordOverheadBytes > limit) {
      length = Status::OutOfRange("the record is longer than the connection's limit");
    }
    if (length.status() == Status::Unauthenticated()) {
      RejectUnauthenticated("record");
      return;
    }
    if (!length.ok()) {
      const bool oversized = length.status().code() == StatusCode::kOutOfRange;
      std::uint32_t announced = 0;
      std::memcpy(&announced, receive_bytes(), sizeof(announced));
      if (oversized) {
        ++counters_.oversized_frames;
      } else {
        ++counters_.malformed_prefixes;
      }
      char who[32];
      std::snprintf(who, sizeof(who), bound ? "peer %u" : "an unidentified peer", peer);
      platform::Log(platform::LogLevel::kWarning,
                    "%s: %s announced a frame of %u bytes (limit %zu): closing the connection",
                    options_.log_name, who, announced, limit);
      Close(oversized ? CloseReason::kOversized : CloseReason::kMalformed);
      return;
    }
    expected_ = length.value();
    const std::size_t words = (expected_ + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
    // Grows to the largest frame seen, then is reused (resize within capacity keeps the prefix).
    if (receive_words_.size() < words) receive_words_.resize(words);
    reading_body_ = true;
    if (received_ < expected_) {
      ReadMore();
      return;
    }
  }
  const std::size_t length = expected_;
  received_ = 0;
  expected_ = authenticating() ? auth::kRecordHeaderBytes : wire::kFramePrefixBytes;
  reading_body_ = false;
  ++counters_.frames_received;
  delivering_ = true;
  DeliverFrame(std::span<const std::byte>(receive_bytes(), length));
  delivering_ = false;
  // The driver may have closed this channel while handling the frame.
  if (state_ == State::kOpen) {
    ReadMore();
  } else {
    ReleaseReceiveBuffer();
  }
}

std::size_t FrameChannel::FrameLimit() const {
  if (dialled || heard_ || proved_) return options_.max_frame_bytes;
  return std::min(options_.max_frame_bytes, options_.max_first_frame_bytes);
}

void FrameChannel::ReleaseReceiveBuffer() {
  constexpr std::size_t kInitialWords = kInitialReceiveBytes / sizeof(std::uint64_t);
  if (delivering_ || receive_words_.size() <= kInitialWords) return;
  std::vector<std::uint64_t>(kInitialWords).swap(receive_words_);
}

void FrameChannel::DeliverFrame(std::span<const std::byte> frame) {
  if (authenticating()) {
    const Result<std::span<const std::byte>> payload = auth_.Open(frame);
    if (!payload.ok()) {
      RejectUnauthenticated("record");
      return;
    }
    frame = payload.value();  // 8-byte aligned: the record header is 16 bytes
    if (frame.empty()) {
      // The initiator's key confirmation: not a first frame (the hello deadline still applies).
      proved_ = true;
      return;
    }
  }
  heard_ = true;
  events_.OnChannelFrame(*this, frame);
}

FrameChannel::SendSlot* FrameChannel::NextSlot() {
  if (dialled && state_ != State::kOpen) {
    // Not connected: only the newest frame waits. Sessions re-send what matters (a Join every
    // retry, a model every round), and a backlog of stale retries would reach the peer all at
    // once when the connection comes up (each Join makes a server send the whole model again).
    DropQueue();
  }
  if (queued_ == slots_.size()) return nullptr;
  return &slots_[(head_ + queued_) % slots_.size()];
}

bool FrameChannel::Send(std::span<const std::byte> frame) {
  SendSlot* slot = NextSlot();
  if (slot == nullptr) return false;
  // Every free slot grows at once: which slot the largest frame lands in varies with the mix of
  // frames (heartbeats between updates), and after warm-up none may allocate.
  if (slot->own.capacity < frame.size()) GrowFreeSlots(frame.size());
  if (CanWriteNow()) {
    WriteNow(*slot, frame);
    return true;
  }
  if (!frame.empty()) std::memcpy(slot->own.storage.get(), frame.data(), frame.size());
  slot->own.size = frame.size();
  Enqueue(*slot, slot->own);
  return true;
}

bool FrameChannel::CanWriteNow() const {
  return state_ == State::kOpen && established_ && !writing_ && queued_ == 0 &&
         !confirmation_owed_ && tls_context_ == nullptr &&
         (!authenticating() || auth_.established());
}

void FrameChannel::WriteNow(SendSlot& slot, std::span<const std::byte> frame) {
  std::span<const std::byte> header;
  std::span<const std::byte> tag;
  if (authenticating()) {
    if (!Seal(slot, frame)) return;
    header = slot.record_header;
    tag = slot.record_tag;
  }
  const std::array<asio::const_buffer, 3> record{asio::buffer(header.data(), header.size()),
                                                 asio::buffer(frame.data(), frame.size()),
                                                 asio::buffer(tag.data(), tag.size())};
  asio::error_code error;  // would_block, or a failure the queued write then reports
  const std::size_t written = socket_.write_some(record, error);
  counters_.bytes_sent += written;
  const std::size_t record_bytes = header.size() + frame.size() + tag.size();
  if (written == record_bytes) {
    ++counters_.frames_sent;
    return;
  }
  // The rest, sealed for this connection, waits in the slot: only the unwritten part of the
  // frame is copied.
  slot.header_written = std::min(written, header.size());
  const std::size_t frame_written = std::min(written - slot.header_written, frame.size());
  slot.tag_written = written - slot.header_written - frame_written;
  const std::span<const std::byte> unwritten = frame.subspan(frame_written);
  if (!unwritten.empty()) {
    std::memcpy(slot.own.storage.get(), unwritten.data(), unwritten.size());
  }
  slot.own.size = unwritten.size();
  slot.rest = true;
  Enqueue(slot, slot.own);
}

bool FrameChannel::Send(SharedFrame& frame) {
  SendSlot* slot = NextSlot();
  if (slot == nullptr) return false;
  SharedFramePool::Hold(frame);
  Enqueue(*slot, frame);
  return true;
}

void FrameChannel::Enqueue(SendSlot& slot, SharedFrame& frame) {
  slot.frame = &frame;
  ++queued_;
  if (state_ == State::kOpen && !writing_) WriteFront();
}

void FrameChannel::GrowFreeSlots(std::size_t bytes) {
  for (std::size_t i = queued_; i < slots_.size(); ++i) {
    slots_[(head_ + i) % slots_.size()].own.Reserve(bytes);
  }
}

void FrameChannel::Dequeue() {
  SendSlot& slot = slots_[head_];
  if (slot.frame != &slot.own) frames_.Release(*slot.frame);
  slot.frame = nullptr;
  slot.rest = false;
  slot.header_written = 0;
  slot.tag_written = 0;
  --queued_;
  // An empty queue starts again at the first slot, so slots beyond the depth the queue really
  // reaches are never written: their buffers, allocated but untouched, take no memory.
  head_ = queued_ == 0 ? 0 : (head_ + 1) % slots_.size();
}

void FrameChannel::DropQueue() {
  while (queued_ > 0) Dequeue();
}

FrameChannel::~FrameChannel() { DropQueue(); }

void FrameChannel::WriteFront() {
  if (tls_pending()) return;  // written once the TLS handshake is done
  if (confirmation_owed_) {
    WriteConfirmation();
    return;
  }
  SendSlot& slot = slots_[head_];
  const std::span<const std::byte> frame = slot.frame->bytes();
  std::array<asio::const_buffer, 3> record{asio::const_buffer(),
                                           asio::buffer(frame.data(), frame.size()),
                                           asio::const_buffer()};
  if (authenticating()) {
    // Sealed here, not in Send: each connection has its own keys and sequence numbers, and a
    // dialled peer's queue outlives its connection. The rest of a direct write is sealed.
    if (!slot.rest) {
      if (!auth_.established()) return;  // written once the hellos are done
      if (!Seal(slot, frame)) return;
    }
    record[0] = asio::buffer(slot.record_header) + slot.header_written;
    record[2] = asio::buffer(slot.record_tag) + slot.tag_written;
  }
  writing_ = true;
  write_started_ = events_.ChannelNow();
  events_.OnChannelDeadline(NextDeadline());
  ++pending_;
  AsyncWrite(record, [this](const asio::error_code& error, std::size_t bytes) {
    const Completion completion(*this);
    OnWritten(error, bytes);
  });
}

void FrameChannel::OnWritten(const asio::error_code& error, std::size_t bytes) {
  writing_ = false;
  if (state_ != State::kOpen) return;
  if (error) {
    Close(CloseReason::kEndOfStream);
    return;
  }
  ++counters_.frames_sent;
  counters_.bytes_sent += bytes;
  Dequeue();
  if (queued_ > 0) WriteFront();
}

void FrameChannel::Close(CloseReason reason, bool silent) {
  if (state_ == State::kClosed) return;
  const bool was_open = state_ == State::kOpen;
  state_ = State::kClosed;
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  // A dialled peer keeps its queue across reconnects: frames handed out while it was
  // (re)connecting go out on the next connection (a stale one is rejected by the session).
  // An accepted connection's queue dies with it: its peer comes back on a new one.
  if (!dialled) DropQueue();
  // The rest of a record written in part belongs to this connection's stream alone.
  if (queued_ > 0 && slots_[head_].rest) Dequeue();
  writing_ = false;
  received_ = 0;
  ReleaseReceiveBuffer();
  // The TLS stream object stays until the channel reopens: pending handlers still hold it.
  tls_ready_ = false;
  auth_.Reset();  // this connection's keys are of no further use
  if (was_open) ++counters_.disconnects;
  if (!silent) events_.OnChannelClosed(*this, reason);
}

void FrameChannel::ShutdownSend() {
  if (state_ != State::kOpen) return;
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
}

void FrameChannel::CheckDeadlines(TimeNs now) {
  if (state_ == State::kConnecting) {
    if (now - connect_started_ > options_.hello_timeout_ns) Close(CloseReason::kConnectTimeout);
    return;
  }
  if (state_ != State::kOpen) return;
  if (tls_pending() && now - opened_at > options_.hello_timeout_ns) {
    ++counters_.tls_failures;
    platform::Log(platform::LogLevel::kWarning, "%s: TLS handshake not done within %.1f s: closing",
                  options_.log_name, static_cast<double>(options_.hello_timeout_ns) * 1e-9);
    Close(CloseReason::kTlsFailed);
    return;
  }
  if (!bound && !heard_ && now - opened_at > options_.hello_timeout_ns) {
    ++counters_.hello_timeouts;
    ++counters_.unidentified;
    Close(CloseReason::kHelloTimeout);
    return;
  }
  if (!dialled && options_.idle_timeout_ns != kNever &&
      now - last_read_ > options_.idle_timeout_ns) {
    // Bytes the low watermark keeps from waking the reader still show the peer is alive.
    if (!MoreBytesWaiting()) {
      ++counters_.idle_timeouts;
      Close(CloseReason::kIdleTimeout);
      return;
    }
    last_read_ = now;
  }
  if (writing_ && now - write_started_ > options_.write_timeout_ns) {
    ++counters_.write_timeouts;
    Close(CloseReason::kWriteTimeout);
  }
}

bool FrameChannel::MoreBytesWaiting() {
  if (low_watermark_ <= 1) return false;
  asio::error_code code;
  const std::size_t waiting = socket_.available(code);
  if (code || waiting <= waiting_at_idle_check_) return false;
  waiting_at_idle_check_ = waiting;
  return true;
}

TimeNs FrameChannel::NextDeadline() const {
  if (state_ == State::kConnecting) {
    return DeadlineAfter(connect_started_, options_.hello_timeout_ns);
  }
  if (state_ != State::kOpen) return kNever;
  TimeNs next = kNever;
  if (tls_pending() || (!bound && !heard_)) {
    next = DeadlineAfter(opened_at, options_.hello_timeout_ns);
  }
  if (!dialled) next = std::min(next, DeadlineAfter(last_read_, options_.idle_timeout_ns));
  if (writing_) next = std::min(next, DeadlineAfter(write_started_, options_.write_timeout_ns));
  return next;
}

}  // namespace edgesgd::tcp::internal
