// The reliable serial link (edgesgd/serial/link.h): two ends on a byte channel that loses,
// corrupts and repeats bytes deliver every message once and in order, one frame in flight at a
// time; a restarted end resynchronises both directions; an end whose peer is gone reports failure
// after its attempts; bad input is counted, never delivered.

#include "edgesgd/serial/link.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace edgesgd::serial {
namespace {

using Bytes = std::vector<std::byte>;
constexpr std::size_t kMaxPayload = 300;
constexpr TimeNs kMs = 1'000'000;

bool Aligned(std::span<const std::byte> payload) {
  return reinterpret_cast<std::uintptr_t>(payload.data()) % Link::kPayloadAlignment == 0;
}

// One end: its link, its memory and what it received.
struct End {
  explicit End(const LinkOptions& options = {}) : memory(Link::BufferBytes(kMaxPayload)) {
    EXPECT_TRUE(link.Init(memory, kMaxPayload, options).ok());
  }
  Bytes memory;
  Link link;
  std::vector<Bytes> received;
};

// Bytes on their way from one end to the other, with faults drawn per byte.
struct Channel {
  std::deque<std::byte> bytes = {};
  double loss = 0;
  double corruption = 0;
  double duplication = 0;
  std::mt19937 engine{7};
  bool cut = false;  // the cable is unplugged: everything is lost

  void Carry(std::span<const std::byte> written) {
    std::uniform_real_distribution<double> draw(0.0, 1.0);
    for (std::byte b : written) {
      if (cut || draw(engine) < loss) continue;
      if (draw(engine) < corruption) b ^= std::byte{static_cast<std::uint8_t>(1u << (engine() % 8))};
      bytes.push_back(b);
      if (draw(engine) < duplication) bytes.push_back(b);
    }
  }
};

Bytes Message(std::uint32_t index) {
  Bytes message(1 + index % kMaxPayload);
  for (std::size_t i = 0; i < message.size(); ++i) {
    message[i] = static_cast<std::byte>((index * 31 + i * 7) % 256);  // zeros included
  }
  return message;
}

// Sends messages 0..count-1 as fast as the link takes them.
struct Sender {
  std::uint32_t next = 0;
  std::uint32_t count = 0;
  void Offer(End& end, TimeNs now) {
    if (next < count && end.link.CanSend()) {
      ASSERT_TRUE(end.link.Send(Message(next), now).ok());
      ++next;
    }
  }
};

// Two started ends on a line, a to b over `ab` and b to a over `ba`.
struct Line {
  explicit Line(const LinkOptions& options = {}) : a(options), b(options) {
    a.link.Start(now, 1);
    b.link.Start(now, 2);
  }

  // `steps` steps of 1 ms: bytes move both ways in chunks of up to 37, timers fire, and a sends
  // messages 0..to_b-1 and b messages 0..to_a-1 as the link takes them (counting afresh each call).
  void Run(int steps, std::uint32_t to_b = 0, std::uint32_t to_a = 0) {
    constexpr std::size_t kChunk = 37;
    Sender a_sends{.count = to_b};
    Sender b_sends{.count = to_a};
    for (int step = 0; step < steps; ++step) {
      for (auto [from, to, channel, sender] : {std::tuple{&a, &b, &ab, &a_sends},
                                               std::tuple{&b, &a, &ba, &b_sends}}) {
        sender->Offer(*from, now);
        const std::span<const std::byte> out = from->link.Output();
        const std::size_t n = std::min(out.size(), kChunk);
        channel->Carry(out.first(n));
        from->link.Written(n);
        Bytes arrived;
        while (!channel->bytes.empty() && arrived.size() < kChunk) {
          arrived.push_back(channel->bytes.front());
          channel->bytes.pop_front();
        }
        std::span<const std::byte> rest(arrived);
        while (!rest.empty()) {
          const FrameDecoder::Step got = to->link.Receive(rest);
          if (got.delivered) {
            EXPECT_TRUE(Aligned(got.frame));
            to->received.emplace_back(got.frame.begin(), got.frame.end());
          }
          rest = rest.subspan(got.consumed);
        }
      }
      now += kMs;
      for (End* end : {&a, &b}) {
        if (end->link.NextWakeup() <= now) end->link.OnTimer(now);
      }
    }
  }

  TimeNs now = 0;
  End a, b;
  Channel ab, ba;
};

TEST(SerialLinkTest, AHandshakeThenMessagesBothWaysOnAClearLine) {
  Line line;
  EXPECT_FALSE(line.a.link.CanSend());
  line.Run(2000, 40, 40);
  ASSERT_EQ(line.b.received.size(), 40u);
  ASSERT_EQ(line.a.received.size(), 40u);
  for (std::uint32_t i = 0; i < 40; ++i) {
    EXPECT_EQ(line.b.received[i], Message(i));
    EXPECT_EQ(line.a.received[i], Message(i));
  }
  EXPECT_EQ(line.a.link.counters().retransmissions, 0u);
  EXPECT_EQ(line.b.link.counters().duplicates, 0u);
}

TEST(SerialLinkTest, OneFrameInFlight) {
  Line line;
  Link& a = line.a.link;
  line.Run(20);
  ASSERT_EQ(a.state(), LinkState::kReady);
  ASSERT_TRUE(a.Send(Message(1), line.now).ok());
  EXPECT_FALSE(a.CanSend());
  EXPECT_EQ(a.Send(Message(2), line.now).code(), StatusCode::kUnavailable);
  EXPECT_EQ(a.Send(Bytes(kMaxPayload + 1), line.now).code(), StatusCode::kUnavailable);
  line.Run(20);
  EXPECT_TRUE(a.CanSend());
  EXPECT_EQ(a.Send(Bytes(kMaxPayload + 1), line.now).code(), StatusCode::kInvalidArgument);
}

TEST(SerialLinkTest, EveryMessageOnceAndInOrderThroughLostCorruptedAndRepeatedBytes) {
  Line line({.retransmit_ns = 30 * kMs, .max_attempts = 1000});
  for (Channel* channel : {&line.ab, &line.ba}) {
    channel->loss = 0.002;
    channel->corruption = 0.002;
    channel->duplication = 0.002;
  }
  line.Run(60000, 200);
  ASSERT_EQ(line.b.received.size(), 200u);
  for (std::uint32_t i = 0; i < 200; ++i) ASSERT_EQ(line.b.received[i], Message(i)) << i;
  // The faults were there, and were dealt with.
  EXPECT_GT(line.a.link.counters().retransmissions, 0u);
  EXPECT_GT(line.b.link.decoder_counters().rejected(), 0u);
  EXPECT_EQ(line.b.link.counters().delivered, 200u);
}

TEST(SerialLinkTest, ARestartedEndResynchronisesBothDirections) {
  Line line;
  line.Run(200, 10);
  ASSERT_EQ(line.b.received.size(), 10u);
  // A frame is on its way when b resets (a microcontroller reboot): a fresh link, expecting
  // sequence 0 again. a learns of it from b's kSync and abandons the frame (the sessions above
  // send again what matters); then both directions start over.
  ASSERT_TRUE(line.a.link.Send(Message(99), line.now).ok());
  line.b.link.Start(line.now, 3);
  line.Run(50);
  EXPECT_EQ(line.a.link.counters().abandoned, 1u);
  EXPECT_EQ(line.b.received.size(), 10u);
  line.Run(400, 5);
  ASSERT_EQ(line.b.received.size(), 15u);
  for (std::uint32_t i = 0; i < 5; ++i) EXPECT_EQ(line.b.received[10 + i], Message(i));
  EXPECT_GE(line.a.link.counters().resyncs, 2u);
  EXPECT_EQ(line.a.link.state(), LinkState::kReady);
  // a saw b's new nonce once; b, started afresh, learnt a's as its first.
  EXPECT_EQ(line.a.link.counters().peer_restarts, 1u);
  EXPECT_EQ(line.b.link.counters().peer_restarts, 0u);
}

TEST(SerialLinkTest, DeliveredPayloadsAreAlignedWhateverTheMemorysAlignment) {
  // Memory at every offset from an 8-byte boundary: the payload after the header still lands on
  // one, so a session decodes it in place.
  std::vector<std::uint64_t> words(Link::BufferBytes(kMaxPayload) / 8 + 2);
  for (std::size_t offset = 0; offset < Link::kPayloadAlignment; ++offset) {
    const std::span<std::byte> memory =
        std::as_writable_bytes(std::span(words)).subspan(offset, Link::BufferBytes(kMaxPayload));
    Line line;
    ASSERT_TRUE(line.b.link.Init(memory, kMaxPayload, {}).ok());
    line.b.link.Start(line.now, 2);
    line.Run(100, 3);
    ASSERT_EQ(line.b.received.size(), 3u) << offset;
    EXPECT_EQ(line.b.received.back(), Message(2));
  }
}

TEST(SerialLinkTest, IdleOnceEverythingIsAcknowledgedAndWritten) {
  Line line({.retransmit_ns = 10 * kMs, .max_attempts = 3});
  EXPECT_FALSE(line.a.link.Idle());  // its kSync is unanswered
  line.Run(20);
  EXPECT_TRUE(line.a.link.Idle());
  EXPECT_TRUE(line.b.link.Idle());
  ASSERT_TRUE(line.a.link.Send(Message(5), line.now).ok());
  EXPECT_FALSE(line.a.link.Idle());
  // Written but not yet acknowledged: still busy. The receiver owes an acknowledgement.
  const std::size_t length = line.a.link.Output().size();
  line.ab.Carry(line.a.link.Output());
  line.a.link.Written(length);
  EXPECT_FALSE(line.a.link.Idle());
  Bytes arrived(line.ab.bytes.begin(), line.ab.bytes.end());
  line.ab.bytes.clear();
  std::span<const std::byte> rest(arrived);
  while (!rest.empty()) rest = rest.subspan(line.b.link.Receive(rest).consumed);
  EXPECT_FALSE(line.b.link.Idle());
  line.Run(5);
  EXPECT_TRUE(line.a.link.Idle());
  EXPECT_TRUE(line.b.link.Idle());
  // A failed link has nothing left to send.
  line.ab.cut = true;
  ASSERT_TRUE(line.a.link.Send(Message(6), line.now).ok());
  line.Run(100);
  EXPECT_EQ(line.a.link.state(), LinkState::kFailed);
  EXPECT_TRUE(line.a.link.Idle());
}

TEST(SerialLinkTest, AVanishedPeerMakesTheLinkFailAfterItsAttempts) {
  Line line({.retransmit_ns = 10 * kMs, .max_attempts = 5});
  Link& a = line.a.link;
  line.Run(20);
  ASSERT_TRUE(a.Send(Message(3), line.now).ok());
  line.ab.cut = true;
  line.Run(100);
  EXPECT_EQ(a.state(), LinkState::kFailed);
  EXPECT_EQ(a.counters().retransmissions, 4u);
  EXPECT_EQ(a.NextWakeup(), kNever);
  // Plugged back in and restarted, it works again.
  line.ab.cut = false;
  a.Start(line.now, 9);
  line.Run(100, 1);
  ASSERT_FALSE(line.b.received.empty());
  EXPECT_EQ(line.b.received.back(), Message(0));
}

// A frame's own time on the line is added to the wait for its acknowledgement: a long frame on
// a slow line is not sent again while it is still being received.
TEST(SerialLinkTest, TheRetransmissionWaitGrowsWithTheFrame) {
  End end({.retransmit_ns = 10 * kMs, .byte_ns = 1000, .max_attempts = 5});
  Link& link = end.link;
  link.Start(0, 1);
  const std::size_t sync_bytes = link.Output().size();
  EXPECT_EQ(link.NextWakeup(), 10 * kMs + sync_bytes * 1000);
  link.Written(sync_bytes);
  link.OnTimer(link.NextWakeup());
  EXPECT_EQ(link.counters().retransmissions, 1u);
  EXPECT_EQ(link.NextWakeup(), 2 * (10 * kMs + sync_bytes * 1000));
}

TEST(SerialLinkTest, GarbageIsCountedAndNeverDelivered) {
  End a;
  TimeNs now = 0;
  a.link.Start(now, 1);
  std::mt19937 engine(3);
  Bytes garbage(5000);
  for (std::byte& b : garbage) b = static_cast<std::byte>(engine() % 256);
  std::span<const std::byte> rest(garbage);
  while (!rest.empty()) {
    const FrameDecoder::Step got = a.link.Receive(rest);
    EXPECT_FALSE(got.delivered);
    rest = rest.subspan(got.consumed);
  }
  EXPECT_GT(a.link.decoder_counters().rejected(), 0u);
  EXPECT_TRUE(a.received.empty());
}

TEST(SerialLinkTest, InitChecksItsArguments) {
  Bytes memory(Link::BufferBytes(kMaxPayload));
  Link link;
  EXPECT_EQ(link.Init(memory, 0, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(link.Init(memory, kMaxPayload, {.max_attempts = 0}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(link.Init(std::span(memory).first(memory.size() - 1), kMaxPayload, {}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(link.Init(memory, kMaxPayload, {}).ok());
}

}  // namespace
}  // namespace edgesgd::serial
