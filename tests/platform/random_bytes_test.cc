// The operating system's CSPRNG facade: fills whole buffers (including sizes getrandom may
// return short for) and does not repeat itself.

#include "edgesgd/platform/random_bytes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

namespace edgesgd::platform {
namespace {

TEST(RandomBytesTest, FillsBuffersAndDoesNotRepeat) {
  std::array<std::byte, 16> first{};
  std::array<std::byte, 16> second{};
  ASSERT_TRUE(FillRandomBytes(first).ok());
  ASSERT_TRUE(FillRandomBytes(second).ok());
  EXPECT_NE(first, second);  // equal with probability 2^-128

  // Larger than one getrandom chunk: every 4 KiB quarter must have been written (a zero-filled
  // quarter has probability 2^-8192).
  std::vector<std::byte> large(16384, std::byte{0});
  ASSERT_TRUE(FillRandomBytes(large).ok());
  for (std::size_t quarter = 0; quarter < 4; ++quarter) {
    const auto begin = large.begin() + static_cast<std::ptrdiff_t>(quarter * 4096);
    EXPECT_TRUE(std::any_of(begin, begin + 4096, [](std::byte b) { return b != std::byte{0}; }));
  }
  EXPECT_TRUE(FillRandomBytes({}).ok());
}

}  // namespace
}  // namespace edgesgd::platform
