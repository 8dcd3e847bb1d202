// The serial framing (edgesgd/serial/framing.h): COBS + CRC-32 frames survive being cut into any
// chunks, and every fault a serial link makes — lost, corrupted, duplicated or inserted bytes,
// a receiver joining mid-frame, frames too long for the buffer — loses only the frames it
// touched, is counted, and leaves the decoder in step for the next frame.

#include "edgesgd/serial/framing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace edgesgd::serial {
namespace {

using Bytes = std::vector<std::byte>;

Bytes Encoded(const Bytes& payload) {
  Bytes out(MaxEncodedBytes(payload.size()));
  const Result<std::size_t> length = EncodeFrame(payload, out);
  EXPECT_TRUE(length.ok());
  out.resize(length.ok() ? *length : 0);
  return out;
}

// Payloads with the bytes COBS cares about: zeros, and runs of 254 and more non-zero bytes.
Bytes Payload(std::size_t size, std::uint32_t seed, int zero_every = 7) {
  std::mt19937 engine(seed);
  Bytes payload(size);
  for (std::size_t i = 0; i < size; ++i) {
    const auto value = static_cast<std::uint8_t>(engine() % 255 + 1);
    payload[i] = zero_every > 0 && engine() % static_cast<unsigned>(zero_every) == 0
                     ? std::byte{0}
                     : std::byte{value};
  }
  return payload;
}

// Every frame `stream` holds, fed in chunks of random sizes up to `max_chunk`.
std::vector<Bytes> DecodeAll(FrameDecoder& decoder, const Bytes& stream, std::uint32_t seed,
                             std::size_t max_chunk) {
  std::mt19937 engine(seed);
  std::vector<Bytes> frames;
  std::size_t at = 0;
  while (at < stream.size()) {
    const std::size_t chunk = std::min<std::size_t>(stream.size() - at, 1 + engine() % max_chunk);
    std::span<const std::byte> rest(stream.data() + at, chunk);
    while (!rest.empty()) {
      const FrameDecoder::Step step = decoder.Push(rest);
      if (step.delivered) frames.emplace_back(step.frame.begin(), step.frame.end());
      rest = rest.subspan(step.consumed);
    }
    at += chunk;
  }
  return frames;
}

TEST(SerialFramingTest, Crc32MatchesTheStandardCheckValue) {
  constexpr std::string_view kCheck = "123456789";
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(kCheck.data()),
                                         kCheck.size());
  EXPECT_EQ(Crc32(bytes), 0xCBF43926u);
  // Continuing a CRC over a split input gives the CRC of the whole.
  EXPECT_EQ(Crc32(bytes.subspan(4), Crc32(bytes.first(4))), 0xCBF43926u);
  EXPECT_EQ(Crc32({}), 0u);
}

TEST(SerialFramingTest, EncodedFramesHaveOneZeroAtTheEndAndRoundTrip) {
  for (const std::size_t size :
       {0u, 1u, 2u, 3u, 250u, 251u, 252u, 253u, 254u, 255u, 508u, 509u, 1000u, 4096u}) {
    for (const int zero_every : {0, 2, 7, 300}) {
      SCOPED_TRACE(testing::Message() << "size " << size << ", zero every " << zero_every);
      const Bytes payload = Payload(size, static_cast<std::uint32_t>(size + 3), zero_every);
      const Bytes frame = Encoded(payload);
      ASSERT_FALSE(frame.empty());
      EXPECT_LE(frame.size(), MaxEncodedBytes(size));
      EXPECT_EQ(frame.back(), kDelimiter);
      EXPECT_EQ(std::count(frame.begin(), frame.end(), kDelimiter), 1);
      Bytes buffer(MaxEncodedBytes(size) - 1);
      FrameDecoder decoder(buffer);
      const FrameDecoder::Step step = decoder.Push(frame);
      EXPECT_EQ(step.consumed, frame.size());
      EXPECT_TRUE(step.delivered);
      EXPECT_EQ(Bytes(step.frame.begin(), step.frame.end()), payload);
      EXPECT_EQ(decoder.counters().frames, 1u);
      EXPECT_EQ(decoder.counters().rejected(), 0u);
    }
  }
}

TEST(SerialFramingTest, EncodeRefusesAShortOutput) {
  const Bytes payload = Payload(100, 1);
  Bytes out(MaxEncodedBytes(payload.size()) - 1);
  EXPECT_EQ(EncodeFrame(payload, out).status(), Status::ResourceExhausted());
}

TEST(SerialFramingTest, AFrameOfPartsIsTheFrameOfThePartsJoined) {
  // Cuts around a 254-byte block, and empty parts, in payloads with and without zeros: the
  // stuffing and the CRC run across part boundaries as over one payload.
  for (const int zero_every : {0, 7}) {
    const Bytes payload = Payload(600, 11, zero_every);
    for (const std::size_t first : {std::size_t{0}, std::size_t{1}, std::size_t{253},
                                    std::size_t{254}, std::size_t{255}, std::size_t{599}}) {
      for (const std::size_t second : {first, first + 1, std::size_t{600}}) {
        const std::span<const std::byte> all(payload);
        const std::size_t end = std::min(second, payload.size());
        Bytes out(MaxEncodedBytes(payload.size()));
        const Result<std::size_t> length =
            EncodeFrame({all.first(first), all.subspan(first, end - first), all.subspan(end)}, out);
        ASSERT_TRUE(length.ok());
        out.resize(*length);
        EXPECT_EQ(out, Encoded(payload)) << "parts cut at " << first << " and " << end;
      }
    }
  }
  const Bytes payload = Payload(600, 12);
  Bytes small(MaxEncodedBytes(payload.size()) - 1);
  EXPECT_EQ(EncodeFrame({std::span<const std::byte>(payload), {}}, small).status(),
            Status::ResourceExhausted());
}

TEST(SerialFramingTest, FramesSurviveAnyChunkingAndIdleFill) {
  std::vector<Bytes> payloads;
  Bytes stream(3, kDelimiter);  // idle fill before the first frame
  for (std::uint32_t i = 0; i < 40; ++i) {
    payloads.push_back(Payload(i * 37 % 600, i));
    const Bytes frame = Encoded(payloads.back());
    stream.insert(stream.end(), frame.begin(), frame.end());
    if (i % 3 == 0) stream.push_back(kDelimiter);
  }
  for (const std::size_t max_chunk : {1u, 2u, 7u, 64u, 100000u}) {
    Bytes buffer(MaxEncodedBytes(600));
    FrameDecoder decoder(buffer);
    EXPECT_EQ(DecodeAll(decoder, stream, 5, max_chunk), payloads) << "chunks up to " << max_chunk;
    EXPECT_EQ(decoder.counters().rejected(), 0u);
  }
}

// One fault per frame, of each kind: the touched frame is lost (never delivered altered), the
// next one arrives, and the counters add up.
TEST(SerialFramingTest, EachFaultLosesOnlyTheFrameItTouches) {
  std::mt19937 engine(11);  // 32-bit draws
  const auto draw = [&engine] { return static_cast<std::uint32_t>(engine()); };
  std::size_t faulted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const Bytes first = Payload(1 + draw() % 300, draw());
    const Bytes second = Payload(1 + draw() % 300, draw());
    Bytes damaged = Encoded(first);
    const std::size_t body = damaged.size() - 1;  // the delimiter stays: faults inside a frame
    const std::size_t at = engine() % body;
    switch (trial % 4) {
      case 0:  // a lost byte
        damaged.erase(damaged.begin() + static_cast<std::ptrdiff_t>(at));
        break;
      case 1:  // a corrupted byte (never to itself)
        damaged[at] ^= std::byte{static_cast<std::uint8_t>(1 + engine() % 255)};
        break;
      case 2:  // a repeated byte
        damaged.insert(damaged.begin() + static_cast<std::ptrdiff_t>(at), damaged[at]);
        break;
      default:  // a stray byte
        damaged.insert(damaged.begin() + static_cast<std::ptrdiff_t>(at),
                       std::byte{static_cast<std::uint8_t>(engine() % 256)});
        break;
    }
    Bytes stream = damaged;
    const Bytes next = Encoded(second);
    stream.insert(stream.end(), next.begin(), next.end());
    Bytes buffer(MaxEncodedBytes(300));
    FrameDecoder decoder(buffer);
    const std::vector<Bytes> frames =
        DecodeAll(decoder, stream, static_cast<std::uint32_t>(trial), 16);
    ASSERT_FALSE(frames.empty()) << "trial " << trial;
    EXPECT_EQ(frames.back(), second) << "trial " << trial;
    for (const Bytes& frame : frames) {
      EXPECT_TRUE(frame == first || frame == second) << "trial " << trial << ": an altered frame";
    }
    EXPECT_EQ(decoder.counters().frames, frames.size());
    if (frames.size() == 1) {
      ++faulted;
      // A corrupted byte that became a delimiter splits the frame in two rejected pieces.
      EXPECT_GE(decoder.counters().rejected(), 1u) << "trial " << trial;
    }
  }
  // Every fault changes the stuffed bytes, so only a CRC-32 collision (odds 2^-32) could let
  // the damaged frame through.
  EXPECT_EQ(faulted, 2000u);
}

TEST(SerialFramingTest, JoiningMidFrameAndGarbageResynchroniseAtTheNextDelimiter) {
  const Bytes payload = Payload(200, 3);
  const Bytes frame = Encoded(payload);
  Bytes stream(frame.begin() + 57, frame.end());  // the tail of a frame already under way
  const Bytes garbage = {std::byte{0x13}, std::byte{0xFF}, std::byte{0x02}, kDelimiter};
  stream.insert(stream.end(), garbage.begin(), garbage.end());
  stream.insert(stream.end(), frame.begin(), frame.end());
  Bytes buffer(MaxEncodedBytes(200));
  FrameDecoder decoder(buffer);
  const std::vector<Bytes> frames = DecodeAll(decoder, stream, 1, 9);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0], payload);
  EXPECT_EQ(decoder.counters().rejected(), 2u);
  EXPECT_EQ(decoder.counters().bytes_dropped, (frame.size() - 57 - 1) + 3);
}

TEST(SerialFramingTest, AFrameLongerThanTheBufferIsDroppedWhole) {
  const Bytes big = Payload(500, 4);
  const Bytes small = Payload(20, 5);
  Bytes stream = Encoded(big);
  const Bytes next = Encoded(small);
  stream.insert(stream.end(), next.begin(), next.end());
  Bytes buffer(MaxEncodedBytes(100));
  FrameDecoder decoder(buffer);
  const std::vector<Bytes> frames = DecodeAll(decoder, stream, 2, 50);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0], small);
  EXPECT_EQ(decoder.counters().oversized, 1u);
  EXPECT_EQ(decoder.counters().bytes_dropped, Encoded(big).size() - 1);
}

TEST(SerialFramingTest, ResetForgetsAPartialFrame) {
  const Bytes payload = Payload(80, 6);
  const Bytes frame = Encoded(payload);
  Bytes buffer(MaxEncodedBytes(80));
  FrameDecoder decoder(buffer);
  EXPECT_FALSE(decoder.Push(std::span<const std::byte>(frame).first(30)).delivered);
  EXPECT_EQ(decoder.pending_bytes(), 30u);
  decoder.Reset();
  EXPECT_EQ(decoder.pending_bytes(), 0u);
  EXPECT_EQ(decoder.counters().bytes_dropped, 30u);
  const FrameDecoder::Step step = decoder.Push(frame);
  EXPECT_EQ(Bytes(step.frame.begin(), step.frame.end()), payload);
}

}  // namespace
}  // namespace edgesgd::serial
