// Golden vectors: for fixed inputs, seeds and parameters, the exact encoded bytes of every codec.
// The cases live in tests/golden/codec_golden.h, shared with the Cortex-M image
// (tests/embedded/mcu_golden.cc), so x86-64, aarch64, armhf and Cortex-M check the same bytes.
// To regenerate after an intentional format change: EDGESGD_PRINT_GOLDEN=1 core_tests
// --gtest_filter='Golden*' prints the new strings.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "edgesgd/core/codecs/reg_top_k.h"
#include "golden/codec_golden.h"

namespace edgesgd {
namespace {

TEST(GoldenVectorsTest, EveryCodecEncodesToTheRecordedBytes) {
  const bool print = std::getenv("EDGESGD_PRINT_GOLDEN") != nullptr;
  const auto buffers = std::make_unique<golden::CaseBuffers>();
  for (const golden::CodecCase& golden : golden::kCodecCases) {
    const Result<std::size_t> length = golden::EncodeCase(golden, *buffers);
    ASSERT_TRUE(length.ok()) << golden.name << ": " << length.status().str();
    const std::string actual(buffers->hex.data(), length.value());
    if (print) std::printf("%s:\n\"%s\"\n", golden.name, actual.c_str());
    EXPECT_EQ(actual, golden.payload_hex) << "codec case " << golden.name;
  }
}

TEST(GoldenVectorsTest, EveryRegisteredCodecHasACase) {
  for (CodecId id = 0; id < kCodecCount; ++id) {
    const bool covered = std::any_of(
        std::begin(golden::kCodecCases), std::end(golden::kCodecCases),
        [id](const golden::CodecCase& golden) { return CodecIdOf(golden.params) == id; });
    EXPECT_TRUE(covered) << CodecName(id) << " has no golden case";
  }
}

// The comparison helpers themselves: a byte off, a length off, and hex of the wrong case fail.
TEST(GoldenVectorsTest, HexHelpersRejectNearMisses) {
  const std::byte bytes[] = {std::byte{0x0f}, std::byte{0xa0}};
  EXPECT_TRUE(golden::BytesMatchHex(bytes, "0fa0"));
  EXPECT_FALSE(golden::BytesMatchHex(bytes, "0fa1"));
  EXPECT_FALSE(golden::BytesMatchHex(bytes, "0fa0ff"));
  EXPECT_FALSE(golden::BytesMatchHex(bytes, "0FA0"));
  char small[3];
  EXPECT_EQ(golden::ToHex(bytes, small), 0u);
}

// RegTop-k with a posterior: Delta cycles through -1, -0.5, 0, 0.5, 1 and Q. The weights
// tanh(|1 + Delta| / 4) are transcendental, but around the cut between kept and dropped scores
// the gap is far wider than any libm's last-bit differences (checked below), so every
// architecture selects the same coordinates.
constexpr const char* kGoldenRegTopKPosterior =
    "04000000050000000a0000000b00000011000000170000001b000000220000002300000028000000"
    "290000002f000000000050c00000b03f000000c000002840000030c00000c0bf000038c000004040"
    "0000803f000018c000001040000048c0";

TEST(GoldenVectorsTest, RegTopKWithPosteriorEncodesToTheRecordedBytes) {
  const TensorLayout& layout = golden::kLayout;
  std::array<float, golden::kInputSize> input;
  golden::FillInput(input);
  const RegTopKParams params{.k_ratio = golden::kKeepRatio};
  std::vector<float> delta(input.size());
  for (std::size_t i = 0; i < delta.size(); ++i) {
    delta[i] = i % 6 == 5 ? params.q : 0.5f * static_cast<float>(static_cast<int>(i % 6) - 2);
  }
  // The input's margin: per tensor, the k-th and (k+1)-th largest scores differ by > 1e-4
  // relatively, or are exactly equal (equal |a| and Delta: the index decides everywhere alike).
  for (std::size_t t = 0; t < layout.tensor_count(); ++t) {
    std::vector<std::pair<float, std::size_t>> scores;
    for (std::size_t j = layout.offset(t); j < layout.offset(t) + layout.size(t); ++j) {
      scores.emplace_back(std::tanh(std::fabs(1.0f + delta[j]) / params.mu) * std::fabs(input[j]),
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
  std::vector<char> hex(2 * shape.bytes());
  const std::size_t length = golden::PayloadHex(PayloadView(out, shape), hex);
  const std::string actual(hex.data(), length);
  if (std::getenv("EDGESGD_PRINT_GOLDEN") != nullptr) {
    std::printf("reg_top_k_posterior:\n\"%s\"\n", actual.c_str());
  }
  EXPECT_EQ(actual, kGoldenRegTopKPosterior);
}

}  // namespace
}  // namespace edgesgd
