#pragma once

// Frames over a byte stream. A serial link (UART, USB-CDC, BLE serial) delivers bytes, not
// messages, and loses, corrupts or repeats some of them; a device may also start listening in
// the middle of a frame. Each frame therefore travels as
//
//   COBS(payload || CRC-32(payload), little-endian) || 0x00
//
// Consistent Overhead Byte Stuffing (Cheshire and Baker, 1999) removes every zero byte from the
// frame at a cost of one byte per 254, so the single zero that ends it can never occur inside: a
// receiver that lost its place waits for the next zero and is in step again. The CRC-32 (IEEE
// 802.3, as zlib computes it) rejects frames a fault changed. What a frame carries — an
// authenticated record holding a wire frame — is the layers above's business.
//
// Sans-I/O: EncodeFrame writes into a caller buffer and FrameDecoder consumes bytes from one; the
// caller owns the port. Neither allocates or throws, so both run on a microcontroller, where the
// decoder needs one encoded frame of buffer.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

#include "edgesgd/core/result.h"
#include "edgesgd/core/status.h"

namespace edgesgd::serial {

inline constexpr std::size_t kCrcBytes = 4;
inline constexpr std::byte kDelimiter{0};

// Most bytes EncodeFrame writes for a payload of `payload_bytes`, delimiter included: one code
// byte per 254 stuffed bytes (and at least one), the CRC and the delimiter.
constexpr std::size_t MaxEncodedBytes(std::size_t payload_bytes) {
  const std::size_t stuffed = payload_bytes + kCrcBytes;
  return stuffed + stuffed / 254 + 1 + 1;
}

// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF) of
// `bytes`, continuing `crc` (a previous call's result; 0 to start). Crc32("123456789") is
// 0xCBF43926. Nibble-table driven: 64 bytes of table, small enough for any image.
std::uint32_t Crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0);

// Writes the frame of `payload` into `out` and returns its length (at most
// MaxEncodedBytes(payload.size())). Errors: kResourceExhausted if `out` is too small (nothing
// useful is written then). Does not allocate.
Result<std::size_t> EncodeFrame(std::span<const std::byte> payload, std::span<std::byte> out);

// EncodeFrame of the payload made of `parts` back to back, without joining them first (a link
// puts its header in front of a caller's data this way, and an authenticated record's header and
// tag around a frame that stays where it is).
Result<std::size_t> EncodeFrame(std::span<const std::span<const std::byte>> parts,
                                std::span<std::byte> out);
inline Result<std::size_t> EncodeFrame(std::initializer_list<std::span<const std::byte>> parts,
                                       std::span<std::byte> out) {
  return EncodeFrame(std::span(parts.begin(), parts.size()), out);
}

// What a decoder saw, since construction or Reset.
struct DecoderCounters {
  std::uint64_t frames = 0;           // delivered
  std::uint64_t crc_errors = 0;       // well stuffed, but the CRC did not match
  std::uint64_t stuffing_errors = 0;  // not a COBS encoding (a code byte pointing past the end)
  std::uint64_t short_frames = 0;     // fewer bytes than a CRC
  std::uint64_t oversized = 0;        // longer than the buffer: dropped whole
  std::uint64_t bytes_dropped = 0;    // bytes of every frame not delivered

  std::uint64_t rejected() const { return crc_errors + stuffing_errors + short_frames + oversized; }
};

// Turns a byte stream back into frames, in a caller buffer of one encoded frame (without its
// delimiter: MaxEncodedBytes(largest payload) - 1 bytes suffice). Anything that is not a valid
// frame — garbage, a frame cut by lost bytes, one a corrupted byte changed, one too long for the
// buffer — is counted and skipped up to the next delimiter; empty frames (consecutive
// delimiters, which a sender may use as idle fill) are ignored.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::span<std::byte> buffer) : buffer_(buffer) {}

  // The outcome of one Push: how many input bytes were consumed and, when a frame ended there,
  // its payload (`delivered`; a payload may be empty). The payload lies in the decoder's buffer
  // and stays valid until the next Push or Reset; call Push again with the rest of the input.
  struct Step {
    std::size_t consumed = 0;
    bool delivered = false;
    std::span<const std::byte> frame;
  };
  Step Push(std::span<const std::byte> bytes);

  // Forgets a partly received frame (after the link was reset); its bytes are counted dropped.
  void Reset();

  const DecoderCounters& counters() const { return counters_; }
  // Bytes of the frame being received, for a caller that times out half-received frames.
  std::size_t pending_bytes() const { return length_; }

 private:
  // Unstuffs the buffered frame in place and checks its CRC: true with the payload in `frame`,
  // or false with the frame counted as rejected.
  bool Finish(std::span<const std::byte>& frame);

  std::span<std::byte> buffer_;
  std::size_t length_ = 0;  // stuffed bytes buffered (or seen, once oversized)
  bool oversized_ = false;  // the frame outgrew the buffer: drop it at its delimiter
  DecoderCounters counters_;
};

}  // namespace edgesgd::serial
