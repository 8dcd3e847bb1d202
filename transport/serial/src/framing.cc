#include "edgesgd/serial/framing.h"

#include <array>

namespace edgesgd::serial {
namespace {

// CRC-32 of each nibble value: two table steps per byte.
constexpr std::array<std::uint32_t, 16> kNibbleTable = [] {
  std::array<std::uint32_t, 16> table{};
  for (std::uint32_t n = 0; n < 16; ++n) {
    std::uint32_t crc = n;
    for (int bit = 0; bit < 4; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? 0xEDB88320u : 0u);
    table[n] = crc;
  }
  return table;
}();

// A COBS block holds at most 254 data bytes: code byte 0xFF means "254 bytes, no zero after".
constexpr std::size_t kMaxBlock = 254;

}  // namespace

std::uint32_t Crc32(std::span<const std::byte> bytes, std::uint32_t crc) {
  crc = ~crc;
  for (const std::byte b : bytes) {
    crc ^= std::to_integer<std::uint32_t>(b);
    crc = (crc >> 4) ^ kNibbleTable[crc & 0xFu];
    crc = (crc >> 4) ^ kNibbleTable[crc & 0xFu];
  }
  return ~crc;
}

Result<std::size_t> EncodeFrame(std::span<const std::span<const std::byte>> parts,
                                std::span<std::byte> out) {
  std::uint32_t crc = 0;
  std::size_t body = 0;
  for (const std::span<const std::byte> part : parts) {
    crc = Crc32(part, crc);
    body += part.size();
  }
  if (out.size() < MaxEncodedBytes(body)) {
    return Status::ResourceExhausted("the output cannot hold the encoded frame");
  }
  const std::array<std::byte, kCrcBytes> trailer = {
      static_cast<std::byte>(crc & 0xFFu), static_cast<std::byte>((crc >> 8) & 0xFFu),
      static_cast<std::byte>((crc >> 16) & 0xFFu), static_cast<std::byte>(crc >> 24)};
  // Stuffing: each block is a code byte (1 + its data bytes) and up to 254 non-zero bytes; a
  // zero in the input ends a block (and is not written), as does the 254th byte.
  std::size_t code_at = 0;
  std::size_t written = 1;
  std::size_t block = 0;
  const auto stuff = [&](std::span<const std::byte> bytes) {
    for (const std::byte b : bytes) {
      if (b != kDelimiter) {
        out[written++] = b;
        ++block;
      }
      if (b == kDelimiter || block == kMaxBlock) {
        out[code_at] = static_cast<std::byte>(block + 1);
        code_at = written++;
        block = 0;
      }
    }
  };
  for (const std::span<const std::byte> part : parts) stuff(part);
  stuff(trailer);
  out[code_at] = static_cast<std::byte>(block + 1);
  out[written++] = kDelimiter;
  return written;
}

Result<std::size_t> EncodeFrame(std::span<const std::byte> payload, std::span<std::byte> out) {
  return EncodeFrame({payload}, out);
}

FrameDecoder::Step FrameDecoder::Push(std::span<const std::byte> bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::byte b = bytes[i];
    if (b != kDelimiter) {
      if (length_ < buffer_.size()) {
        buffer_[length_] = b;
      } else {
        oversized_ = true;
      }
      ++length_;
      continue;
    }
    if (length_ == 0) continue;  // idle fill between frames
    std::span<const std::byte> frame;
    if (Finish(frame)) return {i + 1, true, frame};
  }
  return {bytes.size(), false, {}};
}

bool FrameDecoder::Finish(std::span<const std::byte>& frame) {
  const std::size_t length = length_;
  const bool oversized = oversized_;
  length_ = 0;
  oversized_ = false;
  const auto drop = [&](std::uint64_t& counter) {
    ++counter;
    counters_.bytes_dropped += length;
    return false;
  };
  if (oversized) return drop(counters_.oversized);
  // Unstuff in place: the output never overtakes the input (each block loses its code byte and
  // gains at most the zero it stood for).
  std::size_t read = 0;
  std::size_t write = 0;
  while (read < length) {
    const std::size_t code = std::to_integer<std::size_t>(buffer_[read++]);
    const std::size_t data = code - 1;
    if (data > length - read) return drop(counters_.stuffing_errors);
    for (std::size_t j = 0; j < data; ++j) buffer_[write++] = buffer_[read++];
    // A block shorter than 254 stood for a zero, except the last, which ends the frame.
    if (code != kMaxBlock + 1 && read < length) buffer_[write++] = kDelimiter;
  }
  if (write < kCrcBytes) return drop(counters_.short_frames);
  const std::size_t payload = write - kCrcBytes;
  const std::uint32_t expected = std::to_integer<std::uint32_t>(buffer_[payload]) |
                                 (std::to_integer<std::uint32_t>(buffer_[payload + 1]) << 8) |
                                 (std::to_integer<std::uint32_t>(buffer_[payload + 2]) << 16) |
                                 (std::to_integer<std::uint32_t>(buffer_[payload + 3]) << 24);
  if (Crc32(buffer_.first(payload)) != expected) return drop(counters_.crc_errors);
  ++counters_.frames;
  frame = buffer_.first(payload);
  return true;
}

void FrameDecoder::Reset() {
  counters_.bytes_dropped += length_;
  length_ = 0;
  oversized_ = false;
}

}  // namespace edgesgd::serial
