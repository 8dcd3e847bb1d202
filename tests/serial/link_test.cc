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

// Moves bytes both ways in chunks of up to `chunk` bytes and fires timers, for `steps` steps of
// 1 ms; `send` is called with each end whenever it can send.
template <typename Send>
void Exchange(End& a, End& b, Channel& ab, Channel& ba, TimeNs& now, int steps, Send send,
         std::size_t chunk = 37) {
  for (int step = 0; step < steps; ++step) {
    for (auto [from, to, channel] : {std::tuple{&a, &b, &ab}, std::tuple{&b, &a, &ba}}) {
      send(*from, now);
      const std::span<const std::byte> out = from->link.Output();
      const std::size_t n = std::min(out.size(), chunk);
      channel->Carry(out.first(n));
      from->link.Written(n);
      Bytes arrived;
      while (!channel->bytes.empty() && arrived.size() < chunk) {
        arrived.push_back(channel->bytes.front());
        channel->bytes.pop_front();
      }
      std::span<const std::byte> rest(arrived);
      while (!rest.empty()) {
        const FrameDecoder::Step got = to->link.Receive(rest);
        if (got.delivered) to->received.emplace_back(got.frame.begin(), got.frame.end());
        rest = rest.subspan(got.consumed);
      }
    }
    now += kMs;
    for (End* end : {&a, &b}) {
      if (end->link.NextWakeup() <= now) end->link.OnTimer(now);
    }
  }
}

Bytes Message(std::uint32_t index) {
  Bytes message(1 + index % kMaxPayload);
  for (std::size_t i = 0; i < message.size(); ++i) {
    message[i] = static_cast<std::byte>((index * 31 + i * 7) % 256);  // zeros included
  }
  return message;
}

// A sender that sends messages 0..count-1 as fast as the link takes them.
struct Sender {
  std::uint32_t next = 0;
  std::uint32_t count = 0;
  void operator()(End& end, TimeNs now) {
    if (next < count && end.link.CanSend()) {
      ASSERT_TRUE(end.link.Send(Message(next), now).ok());
      ++next;
    }
  }
};

TEST(SerialLinkTest, AHandshakeThenMessagesBothWaysOnAClearLine) {
  End a, b;
  Channel ab, ba;
  TimeNs now = 0;
  a.link.Start(now, 11);
  b.link.Start(now, 22);
  EXPECT_FALSE(a.link.CanSend());
  Sender to_b{.count = 40}, to_a{.count = 40};
  Exchange(a, b, ab, ba, now, 2000, [&](End& end, TimeNs t) { (&end == &a ? to_b : to_a)(end, t); });
  ASSERT_EQ(b.received.size(), 40u);
  ASSERT_EQ(a.received.size(), 40u);
  for (std::uint32_t i = 0; i < 40; ++i) {
    EXPECT_EQ(b.received[i], Message(i));
    EXPECT_EQ(a.received[i], Message(i));
  }
  EXPECT_EQ(a.link.counters().retransmissions, 0u);
  EXPECT_EQ(b.link.counters().duplicates, 0u);
}

TEST(SerialLinkTest, OneFrameInFlight) {
  End a, b;
  Channel ab, ba;
  TimeNs now = 0;
  a.link.Start(now, 1);
  b.link.Start(now, 2);
  Exchange(a, b, ab, ba, now, 20, [](End&, TimeNs) {});
  ASSERT_EQ(a.link.state(), LinkState::kReady);
  ASSERT_TRUE(a.link.Send(Message(1), now).ok());
  EXPECT_FALSE(a.link.CanSend());
  EXPECT_EQ(a.link.Send(Message(2), now).code(), StatusCode::kUnavailable);
  EXPECT_EQ(a.link.Send(Bytes(kMaxPayload + 1), now).code(), StatusCode::kUnavailable);
  Exchange(a, b, ab, ba, now, 20, [](End&, TimeNs) {});
  EXPECT_TRUE(a.link.CanSend());
  EXPECT_EQ(a.link.Send(Bytes(kMaxPayload + 1), now).code(), StatusCode::kInvalidArgument);
}

TEST(SerialLinkTest, EveryMessageOnceAndInOrderThroughLostCorruptedAndRepeatedBytes) {
  LinkOptions options;
  options.retransmit_ns = 30 * kMs;
  options.max_attempts = 1000;
  End a(options), b(options);
  Channel ab{.loss = 0.002, .corruption = 0.002, .duplication = 0.002};
  Channel ba{.loss = 0.002, .corruption = 0.002, .duplication = 0.002};
  TimeNs now = 0;
  a.link.Start(now, 5);
  b.link.Start(now, 6);
  Sender to_b{.count = 200};
  Exchange(a, b, ab, ba, now, 60000, [&](End& end, TimeNs t) {
    if (&end == &a) to_b(end, t);
  });
  ASSERT_EQ(b.received.size(), 200u);
  for (std::uint32_t i = 0; i < 200; ++i) ASSERT_EQ(b.received[i], Message(i)) << i;
  // The faults were there, and were dealt with.
  EXPECT_GT(a.link.counters().retransmissions, 0u);
  EXPECT_GT(b.link.decoder_counters().rejected(), 0u);
  EXPECT_EQ(b.link.counters().delivered, 200u);
}

TEST(SerialLinkTest, ARestartedEndResynchronisesBothDirections) {
  End a, b;
  Channel ab, ba;
  TimeNs now = 0;
  a.link.Start(now, 1);
  b.link.Start(now, 2);
  Sender to_b{.count = 10};
  Exchange(a, b, ab, ba, now, 200, [&](End& end, TimeNs t) {
    if (&end == &a) to_b(end, t);
  });
  ASSERT_EQ(b.received.size(), 10u);
  // A frame is on its way when b resets (a microcontroller reboot): a fresh link, expecting
  // sequence 0 again. a learns of it from b's kSync and abandons the frame (the sessions above
  // send again what matters); then both directions start over.
  ASSERT_TRUE(a.link.Send(Message(99), now).ok());
  b.link.Start(now, 3);
  Exchange(a, b, ab, ba, now, 50, [](End&, TimeNs) {});
  EXPECT_EQ(a.link.counters().abandoned, 1u);
  EXPECT_EQ(b.received.size(), 10u);
  Sender to_b_again{.count = 5};
  Exchange(a, b, ab, ba, now, 400, [&](End& end, TimeNs t) {
    if (&end == &a) to_b_again(end, t);
  });
  ASSERT_EQ(b.received.size(), 15u);
  for (std::uint32_t i = 0; i < 5; ++i) EXPECT_EQ(b.received[10 + i], Message(i));
  EXPECT_GE(a.link.counters().resyncs, 2u);
  EXPECT_EQ(a.link.state(), LinkState::kReady);
}

TEST(SerialLinkTest, AVanishedPeerMakesTheLinkFailAfterItsAttempts) {
  LinkOptions options;
  options.retransmit_ns = 10 * kMs;
  options.max_attempts = 5;
  End a(options), b(options);
  Channel ab, ba;
  TimeNs now = 0;
  a.link.Start(now, 1);
  b.link.Start(now, 2);
  Exchange(a, b, ab, ba, now, 20, [](End&, TimeNs) {});
  ASSERT_TRUE(a.link.Send(Message(3), now).ok());
  ab.cut = true;
  Exchange(a, b, ab, ba, now, 100, [](End&, TimeNs) {});
  EXPECT_EQ(a.link.state(), LinkState::kFailed);
  EXPECT_EQ(a.link.counters().retransmissions, 4u);
  EXPECT_EQ(a.link.NextWakeup(), kNever);
  // Plugged back in and restarted, it works again.
  ab.cut = false;
  a.link.Start(now, 9);
  Sender to_b{.count = 1};
  Exchange(a, b, ab, ba, now, 100, [&](End& end, TimeNs t) {
    if (&end == &a) to_b(end, t);
  });
  ASSERT_FALSE(b.received.empty());
  EXPECT_EQ(b.received.back(), Message(0));
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
