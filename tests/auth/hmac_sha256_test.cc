// HMAC-SHA256 through the mbed TLS wrapper against the RFC 4231 test vectors (cases 1-7), plus
// key reuse across messages, message splitting and the constant-time comparison.

#include "edgesgd/auth/hmac_sha256.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "auth/auth_test_util.h"

namespace edgesgd::auth {
namespace {

struct Rfc4231Case {
  std::vector<std::byte> key;
  std::vector<std::byte> data;
  std::string_view expected_hex;  // case 5 gives only the first 128 bits
};

std::vector<std::byte> Repeated(std::uint8_t value, std::size_t count) {
  return std::vector<std::byte>(count, std::byte{value});
}

std::vector<Rfc4231Case> Rfc4231Cases() {
  std::vector<std::byte> counting_key;
  for (int i = 1; i <= 25; ++i) counting_key.push_back(static_cast<std::byte>(i));
  return {
      {Repeated(0x0b, 20), testing::Bytes("Hi There"),
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {testing::Bytes("Jefe"), testing::Bytes("what do ya want for nothing?"),
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {Repeated(0xaa, 20), Repeated(0xdd, 50),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {counting_key, Repeated(0xcd, 50),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {Repeated(0x0c, 20), testing::Bytes("Test With Truncation"),
       "a3b6167473100ee06e0c796c2955552b"},
      {Repeated(0xaa, 131),
       testing::Bytes("Test Using Larger Than Block-Size Key - Hash Key First"),
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {Repeated(0xaa, 131),
       testing::Bytes("This is a test using a larger than block-size key and a larger than "
                      "block-size data. The key needs to be hashed before being used by the "
                      "HMAC algorithm."),
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
}

TEST(HmacSha256Test, Rfc4231Vectors) {
  HmacSha256 hmac;
  ASSERT_TRUE(hmac.Init().ok());
  int case_number = 0;
  for (const Rfc4231Case& test : Rfc4231Cases()) {
    ++case_number;
    std::array<std::byte, kTagBytes> tag;
    ASSERT_TRUE(hmac.SetKey(test.key).ok());
    ASSERT_TRUE(hmac.Mac({test.data}, tag).ok());
    const std::string hex = testing::Hex(tag);
    EXPECT_EQ(hex.substr(0, test.expected_hex.size()), test.expected_hex)
        << "RFC 4231 test case " << case_number;
  }
}

TEST(HmacSha256Test, SameKeyManyMessagesAndSplitInput) {
  HmacSha256 hmac;
  ASSERT_TRUE(hmac.Init().ok());
  ASSERT_TRUE(hmac.SetKey(testing::Bytes("Jefe")).ok());
  const std::vector<std::byte> message = testing::Bytes("what do ya want for nothing?");
  std::array<std::byte, kTagBytes> first;
  std::array<std::byte, kTagBytes> again;
  std::array<std::byte, kTagBytes> split;
  ASSERT_TRUE(hmac.Mac({message}, first).ok());
  ASSERT_TRUE(hmac.Mac({message}, again).ok());
  const std::span<const std::byte> whole(message);
  ASSERT_TRUE(hmac.Mac({whole.first(5), whole.subspan(5, 10), whole.subspan(15)}, split).ok());
  EXPECT_EQ(testing::Hex(first),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(first, again);
  EXPECT_EQ(first, split);
}

TEST(HmacSha256Test, UsageErrors) {
  HmacSha256 hmac;
  std::array<std::byte, kTagBytes> tag;
  EXPECT_EQ(hmac.SetKey(testing::Bytes("k")), Status::FailedPrecondition());
  ASSERT_TRUE(hmac.Init().ok());
  EXPECT_EQ(hmac.Init(), Status::FailedPrecondition());
  EXPECT_EQ(hmac.Mac({}, tag), Status::FailedPrecondition());  // no key yet

  HmacSha256 moved(std::move(hmac));
  EXPECT_TRUE(moved.initialized());
  EXPECT_FALSE(hmac.initialized());  // NOLINT(bugprone-use-after-move): moved-from is empty
}

TEST(TagsEqualTest, ComparesAllBytesAndLengths) {
  std::array<std::byte, kTagBytes> a{};
  std::array<std::byte, kTagBytes> b{};
  EXPECT_TRUE(TagsEqual(a, b));
  for (std::size_t i = 0; i < kTagBytes; ++i) {
    b = a;
    b[i] = std::byte{0x80};
    EXPECT_FALSE(TagsEqual(a, b)) << "byte " << i;
  }
  EXPECT_FALSE(TagsEqual(std::span<const std::byte>(a), std::span<const std::byte>(a).first(31)));
}

}  // namespace
}  // namespace edgesgd::auth
