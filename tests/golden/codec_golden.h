#pragma once

// The golden vectors of edgesgd's codecs: fixed inputs, seeds and parameters with the exact
// payload bytes every codec must produce (frame_golden.h adds wire frames). One table, shared by
// the GoogleTest suite that runs on x86-64, aarch64 and armhf (tests/core/golden_vectors_test.cc)
// and by the Cortex-M image (tests/embedded/mcu_golden.cc), so every architecture checks the
// same expectations. Every input is exactly representable and every expected byte is
// independent of the architecture.
//
// Header-only and freestanding-friendly: no heap, no <string>, no I/O, so it builds for bare
// metal. To regenerate after an intentional format change: EDGESGD_PRINT_GOLDEN=1 core_tests
// --gtest_filter='Golden*' prints the new strings.

#include <cstddef>
#include <cstdint>
#include <array>
#include <cstring>
#include <span>
#include <string_view>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/payload.h"
#include "edgesgd/core/tensor_layout.h"

namespace edgesgd::golden {

// ---- Codec payloads ----

// Two tensors (29 and 19 coordinates) of multiples of 1/8 in [-3.25, 3.25], with repeats (ties
// for top_k), zeros and both signs.
inline constexpr std::uint64_t kTensorSizes[] = {29, 19};
inline constexpr std::size_t kInputSize = 48;
inline constexpr TensorLayout kLayout = TensorLayout::FromSizes(kTensorSizes).value();
static_assert(kLayout.dimension() == kInputSize);
inline constexpr CodecContext kContext{0x5EED5EED12345678ull, 3, 5};

constexpr float InputValue(std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 37 + 11) % 53) - 26) * 0.125f;
}
inline void FillInput(std::span<float, kInputSize> input) {
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = InputValue(i);
}

// The sparsifiers' cases keep a quarter of each tensor.
inline constexpr float kKeepRatio = 0.25f;

struct CodecCase {
  const char* name;
  CodecParams params;
  // The payload's fields in wire order (indices, values, words, scales), each element
  // little-endian, as lower-case hex. Recorded on x86-64.
  const char* payload_hex;
};

inline constexpr CodecCase kCodecCases[] = {
    {"identity", IdentityParams{},
     "0000f0bf000030400000403f0000a0bf000050c00000b03f000020bf000028c00000004000000000"
     "000000c0000028400000203f0000b0bf000050400000a03f000040bf000030c00000f03f000000be"
     "000008c0000020400000003f0000c0bf000048400000903f000060bf000038c00000e03f000080be"
     "000010c0000018400000c03e0000d0bf000040400000803f000080bf000040c00000d03f0000c0be"
     "000018c0000010400000803e0000e0bf000038400000603f000090bf000048c0"},
    {"top_k", TopKParams{.k_ratio = kKeepRatio},
     "0100000004000000070000000e00000011000000180000001b0000001f0000002200000025000000"
     "2c0000002f00000000003040000050c0000028c000005040000030c000004840000038c000001840"
     "00004040000040c000003840000048c0"},
    {"rand_k", RandKParams{.k_ratio = kKeepRatio},
     "000050c00000b03f00002840000000be000020400000c0bf000038c0000018400000d03f0000c0be"
     "000018c0000090bf"},
    {"rand_k_unbiased", RandKParams{.k_ratio = kKeepRatio, .scaling = RandKScaling::kUnbiased},
     "b76d57c12449b64000002e41499204bfdbb625416edbc6c049923ec1666610419999c5406666b6bf"
     "666610c1cdcc88c0"},
    {"random_block", RandomBlockParams{.block_ratio = 4},
     "16000000080000000000003f0000c0bf000048400000903f000060bf000038c00000e03f000040c0"
     "0000d03f0000c0be000018c0"},
    {"sign_mean_abs", SignParams{.scale = SignScale::kMeanAbs}, "26db64136cb20100967bda3fe535d43f"},
    {"sign_unit", SignParams{.scale = SignScale::kUnit}, "26db64136cb201000000803f0000803f"},
    // The thresholds draw from the worker's private sign-noise stream.
    {"sign_stochastic", StochasticSignParams{.scale = SignScale::kUnit, .noise_bound = 2.0f},
     "66cb2c136cd201000000803f0000803f"},
    {"qsgd_s7", QsgdParams{.levels = 7, .bucket = 16},
     "39901ba802399013a9823a9113b90200a8123a911ab80239a20e0000ad71fc408ccfdd40e696f440"
     "6fd15b40"},
    {"qsgd_s1", QsgdParams{.levels = 1, .bucket = 16},
     "86a360089a96a0000a82e22038000000ad71fc408ccfdd40e696f4406fd15b40"},
    // Without a posterior (the registry's stateless Encode: a worker's first round) RegTop-k is
    // Top-k, byte for byte.
    {"reg_top_k_first_round", RegTopKParams{.k_ratio = kKeepRatio},
     "0100000004000000070000000e00000011000000180000001b0000001f0000002200000025000000"
     "2c0000002f00000000003040000050c0000028c000005040000030c000004840000038c000001840"
     "00004040000040c000003840000048c0"},
    // Exponent planes then sign planes per tensor; the rounding draws from the dither stream.
    {"natural", NaturalParams{},
     "80807e80807f7f80800080817f80807f7e80807c80807e7f807f7f807f00000026db64137d80807d"
     "7f807f7f80807e80817d7f817f7f80006cb20100"},
    {"fp16", Fp16Params{},
     "80bf8041003a00bd80c2803d00b940c10040000000c04041003980bd8042003d00ba80c1803f00b0"
     "40c00041003800be4042803c00bbc0c1003f000000b480c0c040003680be0042003c00bc00c2803e"
     "00b6c0c08040003400bfc041003b80bc40c20000"},
};

// ---- Hex helpers (no heap: the caller owns the text buffer) ----

// Lower-case hex of `bytes` into `out` (2 characters per byte, no terminator); returns the
// characters written, or 0 if `out` is too small.
inline std::size_t ToHex(std::span<const std::byte> bytes, std::span<char> out) {
  constexpr char kDigits[] = "0123456789abcdef";
  if (out.size() < 2 * bytes.size()) return 0;
  std::size_t at = 0;
  for (const std::byte b : bytes) {
    out[at++] = kDigits[static_cast<unsigned>(b) >> 4];
    out[at++] = kDigits[static_cast<unsigned>(b) & 0xFu];
  }
  return at;
}

// Whether `bytes` are exactly the bytes `hex` spells.
inline bool BytesMatchHex(std::span<const std::byte> bytes, std::string_view hex) {
  if (hex.size() != 2 * bytes.size()) return false;
  char pair[2];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    ToHex(bytes.subspan(i, 1), pair);
    if (pair[0] != hex[2 * i] || pair[1] != hex[2 * i + 1]) return false;
  }
  return true;
}

// Hex of a payload's fields in wire order, every element little-endian (kCodecCases'
// payload_hex form) into `out`; returns the characters written, 0 if `out` is too small.
inline std::size_t PayloadHex(const PayloadView& payload, std::span<char> out) {
  std::size_t at = 0;
  bool fits = true;
  const auto append = [&](auto element) {
    static_assert(sizeof(element) == 4);
    std::uint32_t word;
    std::memcpy(&word, &element, sizeof(word));
    const std::byte little_endian[4] = {
        static_cast<std::byte>(word & 0xFFu), static_cast<std::byte>((word >> 8) & 0xFFu),
        static_cast<std::byte>((word >> 16) & 0xFFu), static_cast<std::byte>(word >> 24)};
    const std::size_t written = fits ? ToHex(little_endian, out.subspan(at)) : 0;
    if (written == 0) fits = false;
    at += written;
  };
  for (const std::uint32_t v : payload.indices) append(v);
  for (const float v : payload.values) append(v);
  for (const std::uint32_t v : payload.words) append(v);
  for (const float v : payload.scales) append(v);
  return fits ? at : 0;
}

// ---- Encoding a case (the one path the host tests and the Cortex-M image share) ----

constexpr std::size_t MaxScratchBytes() {
  std::size_t bytes = 0;
  for (const CodecCase& golden : kCodecCases) {
    const std::size_t scratch = CodecScratchBytes(golden.params, kLayout);
    if (scratch > bytes) bytes = scratch;
  }
  return bytes;
}

// Room for any case's payload, scratch and hex text (static storage on a microcontroller).
struct CaseBuffers {
  std::array<std::uint32_t, kInputSize> indices;
  std::array<float, kInputSize> values;
  std::array<std::uint32_t, kInputSize> words;
  std::array<float, kMaxTensors> scales;
  alignas(kArenaAlignment) std::array<std::byte, MaxScratchBytes()> scratch;
  std::array<float, kInputSize> input;
  std::array<char, 2 * 4 * (3 * kInputSize + kMaxTensors)> hex;
};

// Encodes the golden input with `golden`'s codec and writes the payload's hex into
// buffers.hex; returns its length. Errors: the codec's, kInvalidArgument for parameters
// outside the buffers (a case added without growing CaseBuffers).
inline Result<std::size_t> EncodeCase(const CodecCase& golden, CaseBuffers& buffers) {
  EDGESGD_TRY_ASSIGN(const PayloadShape shape, EncodedShape(golden.params, kLayout));
  if (shape.indices > buffers.indices.size() || shape.values > buffers.values.size() ||
      shape.words > buffers.words.size() || shape.scales > buffers.scales.size()) {
    return Status::InvalidArgument();
  }
  FillInput(buffers.input);
  const PayloadSpans out{std::span(buffers.indices).first(shape.indices),
                         std::span(buffers.values).first(shape.values),
                         std::span(buffers.words).first(shape.words),
                         std::span(buffers.scales).first(shape.scales)};
  EDGESGD_TRY(AllCodecs().Encode(
      golden.params, kLayout, kContext, buffers.input, out,
      std::span(buffers.scratch).first(CodecScratchBytes(golden.params, kLayout))));
  const std::size_t length = PayloadHex(PayloadView(out, shape), buffers.hex);
  if (length == 0 && shape.bytes() != 0) return Status::InvalidArgument();
  return length;
}

}  // namespace edgesgd::golden
