#pragma once

// What the fuzz targets share: the invariant check, a reader that turns the fuzzer's bytes into
// values (zeros once they run out), aligned storage for frames and arenas, and draining a
// session while checking that every frame it hands out decodes. Header-only, no GoogleTest: the
// targets are libFuzzer programs.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "edgesgd/core/arena.h"
#include "edgesgd/protocol/session.h"
#include "edgesgd/wire/frame_decoder.h"
#include "edgesgd/wire/receive_buffer.h"
#include "edgesgd/wire/wire_format.h"

// Stops the run with a message when an invariant does not hold: libFuzzer reports the trap as a
// crash and saves the input that caused it.
#define EDGESGD_FUZZ_CHECK(condition, what)                                                \
  do {                                                                                     \
    if (!(condition)) {                                                                    \
      std::fprintf(stderr, "fuzz invariant violated: %s\n  check: %s\n  at %s:%d\n", what, \
                   #condition, __FILE__, __LINE__);                                        \
      std::fflush(stderr);                                                                 \
      __builtin_trap();                                                                    \
    }                                                                                      \
  } while (false)

namespace edgesgd::fuzz {

// Reads little-endian values off the front of the fuzzer's input; past the end every value is 0
// and every byte string empty, so a harness never has to check lengths.
class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  explicit FuzzInput(std::span<const std::byte> bytes)
      : data_(reinterpret_cast<const std::uint8_t*>(bytes.data())), size_(bytes.size()) {}

  bool empty() const { return at_ >= size_; }
  std::size_t remaining() const { return at_ < size_ ? size_ - at_ : 0; }

  std::uint8_t U8() { return static_cast<std::uint8_t>(Read(1)); }
  std::uint16_t U16() { return static_cast<std::uint16_t>(Read(2)); }
  std::uint32_t U32() { return static_cast<std::uint32_t>(Read(4)); }
  std::uint64_t U64() { return Read(8); }
  float F32() {
    const std::uint32_t bits = U32();
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
  // Up to `count` bytes (fewer at the end of the input).
  std::span<const std::byte> Bytes(std::size_t count) {
    if (count > remaining()) count = remaining();
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data_ + at_), count);
    at_ += count;
    return bytes;
  }
  std::span<const std::byte> Rest() { return Bytes(remaining()); }

 private:
  std::uint64_t Read(std::size_t bytes) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < bytes && at_ < size_; ++i, ++at_) {
      value |= std::uint64_t{data_[at_]} << (8 * i);
    }
    return value;
  }

  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// The writing side of FuzzInput, for the corpus generator: the same encoding.
class FuzzOutput {
 public:
  void U8(std::uint8_t value) { Put(value, 1); }
  void U16(std::uint16_t value) { Put(value, 2); }
  void U32(std::uint32_t value) { Put(value, 4); }
  void U64(std::uint64_t value) { Put(value, 8); }
  void F32(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    U32(bits);
  }
  void Bytes(std::span<const std::byte> bytes) {
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  void Put(std::uint64_t value, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      bytes_.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xFF));
    }
  }
  std::vector<std::byte> bytes_;
};

// Bytes copied to an 8-byte aligned address (what DecodeFrame and the sessions require), with
// nothing readable behind them that ASan would not flag: the storage is exactly as long as the
// frame rounded up to 8, so a read past the frame's end is caught only beyond that padding.
// Misaligned copies are made with `offset` 4.
class AlignedBytes {
 public:
  std::span<const std::byte> Load(std::span<const std::byte> bytes, std::size_t offset = 0) {
    words_.assign((bytes.size() + offset + 7) / 8, 0);
    words_.shrink_to_fit();
    std::byte* base = reinterpret_cast<std::byte*>(words_.data()) + offset;
    if (!bytes.empty()) std::memcpy(base, bytes.data(), bytes.size());
    return std::span<const std::byte>(base, bytes.size());
  }

 private:
  std::vector<std::uint64_t> words_;
};

// Heap storage for an Arena of `bytes` usable bytes.
struct ArenaStorage {
  explicit ArenaStorage(std::size_t bytes)
      : words(bytes / 8 + kArenaAlignment / 8 + 1),
        arena(std::as_writable_bytes(std::span(words))) {}
  std::vector<std::uint64_t> words;
  Arena arena;
};

// Polls every frame `session` wants sent and checks it decodes through the wire decoder (and
// is addressed to a peer in `[first_peer, last_peer]`). Returns how many there were.
inline std::size_t DrainAndCheck(protocol::Session& session, protocol::PeerId first_peer,
                                 protocol::PeerId last_peer) {
  std::size_t count = 0;
  protocol::OutgoingFrame out;
  while (session.PollFrame(out)) {
    ++count;
    EDGESGD_FUZZ_CHECK(wire::IsFrameAligned(out.bytes), "a sent frame is not 8-byte aligned");
    const Result<wire::FrameView> view = wire::DecodeFrame(out.bytes);
    if (!view.ok()) {
      std::fprintf(stderr, "sent frame of %zu bytes to peer %u fails to decode: %s\n",
                   out.bytes.size(), out.to, view.status().reason());
    }
    EDGESGD_FUZZ_CHECK(view.ok(), "every frame a session sends decodes");
    EDGESGD_FUZZ_CHECK(out.to >= first_peer && out.to <= last_peer,
                       "a session sends only to its peers");
    EDGESGD_FUZZ_CHECK(count < 100000, "a session hands out a bounded number of frames");
  }
  return count;
}

// FNV-1a, 64 bits (the checkpoint's checksum).
inline std::uint64_t Fnv1a(std::span<const std::byte> bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const std::byte b : bytes) {
    hash ^= static_cast<std::uint64_t>(b);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace edgesgd::fuzz
