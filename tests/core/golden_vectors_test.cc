// Golden vectors: for fixed inputs, seeds and parameters, the exact encoded bytes of every codec.
// The same expectations are checked on x86-64, aarch64, armhf and Cortex-M, so every input here
// is exactly representable and every expected byte is independent of the architecture.
// To regenerate after an intentional format change: EDGESGD_PRINT_GOLDEN=1 core_tests
// --gtest_filter='Golden*' prints the new strings.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "edgesgd/core/codec_dispatch.h"
#include "edgesgd/core/codecs/reg_top_k.h"

namespace edgesgd {
namespace {

// Two tensors (29 and 19 coordinates) of multiples of 1/8 in [-3.25, 3.25], with repeats (ties
// for top_k), zeros and both signs.
std::vector<float> GoldenInput() {
  std::vector<float> input(48);
  for (std::size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<float>(static_cast<int>((i * 37 + 11) % 53) - 26) * 0.125f;
  }
  return input;
}

// The payload's fields in wire order (indices, values, words, scales), little-endian, as hex.
std::string PayloadHex(const PayloadView& payload) {
  std::string hex;
  const auto append_word = [&hex](std::uint32_t word) {
    char digits[9];
    std::snprintf(digits, sizeof(digits), "%02x%02x%02x%02x", word & 0xFFu, (word >> 8) & 0xFFu,
                  (word >> 16) & 0xFFu, word >> 24);
    hex += digits;
  };
  const auto append_float = [&](float value) {
    std::uint32_t word;
    std::memcpy(&word, &value, sizeof(word));
    append_word(word);
  };
  for (std::uint32_t v : payload.indices) append_word(v);
  for (float v : payload.values) append_float(v);
  for (std::uint32_t v : payload.words) append_word(v);
  for (float v : payload.scales) append_float(v);
  return hex;
}

// Recorded on x86-64; identical on aarch64, armhf and Cortex-M.
constexpr const char* kGoldenIdentity =
    "0000f0bf000030400000403f0000a0bf000050c00000b03f000020bf000028c00000004000000000"
    "000000c0000028400000203f0000b0bf000050400000a03f000040bf000030c00000f03f000000be"
    "000008c0000020400000003f0000c0bf000048400000903f000060bf000038c00000e03f000080be"
    "000010c0000018400000c03e0000d0bf000040400000803f000080bf000040c00000d03f0000c0be"
    "000018c0000010400000803e0000e0bf000038400000603f000090bf000048c0";
constexpr const char* kGoldenTopK =
    "0100000004000000070000000e00000011000000180000001b0000001f0000002200000025000000"
    "2c0000002f00000000003040000050c0000028c000005040000030c000004840000038c000001840"
    "00004040000040c000003840000048c0";
constexpr const char* kGoldenRandK =
    "000050c00000b03f00002840000000be000020400000c0bf000038c0000018400000d03f0000c0be"
    "000018c0000090bf";
constexpr const char* kGoldenRandKUnbiased =
    "b76d57c12449b64000002e41499204bfdbb625416edbc6c049923ec1666610419999c5406666b6bf"
    "666610c1cdcc88c0";
constexpr const char* kGoldenRandomBlock =
    "16000000080000000000003f0000c0bf000048400000903f000060bf000038c00000e03f000040c0"
    "0000d03f0000c0be000018c0";
constexpr const char* kGoldenSignMeanAbs =
    "26db64136cb20100967bda3fe535d43f";
constexpr const char* kGoldenSignUnit =
    "26db64136cb201000000803f0000803f";
constexpr const char* kGoldenQsgdS7 =
    "39901ba802399013a9823a9113b90200a8123a911ab80239a20e0000ad71fc408ccfdd40e696f440"
    "6fd15b40";
constexpr const char* kGoldenQsgdS1 =
    "86a360089a96a0000a82e22038000000ad71fc408ccfdd40e696f4406fd15b40";

struct GoldenCase {
  const char* name;
  CodecParams params;
  const char* expected_hex;
};

std::string EncodeGolden(const CodecParams& params) {
  const std::uint64_t sizes[] = {29, 19};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  const std::vector<float> input = GoldenInput();
  const PayloadShape shape = EncodedShape(params, layout).value();
  std::vector<std::uint32_t> indices(shape.indices), words(shape.words);
  std::vector<float> values(shape.values), scales(shape.scales);
  std::vector<std::byte> scratch(CodecScratchBytes(params, layout));
  const CodecContext context{0x5EED5EED12345678ull, 3, 5};
  const PayloadSpans out{indices, values, words, scales};
  EXPECT_TRUE(Encode(params, layout, context, input, out, scratch).ok());
  return PayloadHex(PayloadView(out, shape));
}

CodecParams Params(CodecKind kind) {
  CodecParams params;
  params.kind = kind;
  params.k_ratio = 0.25f;
  params.block_ratio = 4;
  params.qsgd_levels = 7;
  params.qsgd_bucket = 16;
  return params;
}

CodecParams With(CodecParams params, SignScale scale) {
  params.sign_scale = scale;
  return params;
}

CodecParams WithUnbiased(CodecParams params) {
  params.rand_k_scaling = RandKScaling::kUnbiased;
  return params;
}

CodecParams WithLevels(CodecParams params, std::uint32_t levels) {
  params.qsgd_levels = levels;
  return params;
}

const GoldenCase kGoldenCases[] = {
    {"identity", Params(CodecKind::kIdentity), kGoldenIdentity},
    {"top_k", Params(CodecKind::kTopK), kGoldenTopK},
    {"rand_k", Params(CodecKind::kRandK), kGoldenRandK},
    {"rand_k_unbiased", WithUnbiased(Params(CodecKind::kRandK)), kGoldenRandKUnbiased},
    {"random_block", Params(CodecKind::kRandomBlock), kGoldenRandomBlock},
    {"sign_mean_abs", With(Params(CodecKind::kSign), SignScale::kMeanAbs), kGoldenSignMeanAbs},
    {"sign_unit", With(Params(CodecKind::kSign), SignScale::kUnit), kGoldenSignUnit},
    {"qsgd_s7", Params(CodecKind::kQsgd), kGoldenQsgdS7},
    {"qsgd_s1", WithLevels(Params(CodecKind::kQsgd), 1), kGoldenQsgdS1},
    // Without a posterior (the codec table's stateless Encode: a worker's first round) RegTop-k
    // is Top-k, byte for byte.
    {"reg_top_k_first_round", Params(CodecKind::kRegTopK), kGoldenTopK},
};

// RegTop-k with a posterior: Delta cycles through -1, -0.5, 0, 0.5, 1 and Q. The weights
// tanh(|1 + Delta| / 4) are transcendental, but around the cut between kept and dropped scores
// the gap is far wider than any libm's last-bit differences (checked below), so every
// architecture selects the same coordinates.
constexpr const char* kGoldenRegTopKPosterior =
    "04000000050000000a0000000b00000011000000170000001b000000220000002300000028000000"
    "290000002f000000000050c00000b03f000000c000002840000030c00000c0bf000038c000004040"
    "0000803f000018c000001040000048c0";

TEST(GoldenVectorsTest, EveryCodecEncodesToTheRecordedBytes) {
  const bool print = std::getenv("EDGESGD_PRINT_GOLDEN") != nullptr;
  for (const GoldenCase& golden : kGoldenCases) {
    const std::string actual = EncodeGolden(golden.params);
    if (print) std::printf("%s:\n\"%s\"\n", golden.name, actual.c_str());
    EXPECT_EQ(actual, golden.expected_hex) << "codec case " << golden.name;
  }
}

TEST(GoldenVectorsTest, RegTopKWithPosteriorEncodesToTheRecordedBytes) {
  const std::uint64_t sizes[] = {29, 19};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  const std::vector<float> input = GoldenInput();
  const CodecParams params = Params(CodecKind::kRegTopK);
  std::vector<float> delta(input.size());
  for (std::size_t i = 0; i < delta.size(); ++i) {
    delta[i] = i % 6 == 5 ? params.reg_top_k_q
                          : 0.5f * static_cast<float>(static_cast<int>(i % 6) - 2);
  }
  // The input's margin: per tensor, the k-th and (k+1)-th largest scores differ by > 1e-4
  // relatively, or are exactly equal (equal |a| and Delta: the index decides everywhere alike).
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    std::vector<std::pair<float, std::size_t>> scores;
    for (std::size_t j = layout.offset(t); j < layout.offset(t) + layout.size(t); ++j) {
      scores.emplace_back(std::tanh(std::fabs(1.0f + delta[j]) / params.reg_top_k_mu) *
                              std::fabs(input[j]),
                          j);
    }
    std::sort(scores.begin(), scores.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    const std::size_t k = SparseCount(layout.size(t), params.k_ratio).value();
    const float kept = scores[k - 1].first;
    const float dropped = scores[k].first;
    const bool same_inputs = std::fabs(input[scores[k - 1].second]) ==
                                 std::fabs(input[scores[k].second]) &&
                             delta[scores[k - 1].second] == delta[scores[k].second];
    EXPECT_TRUE(same_inputs || kept > dropped * (1.0f + 1e-4f)) << "tensor " << t;
  }
  const PayloadShape shape = EncodedShape(params, layout).value();
  std::vector<std::uint32_t> indices(shape.indices);
  std::vector<float> values(shape.values);
  std::vector<std::byte> scratch(CodecScratchBytes(params, layout));
  const PayloadSpans out{indices, values, {}, {}};
  ASSERT_TRUE(RegTopKCodec::EncodeWithDistortion(params, layout, delta, input, out, scratch).ok());
  const std::string actual = PayloadHex(PayloadView(out, shape));
  if (std::getenv("EDGESGD_PRINT_GOLDEN") != nullptr) {
    std::printf("reg_top_k_posterior:\n\"%s\"\n", actual.c_str());
  }
  EXPECT_EQ(actual, kGoldenRegTopKPosterior);
}

}  // namespace
}  // namespace edgesgd
