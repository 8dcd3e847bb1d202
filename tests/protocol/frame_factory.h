#pragma once

// Crafting and capturing frames for the protocol tests: any message with any header, built with
// the real FrameBuilder, stored 8-byte aligned; and an interceptor that records what the
// sessions send.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "protocol/protocol_harness.h"

namespace edgesgd::protocol::testing {

// A frame in 8-byte aligned storage.
class Frame {
 public:
  Frame() = default;
  explicit Frame(std::span<const std::byte> bytes)
      : words_((bytes.size() + 7) / 8 + 1), size_(bytes.size()) {
    std::copy(bytes.begin(), bytes.end(), std::as_writable_bytes(std::span(words_)).begin());
  }
  std::span<const std::byte> bytes() const { return std::as_bytes(std::span(words_)).first(size_); }
  std::span<std::byte> mutable_bytes() {
    return std::as_writable_bytes(std::span(words_)).first(size_);
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  wire::FrameView View() const {
    const Result<wire::FrameView> view = wire::DecodeFrame(bytes());
    EXPECT_TRUE(view.ok());
    return view.ok() ? view.value() : wire::FrameView{};
  }

 private:
  std::vector<std::uint64_t> words_;
  std::size_t size_ = 0;
};

class FrameFactory {
 public:
  explicit FrameFactory(std::size_t capacity = 1 << 16) : storage_(capacity / 8 + 2) {}

  // An Update from `worker` for `round` carrying `codec`'s encoding of `input`.
  Frame Update(std::uint32_t sender, std::uint32_t worker, std::uint32_t round,
               const CodecParams& codec, const TensorLayout& layout, std::span<const float> input,
               std::uint64_t seed, std::uint64_t sequence = 0) {
    wire::FrameBuilder builder(Buffer());
    std::vector<std::byte> scratch(CodecScratchBytes(codec, layout) + 16);
    const CodecContext context{seed, round, worker};
    const Result<std::span<const std::byte>> frame = builder.EncodePayloadFrame(
        {sender, round, sequence}, wire::PayloadMessage::Update({worker, 8}), AllCodecs(), codec,
        layout, context, input, AlignedScratch(scratch, CodecScratchBytes(codec, layout)));
    EXPECT_TRUE(frame.ok());
    return frame.ok() ? Frame(frame.value()) : Frame();
  }

  // A ModelBroadcast from the server whose payload is `codec`'s encoding of `input`.
  Frame Broadcast(std::uint32_t round, wire::BroadcastContent content, const CodecParams& codec,
                  const TensorLayout& layout, std::span<const float> input, std::uint64_t seed,
                  std::uint32_t participants = 1) {
    wire::FrameBuilder builder(Buffer());
    std::vector<std::byte> scratch(CodecScratchBytes(codec, layout) + 16);
    const CodecContext context{seed, round == 0 ? 0 : round - 1, 0};
    const Result<std::span<const std::byte>> frame = builder.EncodePayloadFrame(
        {kServerPeer, round, 0}, wire::PayloadMessage::ModelBroadcast({content, participants}),
        AllCodecs(), codec, layout, context, input,
        AlignedScratch(scratch, CodecScratchBytes(codec, layout)));
    EXPECT_TRUE(frame.ok());
    return frame.ok() ? Frame(frame.value()) : Frame();
  }

  Frame Join(std::uint32_t sender, const wire::JoinInfo& join = {}) {
    wire::FrameBuilder builder(Buffer());
    return Checked(builder.EncodeJoin({sender, 0, 0}, join));
  }
  Frame Welcome(const wire::WelcomeInfo& welcome, std::uint32_t sender = kServerPeer) {
    wire::FrameBuilder builder(Buffer());
    return Checked(builder.EncodeWelcome({sender, 0, 0}, welcome));
  }
  Frame Heartbeat(std::uint32_t sender) {
    wire::FrameBuilder builder(Buffer());
    return Checked(builder.EncodeHeartbeat({sender, 0, 0}, {1, 0}));
  }
  Frame Leave(std::uint32_t sender, wire::LeaveReason reason = wire::LeaveReason::kDone) {
    wire::FrameBuilder builder(Buffer());
    return Checked(builder.EncodeLeave({sender, 0, 0}, {reason}));
  }
  Frame Error(std::uint32_t sender, StatusCode code, std::string_view reason) {
    wire::FrameBuilder builder(Buffer());
    return Checked(builder.EncodeError({sender, 0, 0}, {code, reason}));
  }

 private:
  std::span<std::byte> Buffer() { return std::as_writable_bytes(std::span(storage_)); }
  static std::span<std::byte> AlignedScratch(std::vector<std::byte>& scratch, std::size_t bytes) {
    void* pointer = scratch.data();
    std::size_t space = scratch.size();
    std::align(16, bytes, pointer, space);
    return std::span<std::byte>(static_cast<std::byte*>(pointer), bytes);
  }
  static Frame Checked(const Result<std::span<const std::byte>>& frame) {
    EXPECT_TRUE(frame.ok());
    return frame.ok() ? Frame(frame.value()) : Frame();
  }

  std::vector<std::uint64_t> storage_;
};

// Records every frame sessions send (optionally only some), decoded, and applies a per-frame
// policy on top.
class Recorder : public Interceptor {
 public:
  struct Record {
    PeerId from;
    PeerId to;
    TimeNs time;
    Frame frame;
    wire::MessageKind kind;
    std::uint32_t round;
    wire::BroadcastContent content;
  };

  Verdict OnSend(PeerId from, PeerId to, std::span<const std::byte> bytes, TimeNs now) override {
    Record record{
        from, to, now, Frame(bytes), wire::MessageKind::kNone, 0, wire::BroadcastContent::kModel};
    const Result<wire::FrameView> view = wire::DecodeFrame(bytes);
    if (view.ok()) {
      record.kind = view.value().kind;
      record.round = view.value().header.round;
      record.content = view.value().message.broadcast.content;
    }
    records.push_back(std::move(record));
    return policy ? policy(records.back()) : Verdict{};
  }

  std::vector<const Record*> Find(PeerId from, PeerId to, wire::MessageKind kind) const {
    std::vector<const Record*> found;
    for (const Record& record : records) {
      if (record.from == from && record.to == to && record.kind == kind) found.push_back(&record);
    }
    return found;
  }

  std::vector<Record> records;
  std::function<Verdict(const Record&)> policy;
};

}  // namespace edgesgd::protocol::testing
