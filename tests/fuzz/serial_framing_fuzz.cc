// Fuzz target: the serial frame decoder (edgesgd/serial/framing.h) on any byte stream, fed in
// chunks whose sizes come from the input, into a buffer whose size does too. Invariants: Push
// consumes the whole input; every delivered payload fits the buffer, and encoding it again gives
// a frame a fresh decoder delivers unchanged; the delivered count is the counter's.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgesgd/serial/framing.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::FuzzInput input(data, size);
  std::vector<std::byte> buffer(1 + input.U16() % 2048);
  const std::size_t max_chunk = 1 + input.U8();
  const std::span<const std::byte> stream = input.Rest();
  edgesgd::serial::FrameDecoder decoder(buffer);
  std::size_t consumed = 0;
  std::uint64_t delivered = 0;
  for (std::size_t at = 0; at < stream.size();) {
    const std::size_t chunk = std::min(max_chunk, stream.size() - at);
    std::span<const std::byte> rest = stream.subspan(at, chunk);
    while (!rest.empty()) {
      const edgesgd::serial::FrameDecoder::Step step = decoder.Push(rest);
      EDGESGD_FUZZ_CHECK(step.consumed > 0 && step.consumed <= rest.size(),
                         "every Push makes progress within its input");
      consumed += step.consumed;
      rest = rest.subspan(step.consumed);
      if (!step.delivered) {
        EDGESGD_FUZZ_CHECK(rest.empty(), "a Push without a frame consumes all it was given");
        continue;
      }
      ++delivered;
      EDGESGD_FUZZ_CHECK(step.frame.size() + edgesgd::serial::kCrcBytes <= buffer.size(),
                         "a payload and its CRC fit the buffer");
      std::vector<std::byte> again(edgesgd::serial::MaxEncodedBytes(step.frame.size()));
      const edgesgd::Result<std::size_t> length = edgesgd::serial::EncodeFrame(step.frame, again);
      EDGESGD_FUZZ_CHECK(length.ok(), "a delivered payload encodes");
      std::vector<std::byte> fresh_buffer(again.size());
      edgesgd::serial::FrameDecoder fresh(fresh_buffer);
      const edgesgd::serial::FrameDecoder::Step round_trip =
          fresh.Push(std::span<const std::byte>(again).first(*length));
      EDGESGD_FUZZ_CHECK(round_trip.delivered && round_trip.consumed == *length &&
                             std::equal(round_trip.frame.begin(), round_trip.frame.end(),
                                        step.frame.begin(), step.frame.end()),
                         "a delivered payload survives its own round trip");
    }
    at += chunk;
  }
  EDGESGD_FUZZ_CHECK(consumed == stream.size(), "the whole stream is consumed");
  EDGESGD_FUZZ_CHECK(decoder.counters().frames == delivered, "delivered frames are counted");
  return 0;
}
