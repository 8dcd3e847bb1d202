// FrameChannel's send queue over real loopback connections whose far ends are plain sockets the
// test reads (or does not read) at will: what a channel writes is exactly the frames it was
// given, in order, even when a larger frame is queued while a write is still in progress; a
// frame shared by several channels is written by each and goes back to the pool once the last
// of them is done with it; a frame the socket takes at once is not queued, and the rest of one
// it takes in part is queued without being sealed twice.

#include "frame_channel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "edgesgd/auth/key_ring.h"
#include "edgesgd/tcp/asio.h"

namespace edgesgd::tcp::internal {
namespace {

class RecordingEvents final : public ChannelEvents {
 public:
  void OnChannelFrame(FrameChannel&, std::span<const std::byte> frame) override {
    frames.emplace_back(frame.begin(), frame.end());
  }
  void OnChannelClosed(FrameChannel&, CloseReason) override { ++closed; }
  void OnChannelConnected(FrameChannel&) override { ++connected; }
  void OnChannelDeadline(TimeNs) override {}
  void OnChannelHandled(FrameChannel&) override {}
  TimeNs ChannelNow() const override {
    return static_cast<TimeNs>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
  }

  int connected = 0;
  int closed = 0;
  std::vector<std::vector<std::byte>> frames;
};

std::vector<std::byte> Pattern(std::size_t bytes, std::uint8_t seed) {
  std::vector<std::byte> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    out[i] = static_cast<std::byte>((i * 131 + seed) & 0xFF);
  }
  return out;
}

// `bytes` bytes that read as one frame: the length prefix, then a pattern.
std::vector<std::byte> PrefixedFrame(std::size_t bytes, std::uint8_t seed) {
  std::vector<std::byte> frame = Pattern(bytes, seed);
  const auto body = static_cast<std::uint32_t>(bytes - sizeof(std::uint32_t));
  std::memcpy(frame.data(), &body, sizeof(body));
  return frame;
}

// Channels dialled to plain sockets accepted by the test.
class FrameChannelTest : public ::testing::Test {
 protected:
  FrameChannelTest() { options_.send_queue_frames = 4; }

  // A connected channel and its far end, or nullptr when the connection did not come up.
  FrameChannel* Connect() {
    asio::ip::tcp::acceptor acceptor(io_,
                                     asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    far_ends_.push_back(std::make_unique<asio::ip::tcp::socket>(io_));
    bool accepted = false;
    acceptor.async_accept(*far_ends_.back(),
                          [&](const asio::error_code& error) { accepted = !error; });
    channels_.push_back(
        std::make_unique<FrameChannel>(io_, events_, options_, counters_, nullptr, pool_));
    FrameChannel& channel = *channels_.back();
    channel.dialled = true;
    const int connected_before = events_.connected;
    channel.Connect(acceptor.local_endpoint());
    RunUntil([&] { return accepted && events_.connected > connected_before; });
    return accepted && channel.connected() ? &channel : nullptr;
  }

  // Small socket buffers at both ends of a connection, so that a large frame stalls while the
  // reading end does not read.
  static void ShrinkBuffers(asio::ip::tcp::socket& reader, asio::ip::tcp::socket& writer) {
    reader.set_option(asio::socket_base::receive_buffer_size(1 << 16));
    writer.set_option(asio::socket_base::send_buffer_size(1 << 16));
  }

  // Writes `bytes` from far end `index` (blocking: they fit the socket buffers).
  void Write(std::size_t index, std::span<const std::byte> bytes) {
    asio::write(*far_ends_[index], asio::buffer(bytes.data(), bytes.size()));
  }

  // Reads exactly `bytes` bytes from far end `index`; empty if they did not all arrive.
  std::vector<std::byte> Read(std::size_t index, std::size_t bytes) {
    std::vector<std::byte> received(bytes);
    bool done = false;
    asio::async_read(*far_ends_[index], asio::buffer(received.data(), received.size()),
                     [&](const asio::error_code& error, std::size_t) { done = !error; });
    RunUntil([&] { return done; });
    return done ? received : std::vector<std::byte>();
  }

  template <typename Predicate>
  void RunUntil(Predicate done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      io_.run_one_for(std::chrono::milliseconds(100));
    }
  }

  asio::io_context io_;
  RecordingEvents events_;
  DriverOptions options_;
  DriverCounters counters_;
  SharedFramePool pool_;  // outlives the channels
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> far_ends_;
  std::vector<std::unique_ptr<FrameChannel>> channels_;
};

// The first write stalls (the far end does not read, and both socket buffers are small), so the
// second, larger frame is copied into the queue while the first is being written from it.
TEST_F(FrameChannelTest, LargerFrameQueuedDuringAWriteArrivesIntact) {
  FrameChannel* channel = Connect();
  ASSERT_NE(channel, nullptr);
  ShrinkBuffers(*far_ends_[0], channel->socket());

  const std::vector<std::byte> first = Pattern(std::size_t{4} << 20, 1);
  const std::vector<std::byte> second = Pattern(std::size_t{8} << 20, 2);
  ASSERT_TRUE(channel->Send(std::span<const std::byte>(first)));
  io_.run_for(std::chrono::milliseconds(50));
  ASSERT_EQ(channel->queued_frames(), 1u) << "the first write finished before the test could "
                                             "queue behind it";
  ASSERT_TRUE(channel->Send(std::span<const std::byte>(second)));

  const std::vector<std::byte> received = Read(0, first.size() + second.size());
  ASSERT_EQ(received.size(), first.size() + second.size()) << "closed " << events_.closed;
  EXPECT_EQ(events_.closed, 0);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), received.begin()));
  EXPECT_TRUE(std::equal(second.begin(), second.end(),
                         received.begin() + static_cast<std::ptrdiff_t>(first.size())));
}

// A frame the socket takes whole is written at once: nothing is queued or copied.
TEST_F(FrameChannelTest, AFrameTheSocketTakesIsWrittenWithoutQueueing) {
  FrameChannel* channel = Connect();
  ASSERT_NE(channel, nullptr);
  ASSERT_TRUE(channel->CanWriteNow());
  const std::vector<std::byte> frame = Pattern(4096, 7);
  ASSERT_TRUE(channel->Send(std::span<const std::byte>(frame)));
  EXPECT_EQ(channel->queued_frames(), 0u);
  EXPECT_EQ(counters_.frames_sent, 1u);
  EXPECT_EQ(counters_.bytes_sent, frame.size());
  EXPECT_EQ(Read(0, frame.size()), frame);
}

// The rest of a frame written in part is part of its connection's byte stream: a dialled
// channel that reconnects keeps the frames queued behind it, but not the rest.
TEST_F(FrameChannelTest, TheRestOfAFrameWrittenInPartDiesWithItsConnection) {
  FrameChannel* channel = Connect();
  ASSERT_NE(channel, nullptr);
  ShrinkBuffers(*far_ends_[0], channel->socket());
  const std::vector<std::byte> large = Pattern(std::size_t{4} << 20, 8);
  const std::vector<std::byte> small = Pattern(64, 9);
  ASSERT_TRUE(channel->Send(std::span<const std::byte>(large)));
  EXPECT_GT(counters_.bytes_sent, 0u);
  EXPECT_LT(counters_.bytes_sent, large.size());
  ASSERT_TRUE(channel->Send(std::span<const std::byte>(small)));
  EXPECT_EQ(channel->queued_frames(), 2u);
  channel->Close(CloseReason::kShutdown, /*silent=*/true);
  EXPECT_EQ(channel->queued_frames(), 1u);
}

// With authentication a frame written in part is sealed once: the rest of its record and the
// frame queued behind it (sealed when its turn comes) arrive authenticated, whole and in order.
TEST_F(FrameChannelTest, AnAuthenticatedFrameWrittenInPartArrivesWholeBeforeTheNext) {
  auth::FixedKeyRing<1> keys;
  std::array<std::byte, auth::kKeyBytes> key{};
  key.fill(std::byte{0x5c});
  ASSERT_TRUE(keys.Add(3, key).ok());
  options_.auth_keys = &keys;
  options_.auth_device = 3;
  asio::ip::tcp::acceptor acceptor(io_,
                                   asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  RecordingEvents receiver_events;
  FrameChannel receiver(io_, receiver_events, options_, counters_, nullptr, pool_);
  acceptor.async_accept(receiver.socket(), [&](const asio::error_code& error) {
    if (!error) receiver.BeginAccepted();
  });
  FrameChannel sender(io_, events_, options_, counters_, nullptr, pool_);
  sender.dialled = true;
  sender.Connect(acceptor.local_endpoint());
  RunUntil([&] { return sender.CanWriteNow(); });
  ASSERT_TRUE(sender.CanWriteNow()) << "the hellos did not finish";
  ShrinkBuffers(receiver.socket(), sender.socket());

  const std::vector<std::byte> first = PrefixedFrame(std::size_t{4} << 20, 10);
  const std::vector<std::byte> second = PrefixedFrame(std::size_t{1} << 20, 11);
  const std::uint64_t sent_before = counters_.bytes_sent;
  ASSERT_TRUE(sender.Send(std::span<const std::byte>(first)));
  EXPECT_GT(counters_.bytes_sent, sent_before);
  EXPECT_EQ(sender.queued_frames(), 1u) << "the socket took the whole record";
  ASSERT_TRUE(sender.Send(std::span<const std::byte>(second)));
  RunUntil([&] { return receiver_events.frames.size() == 2 || receiver_events.closed > 0; });
  ASSERT_EQ(receiver_events.frames.size(), 2u) << "closed " << receiver_events.closed;
  EXPECT_EQ(receiver_events.frames[0], first);
  EXPECT_EQ(receiver_events.frames[1], second);
  EXPECT_EQ(events_.closed, 0);
  sender.Close(CloseReason::kShutdown, /*silent=*/true);
  receiver.Close(CloseReason::kShutdown, /*silent=*/true);
  RunUntil([&] { return sender.reusable() && receiver.reusable(); });
}

// One copy written by three channels; the pool reuses it only once all three are done, and a
// channel that closes with the frame still queued lets go of it too.
TEST_F(FrameChannelTest, SharedFrameIsReusedOnceEveryChannelIsDone) {
  for (int i = 0; i < 3; ++i) ASSERT_NE(Connect(), nullptr);
  // The third channel's peer does not read, and its buffers are small: its write stalls.
  ShrinkBuffers(*far_ends_[2], channels_[2]->socket());
  const std::vector<std::byte> bytes = Pattern(std::size_t{4} << 20, 3);
  SharedFrame& frame = pool_.Copy(bytes);
  for (const std::unique_ptr<FrameChannel>& channel : channels_) {
    ASSERT_TRUE(channel->Send(frame));
  }
  pool_.Release(frame);
  EXPECT_EQ(frame.holders, 3u);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(Read(i, bytes.size()), bytes);
  RunUntil([&] { return frame.holders == 1; });
  EXPECT_EQ(frame.holders, 1u);
  // The pool does not hand out a frame a channel still holds.
  SharedFrame& other = pool_.Copy(Pattern(16, 4));
  EXPECT_NE(&other, &frame);
  pool_.Release(other);

  channels_[2]->dialled = false;  // an accepted connection's queue dies with it
  channels_[2]->Close(CloseReason::kShutdown, /*silent=*/true);
  EXPECT_EQ(frame.holders, 0u);
  // Both frames are free again: the next two copies reuse them, in some order.
  SharedFrame& reused_a = pool_.Copy(bytes);
  SharedFrame& reused_b = pool_.Copy(bytes);
  EXPECT_TRUE((&reused_a == &frame || &reused_b == &frame) &&
              (&reused_a == &other || &reused_b == &other));
  pool_.Release(reused_a);
  pool_.Release(reused_b);
}

// DriverOptions::socket_send_buffer_bytes reaches every connection the channel opens, and 0
// leaves the kernel's auto-tuned size alone. (Linux doubles the size; asio halves what it reads.)
TEST_F(FrameChannelTest, SocketSendBufferOptionSetsTheConnectionsBuffer) {
  FrameChannel* tuned_by_kernel = Connect();
  ASSERT_NE(tuned_by_kernel, nullptr);
  asio::socket_base::send_buffer_size kernel_size;
  tuned_by_kernel->socket().get_option(kernel_size);

  constexpr int kRequested = 96 * 1024;
  options_.socket_send_buffer_bytes = kRequested;
  FrameChannel* tuned = Connect();
  ASSERT_NE(tuned, nullptr);
  asio::socket_base::send_buffer_size size;
  tuned->socket().get_option(size);
  EXPECT_EQ(size.value(), kRequested);
  EXPECT_NE(kernel_size.value(), kRequested);

  // A frame many times the buffer still arrives whole.
  const std::vector<std::byte> bytes = Pattern(std::size_t{3} << 20, 5);
  ASSERT_TRUE(tuned->Send(std::span<const std::byte>(bytes)));
  EXPECT_EQ(Read(1, bytes.size()), bytes);
}

// A frame that arrives in pieces smaller than the receive low watermark, with pauses between
// them, is delivered once, whole.
TEST_F(FrameChannelTest, FrameArrivingBelowTheLowWatermarkIsDeliveredWhole) {
  options_.receive_low_watermark_bytes = std::size_t{256} << 10;
  ASSERT_NE(Connect(), nullptr);
  const std::vector<std::byte> frame = PrefixedFrame(std::size_t{1} << 20, 6);
  constexpr std::size_t kPiece = std::size_t{96} << 10;
  for (std::size_t at = 0; at < frame.size(); at += kPiece) {
    Write(0, std::span(frame).subspan(at, std::min(kPiece, frame.size() - at)));
    io_.run_for(std::chrono::milliseconds(5));
  }
  RunUntil([&] { return !events_.frames.empty(); });
  ASSERT_EQ(events_.frames.size(), 1u);
  EXPECT_EQ(events_.frames[0], frame);
  EXPECT_EQ(events_.closed, 0);
}

// Bytes the low watermark keeps from the reader still show that the peer is alive; an accepted
// connection whose peer then falls silent is closed as idle.
TEST_F(FrameChannelTest, BytesHeldBackByTheLowWatermarkKeepAConnectionFromIdling) {
  options_.receive_low_watermark_bytes = std::size_t{256} << 10;
  options_.idle_timeout_ns = 100 * kNsPerMs;
  FrameChannel* channel = Connect();
  ASSERT_NE(channel, nullptr);
  channel->dialled = false;  // idle checks apply to accepted connections
  const std::vector<std::byte> frame = PrefixedFrame(std::size_t{1} << 20, 7);
  constexpr std::size_t kPiece = std::size_t{32} << 10;
  std::size_t written = 0;
  const auto write_piece = [&] {
    Write(0, std::span(frame).subspan(written, kPiece));
    written += kPiece;
  };
  write_piece();
  io_.run_for(std::chrono::milliseconds(20));  // the prefix is read; the body waits
  for (int pause = 0; pause < 3; ++pause) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    write_piece();
    io_.run_for(std::chrono::milliseconds(5));
    channel->CheckDeadlines(events_.ChannelNow());
    ASSERT_EQ(events_.closed, 0) << "closed as idle while bytes kept arriving (pause " << pause
                                 << ")";
  }
  EXPECT_TRUE(events_.frames.empty()) << "the watermark let a read through below it";
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  channel->CheckDeadlines(events_.ChannelNow());
  EXPECT_EQ(events_.closed, 1);
  EXPECT_EQ(counters_.idle_timeouts, 1u);
}

}  // namespace
}  // namespace edgesgd::tcp::internal
