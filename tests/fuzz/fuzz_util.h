#pragma once

// What the protocol-level fuzz targets share: fuzz_input.h's check and byte reader, aligned
// storage for frames and arenas, and draining a session while checking that every frame it hands
// out decodes. Header-only, no GoogleTest: the targets are libFuzzer programs.

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
#include "fuzz/fuzz_input.h"

namespace edgesgd::fuzz {

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
