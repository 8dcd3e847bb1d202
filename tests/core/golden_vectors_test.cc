// Golden vectors: for fixed inputs, seeds and parameters, the exact encoded bytes of every codec.
// The cases live in tests/golden/codec_golden.h, shared with the Cortex-M image
// (tests/embedded/mcu_golden.cc), so x86-64, aarch64, armhf and Cortex-M check the same bytes.
// To regenerate after an intentional format change: EDGESGD_PRINT_GOLDEN=1 core_tests
// --gtest_filter='Golden*' prints the new strings.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

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

}  // namespace
}  // namespace edgesgd
