// FrameChannel's send queue over a real loopback connection whose far end is a plain socket the
// test reads (or does not read) at will: what the channel writes is exactly the frames it was
// given, in order, even when a larger frame is queued while a write is still in progress.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgesgd/tcp/asio.h"
#include "frame_channel.h"

namespace edgesgd::tcp::internal {
namespace {

class RecordingEvents final : public ChannelEvents {
 public:
  void OnChannelFrame(FrameChannel&, std::span<const std::byte>) override {}
  void OnChannelClosed(FrameChannel&, CloseReason reason) override {
    closed = true;
    close_reason = reason;
  }
  void OnChannelConnected(FrameChannel&) override { connected = true; }
  void OnChannelDeadline(TimeNs) override {}
  void OnChannelHandled(FrameChannel&) override {}
  TimeNs ChannelNow() const override {
    return static_cast<TimeNs>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
  }

  bool connected = false;
  bool closed = false;
  CloseReason close_reason = CloseReason::kEndOfStream;
};

std::vector<std::byte> Pattern(std::size_t bytes, std::uint8_t seed) {
  std::vector<std::byte> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    out[i] = static_cast<std::byte>((i * 131 + seed) & 0xFF);
  }
  return out;
}

// The first write stalls (the far end does not read, and both socket buffers are small), so the
// second, larger frame is queued while the first is being written: the queue must grow without
// moving the bytes that write still reads.
TEST(FrameChannelTest, LargerFrameQueuedDuringAWriteArrivesIntact) {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  asio::ip::tcp::socket far_end(io);
  bool accepted = false;
  acceptor.async_accept(far_end, [&](const asio::error_code& error) { accepted = !error; });

  RecordingEvents events;
  DriverOptions options;
  options.send_queue_frames = 4;
  DriverCounters counters;
  FrameChannel channel(io, events, options, counters, nullptr);
  channel.Connect(acceptor.local_endpoint());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(events.connected && accepted) && std::chrono::steady_clock::now() < give_up) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(events.connected && accepted);
  far_end.set_option(asio::socket_base::receive_buffer_size(1 << 16));
  channel.socket().set_option(asio::socket_base::send_buffer_size(1 << 16));

  const std::vector<std::byte> first = Pattern(std::size_t{4} << 20, 1);
  const std::vector<std::byte> second = Pattern(std::size_t{8} << 20, 2);
  ASSERT_TRUE(channel.Send(first));
  io.run_for(std::chrono::milliseconds(50));
  ASSERT_EQ(channel.queued_frames(), 1u) << "the first write finished before the test could "
                                            "queue behind it";
  ASSERT_TRUE(channel.Send(second));

  std::vector<std::byte> received(first.size() + second.size());
  bool read_done = false;
  asio::async_read(far_end, asio::buffer(received.data(), received.size()),
                   [&](const asio::error_code& error, std::size_t) { read_done = !error; });
  while (!read_done && !events.closed && std::chrono::steady_clock::now() < give_up) {
    io.run_one_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(read_done) << "closed " << events.closed << " queued " << channel.queued_frames();
  EXPECT_FALSE(events.closed);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), received.begin()));
  EXPECT_TRUE(std::equal(second.begin(), second.end(),
                         received.begin() + static_cast<std::ptrdiff_t>(first.size())));
  channel.Close(CloseReason::kShutdown, true);
  io.poll();
}

}  // namespace
}  // namespace edgesgd::tcp::internal
