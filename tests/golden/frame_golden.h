#pragma once

// The golden wire frames: fixed frames (a control frame, and Update frames of every codec) with
// the exact bytes FrameBuilder must produce, over the inputs of codec_golden.h. Shared, like
// that header, by the GoogleTest suite on x86-64, aarch64 and armhf (tests/wire/
// frame_round_trip_test.cc) and by the Cortex-M image (tests/embedded/mcu_golden.cc).
// To regenerate after an intentional format change: EDGESGD_PRINT_GOLDEN=1 wire_tests
// --gtest_filter='WireGolden*' prints the new strings.

#include <array>
#include <cstddef>
#include <span>

#include "edgesgd/core/codec.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/tensor_layout.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/messages.h"
#include "edgesgd/wire/wire_format.h"
#include "golden/codec_golden.h"

namespace edgesgd::golden {

// ---- Wire frames ----

// The header, message and codec context of every golden frame.
inline constexpr wire::FrameHeader kFrameHeader{.sender = 7, .round = 3, .sequence = 42};
inline constexpr wire::UpdateInfo kUpdate{.worker = 7, .samples = 16};
inline constexpr CodecContext kFrameContext{.seed = 1, .round = 3, .worker = 7};
inline constexpr wire::HeartbeatInfo kHeartbeat{.time_us = 1000, .echo_time_us = 900};

// prefix 84 | root offset 24 | "EDGS" | envelope vtable | envelope (message_type 6 =
// Heartbeat, version 2, sender 7, round 3, sequence 42) | heartbeat vtable | 1000, 900.
inline constexpr const char* kHeartbeatFrameHex =
    "54000000180000004544475310002000060008000c0014000500100010000000000602000700000003"
    "000000180000002a00000000000000000000000800140004000c0008000000e8030000000000008403"
    "000000000000";

// Update frames over a four-coordinate tensor.
inline constexpr float kSmallInput[] = {1.0f, -2.0f, 0.5f, 3.0f};
inline constexpr TensorLayout kSmallLayout = TensorLayout::Single(4).value();

struct FrameCase {
  const char* name;
  CodecParams params;
  const char* frame_hex;
};

inline constexpr FrameCase kSmallUpdateFrames[] = {
    // ... | DensePayload.values = 1.0, -2.0, 0.5, 3.0
    {"identity", IdentityParams{},
     "7c000000180000004544475310001e00060008000c00140005001000100000000004020007000000030000"
     "001c0000002a0000000000000000000e00160008000c000000070010000e00000000000001070000001000"
     "00000c00000000000600080004000600000004000000040000000000803f000000c00000003f00004040"},
    // ... | SignPayload.words = 0b1101, .scales = 1.625 (mean |x|)
    {"sign", SignParams{},
     "7c000000180000004544475310001e00060008000c00140005001000100000000004020007000000030000"
     "001c0000002a0000000000000000000e00140008000c000600070010000e00000000000404070000001000"
     "00000c00000008000c0004000800080000001000000004000000010000000000d03f010000000d000000"},
};

// Update frames of every codec case over the golden input (kLayout, kContext), with
// kFrameHeader and kUpdate; kCodecUpdateFrameHex[i] belongs to kCodecCases[i].
inline constexpr const char* kCodecUpdateFrameHex[] = {
    // identity
    "2c010000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00160008000c000000070010000e000000000000010700000010000000"
    "0c00000000000600080004000600000004000000300000000000f0bf000030400000403f0000a0bf000050c0"
    "0000b03f000020bf000028c00000004000000000000000c0000028400000203f0000b0bf000050400000a03f"
    "000040bf000030c00000f03f000000be000008c0000020400000003f0000c0bf000048400000903f000060bf"
    "000038c00000e03f000080be000010c0000018400000c03e0000d0bf000040400000803f000080bf000040c0"
    "0000d03f0000c0be000018c0000010400000803e0000e0bf000038400000603f000090bf000048c0",
    // top_k
    "d4000000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00140008000c000600070010000e000000000001020700000010000000"
    "0c00000008000c0004000800080000003c000000040000000c00000000003040000050c0000028c000005040"
    "000030c000004840000038c00000184000004040000040c000003840000048c00c0000000100000004000000"
    "070000000e00000011000000180000001b0000001f00000022000000250000002c0000002f000000",
    // rand_k
    "9c000000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00160008000c000600070010000e000000000002010700000010000000"
    "0c000000000006000800040006000000040000000c000000000050c00000b03f00002840000000be00002040"
    "0000c0bf000038c0000018400000d03f0000c0be000018c0000090bf",
    // rand_k_unbiased
    "9c000000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00160008000c000600070010000e000000000002010700000010000000"
    "0c000000000006000800040006000000040000000c000000b76d57c12449b64000002e41499204bfdbb62541"
    "6edbc6c049923ec1666610419999c5406666b6bf666610c1cdcc88c0",
    // random_block
    "ac000000180000004544475310002200060008000c0014000500100010000000000402000700000003000000"
    "200000002a000000000000000000000000000e00140008000c000600070010000e0000000000030307000000"
    "100000000c00000008000c00040008000800000038000000040000000b0000000000003f0000c0bf00004840"
    "0000903f000060bf000038c00000e03f000040c00000d03f0000c0be000018c0020000001600000008000000",
    // sign_mean_abs
    "84000000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00140008000c000600070010000e000000000004040700000010000000"
    "0c00000008000c000400080008000000140000000400000002000000967bda3fe535d43f0200000026db6413"
    "6cb20100",
    // sign_unit
    "84000000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00140008000c000600070010000e000000000004040700000010000000"
    "0c00000008000c0004000800080000001400000004000000020000000000803f0000803f0200000026db6413"
    "6cb20100",
    // qsgd_s7
    "ac000000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00140008000c000600070010000e000000000005050700000010000000"
    "100000000c001400040008000c0010000c000000240000000c000000070000001000000004000000ad71fc40"
    "8ccfdd40e696f4406fd15b400700000039901ba802399013a9823a9113b90200a8123a911ab80239a20e0000",
    // qsgd_s1
    "a4000000180000004544475310002200060008000c0014000500100010000000000402000700000003000000"
    "200000002a000000000000000000000000000e00140008000c000600070010000e0000000000050507000000"
    "10000000100000000c001400040008000c0010000c000000240000000c000000010000001000000004000000"
    "ad71fc408ccfdd40e696f4406fd15b400400000086a360089a96a0000a82e22038000000",
    // reg_top_k_first_round
    "d4000000180000004544475310001e00060008000c0014000500100010000000000402000700000003000000"
    "1c0000002a0000000000000000000e00140008000c000600070010000e000000000006020700000010000000"
    "0c00000008000c0004000800080000003c000000040000000c00000000003040000050c0000028c000005040"
    "000030c000004840000038c00000184000004040000040c000003840000048c00c0000000100000004000000"
    "070000000e00000011000000180000001b0000001f00000022000000250000002c0000002f000000",
};
static_assert(std::size(kCodecUpdateFrameHex) == std::size(kCodecCases));

// ---- Encoding the frames (shared by the host tests and the Cortex-M image) ----

constexpr std::size_t MaxBuilderBytes() {
  std::size_t bytes = wire::kMaxControlFrameBytes + wire::kBuilderScratchBytes;
  for (const CodecCase& golden : kCodecCases) {
    const std::size_t builder = wire::FrameBuilderBytes(golden.params, kLayout);
    if (builder > bytes) bytes = builder;
  }
  for (const FrameCase& frame : kSmallUpdateFrames) {
    const std::size_t builder = wire::FrameBuilderBytes(frame.params, kSmallLayout);
    if (builder > bytes) bytes = builder;
  }
  return bytes;
}

// A builder's storage for any golden frame, and room for a frame's hex.
struct FrameBuffers {
  alignas(wire::kFrameAlignment) std::array<std::byte, MaxBuilderBytes()> builder;
  std::array<char, 2 * MaxBuilderBytes()> hex;
};

inline Result<std::span<const std::byte>> EncodeHeartbeat(wire::FrameBuilder& builder) {
  return builder.EncodeHeartbeat(kFrameHeader, kHeartbeat);
}

inline Result<std::span<const std::byte>> EncodeSmallUpdate(wire::FrameBuilder& builder,
                                                            const FrameCase& frame) {
  return builder.EncodePayloadFrame(kFrameHeader, wire::PayloadMessage::Update(kUpdate),
                                    AllCodecs(), frame.params, kSmallLayout, kFrameContext,
                                    kSmallInput, {});
}

// The Update frame of kCodecCases[index] over the golden input; `buffers` supplies the input
// and the codec's scratch.
inline Result<std::span<const std::byte>> EncodeCodecUpdate(wire::FrameBuilder& builder,
                                                            std::size_t index,
                                                            CaseBuffers& buffers) {
  const CodecCase& golden = kCodecCases[index];
  FillInput(buffers.input);
  return builder.EncodePayloadFrame(
      kFrameHeader, wire::PayloadMessage::Update(kUpdate), AllCodecs(), golden.params, kLayout,
      kContext, buffers.input,
      std::span(buffers.scratch).first(CodecScratchBytes(golden.params, kLayout)));
}

}  // namespace edgesgd::golden
