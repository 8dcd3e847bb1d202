#include "frame_channel.h"

#include <algorithm>
#include <cstring>

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
  }
  return "closed";
}

namespace {
// First receive buffer: any control frame, and small models, without growing.
constexpr std::size_t kInitialReceiveBytes = 4096;
}  // namespace

FrameChannel::FrameChannel(asio::io_context& io, ChannelEvents& events,
                           const DriverOptions& options, DriverCounters& counters)
    : socket_(io),
      events_(events),
      options_(options),
      counters_(counters),
      receive_words_(kInitialReceiveBytes / sizeof(std::uint64_t)),
      slots_(std::max<std::size_t>(options.send_queue_frames, 1)) {}

void FrameChannel::BeginAccepted() {
  state_ = State::kOpen;
  Opened();
}

void FrameChannel::Connect(const asio::ip::tcp::endpoint& endpoint) {
  state_ = State::kConnecting;
  connect_started_ = events_.ChannelNow();
  ++pending_;
  socket_.async_connect(endpoint, [this](const asio::error_code& error) {
    --pending_;
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
  opened_at = events_.ChannelNow();
  last_read_ = opened_at;
  heard_ = false;
  received_ = 0;
  expected_ = wire::kFramePrefixBytes;
  reading_body_ = false;
  ReadMore();
}

void FrameChannel::ReadMore() {
  ++pending_;
  socket_.async_read_some(
      asio::buffer(receive_bytes() + received_, expected_ - received_),
      [this](const asio::error_code& error, std::size_t bytes) {
        --pending_;
        OnRead(error, bytes);
      });
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
  if (received_ < expected_) {
    ReadMore();
    return;
  }
  if (!reading_body_) {
    const Result<std::size_t> length = wire::ReadFrameLength(
        std::span<const std::byte>(receive_bytes(), received_), options_.max_frame_bytes);
    if (!length.ok()) {
      const bool oversized = length.status().code() == StatusCode::kOutOfRange;
      std::uint32_t announced = 0;
      std::memcpy(&announced, receive_bytes(), sizeof(announced));
      if (oversized) {
        ++counters_.oversized_frames;
      } else {
        ++counters_.malformed_prefixes;
      }
      platform::Log(platform::LogLevel::kWarning,
                    "%s: peer %u announced a frame of %u bytes (limit %zu): closing",
                    options_.log_name, bound ? peer : 0u, announced, options_.max_frame_bytes);
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
  expected_ = wire::kFramePrefixBytes;
  reading_body_ = false;
  heard_ = true;
  ++counters_.frames_received;
  DeliverFrame(std::span<const std::byte>(receive_bytes(), length));
  // The driver may have closed this channel while handling the frame.
  if (state_ == State::kOpen) ReadMore();
}

void FrameChannel::DeliverFrame(std::span<const std::byte> frame) {
  events_.OnChannelFrame(*this, frame);
}

bool FrameChannel::Send(std::span<const std::byte> frame) {
  if (queued_ == slots_.size()) return false;
  std::vector<std::byte>& slot = slots_[(head_ + queued_) % slots_.size()];
  slot.resize(frame.size());  // within capacity after warm-up
  std::memcpy(slot.data(), frame.data(), frame.size());
  ++queued_;
  if (state_ == State::kOpen && !writing_) WriteFront();
  return true;
}

void FrameChannel::WriteFront() {
  writing_ = true;
  write_started_ = events_.ChannelNow();
  ++pending_;
  asio::async_write(socket_, asio::buffer(slots_[head_]),
                    [this](const asio::error_code& error, std::size_t bytes) {
                      --pending_;
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
  head_ = (head_ + 1) % slots_.size();
  --queued_;
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
  if (!dialled) queued_ = 0;
  writing_ = false;
  received_ = 0;
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
  if (!bound && !heard_ && now - opened_at > options_.hello_timeout_ns) {
    ++counters_.hello_timeouts;
    ++counters_.unidentified;
    Close(CloseReason::kHelloTimeout);
    return;
  }
  if (!dialled && options_.idle_timeout_ns != kNever && now - last_read_ > options_.idle_timeout_ns) {
    ++counters_.idle_timeouts;
    Close(CloseReason::kIdleTimeout);
    return;
  }
  if (writing_ && now - write_started_ > options_.write_timeout_ns) {
    ++counters_.write_timeouts;
    Close(CloseReason::kWriteTimeout);
  }
}

}  // namespace edgesgd::tcp::internal
