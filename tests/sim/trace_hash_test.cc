#include "edgesgd/sim/trace_hash.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/fake_sessions.h"

namespace edgesgd::sim {
namespace {

TEST(SimTraceHash, AddU64IsFnv1aOverLittleEndianBytes) {
  // Reference FNV-1a of the bytes 01 00 00 00 00 00 00 00, computed byte by byte.
  std::uint64_t expected = TraceHash::kOffsetBasis;
  const std::uint8_t bytes[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  for (const std::uint8_t b : bytes) expected = (expected ^ b) * TraceHash::kPrime;
  TraceHash hash;
  hash.AddU64(1);
  EXPECT_EQ(hash.value(), expected);
}

TEST(SimTraceHash, DigestSeesEverySingleBitFlipAndEveryLength) {
  for (std::size_t size : {0u, 1u, 7u, 8u, 31u, 32u, 33u, 100u, 1000u}) {
    const std::vector<std::byte> frame = testing::TaggedBytes(size, 17);
    const std::uint64_t digest = TraceHash::ContentDigest(frame);
    EXPECT_EQ(TraceHash::ContentDigest(frame), digest);
    for (std::size_t bit = 0; bit < size * 8; ++bit) {
      std::vector<std::byte> flipped = frame;
      flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
      ASSERT_NE(TraceHash::ContentDigest(flipped), digest) << size << " " << bit;
    }
  }
  TraceHash a;
  a.AddBytes(testing::TaggedBytes(40, 0));
  TraceHash b;
  b.AddBytes(testing::TaggedBytes(41, 0));
  EXPECT_NE(a.value(), b.value());
}

constexpr std::uint64_t kPinnedDigest = 18213458056822540642ull;

TEST(SimTraceHash, DigestIsPinned) {
  // Fixed on every architecture: the digest reads little-endian words whatever the host.
  EXPECT_EQ(TraceHash::ContentDigest(testing::TaggedBytes(77, 5)), kPinnedDigest);
}

}  // namespace
}  // namespace edgesgd::sim
