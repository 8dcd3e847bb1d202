#pragma once

// Valid frames for the session targets' scripted events, built with the real FrameBuilder: the
// fuzzer reaches deep protocol states (training rounds, resyncs, the end of a run) far faster
// with "an Update from worker 2 for the current round" than by discovering one byte by byte.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "edgesgd/core/codec_registry.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/messages.h"
#include "fuzz/fuzz_util.h"

namespace edgesgd::fuzz {

class FrameMaker {
 public:
  FrameMaker() = default;

  // A payload frame of `message` whose payload is `params`' encoding of `input` (empty when the
  // codec refuses, e.g. an input the codec cannot encode).
  std::span<const std::byte> Payload(const wire::FrameHeader& header,
                                     const wire::PayloadMessage& message, const CodecParams& params,
                                     const TensorLayout& layout, const CodecContext& context,
                                     std::span<const float> input) {
    wire::FrameBuilder builder(Buffer(wire::FrameBuilderBytes(params, layout)));
    const std::size_t scratch_bytes = CodecScratchBytes(params, layout);
    scratch_.assign(scratch_bytes / 8 + 3, 0);
    auto* base = reinterpret_cast<std::byte*>(scratch_.data());
    base += (16 - reinterpret_cast<std::uintptr_t>(base) % 16) % 16;
    const Result<std::span<const std::byte>> frame =
        builder.EncodePayloadFrame(header, message, AllCodecs(), params, layout, context, input,
                                   std::span<std::byte>(base, scratch_bytes));
    return Keep(frame);
  }

  std::span<const std::byte> Join(const wire::FrameHeader& header, const wire::JoinInfo& join) {
    wire::FrameBuilder builder(Buffer(kControlBytes));
    return Keep(builder.EncodeJoin(header, join));
  }
  std::span<const std::byte> Welcome(const wire::FrameHeader& header,
                                     const wire::WelcomeInfo& welcome) {
    wire::FrameBuilder builder(Buffer(kControlBytes));
    return Keep(builder.EncodeWelcome(header, welcome));
  }
  std::span<const std::byte> Heartbeat(const wire::FrameHeader& header,
                                       const wire::HeartbeatInfo& heartbeat) {
    wire::FrameBuilder builder(Buffer(kControlBytes));
    return Keep(builder.EncodeHeartbeat(header, heartbeat));
  }
  std::span<const std::byte> Leave(const wire::FrameHeader& header, wire::LeaveReason reason) {
    wire::FrameBuilder builder(Buffer(kControlBytes));
    return Keep(builder.EncodeLeave(header, {reason}));
  }
  std::span<const std::byte> Error(const wire::FrameHeader& header, StatusCode code,
                                   std::string_view reason) {
    wire::FrameBuilder builder(Buffer(kControlBytes));
    return Keep(builder.EncodeError(header, {code, reason}));
  }
  std::span<const std::byte> Secure(const wire::FrameHeader& header,
                                    const wire::SecureMessage& message, std::size_t neighbours,
                                    std::size_t words) {
    wire::FrameBuilder builder(
        Buffer(wire::SecureFrameBytes(neighbours, words, neighbours + 1) +
               wire::kBuilderScratchBytes));
    return Keep(builder.EncodeSecure(header, message));
  }

 private:
  static constexpr std::size_t kControlBytes =
      wire::kMaxControlFrameBytes + wire::kBuilderScratchBytes;

  // A builder buffer of at least `bytes` (grown on demand: the harness may allocate).
  std::span<std::byte> Buffer(std::size_t bytes) {
    if (buffer_.size() * 8 < bytes + 8) buffer_.assign(bytes / 8 + 2, 0);
    return std::as_writable_bytes(std::span(buffer_));
  }
  // The builder's frame copied out (the builder lives only for the call).
  std::span<const std::byte> Keep(const Result<std::span<const std::byte>>& frame) {
    if (!frame.ok()) return {};
    return frame_.Load(frame.value());
  }

  std::vector<std::uint64_t> buffer_;
  std::vector<std::uint64_t> scratch_;
  AlignedBytes frame_;
};

}  // namespace edgesgd::fuzz
