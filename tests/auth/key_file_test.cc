// The key file: accepted syntax, one-line errors naming file and line, and a file that group or
// others can access refused unread; one device's key taken from a file that holds many.

#include "edgesgd/auth/key_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>

#include "auth/auth_test_util.h"

namespace edgesgd::auth {
namespace {

const std::string kKeyA = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
const std::string kKeyB = std::string(63, '0') + "1";
const std::string kKeyC = std::string(62, '0') + "c3";

TEST(KeyFileTest, ParsesKeysCommentsAndBlankLines) {
  FixedKeyRing<4> ring;
  const std::string text = "# edgesgd keys\n\n1 " + kKeyA + "\n  \t# indented comment\n" +
                           "4294967294\t" + kKeyB + "  \r\n";
  const HostResult<std::size_t> load = ParseKeyFile(text, "keys", ring);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(*load, 2u);
  const DeviceKey* first = ring.Find(1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(testing::Hex(first->key),
            "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
  const DeviceKey* last = ring.Find(4294967294u);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->key[kKeyBytes - 1], std::byte{1});
  EXPECT_EQ(ring.Find(2), nullptr);
  // No newline at the end of the file is fine too.
  FixedKeyRing<1> single;
  EXPECT_TRUE(ParseKeyFile("9 " + kKeyA, "keys", single).ok());
}

struct BadKeyFile {
  std::string text;
  StatusCode code;
  std::string message;
};

TEST(KeyFileTest, RejectsBadLinesWithOneLineErrors) {
  const BadKeyFile cases[] = {
      {"", StatusCode::kInvalidArgument, "keys: no keys"},
      {"# only a comment\n", StatusCode::kInvalidArgument, "keys: no keys"},
      {"1\n", StatusCode::kDataLoss, "keys:1: expected `DEVICE_ID HEX_KEY`"},
      {"1 " + kKeyA + " extra\n", StatusCode::kDataLoss, "keys:1: unexpected text after the key"},
      {"-1 " + kKeyA, StatusCode::kDataLoss,
       "keys:1: device id must be a decimal number, got '-1'"},
      {"0x1 " + kKeyA, StatusCode::kDataLoss,
       "keys:1: device id must be a decimal number, got '0x1'"},
      {"99999999999 " + kKeyA, StatusCode::kDataLoss,
       "keys:1: device id must be a decimal number, got '99999999999'"},
      {"4294967295 " + kKeyA, StatusCode::kDataLoss, "keys:1: device id must be below 4294967295"},
      {"\n2 " + kKeyA.substr(2), StatusCode::kDataLoss,
       "keys:2: key must be 64 hex digits, got 62 characters"},
      {"2 " + kKeyA.substr(1) + "g", StatusCode::kDataLoss, "keys:1: key must be 64 hex digits"},
      {"3 " + std::string(64, '0'), StatusCode::kInvalidArgument,
       "keys:1: key of device 3 is all zeros"},
      {"3 " + kKeyA + "\n3 " + kKeyB + "\n", StatusCode::kAlreadyExists,
       "keys:2: device 3 has a key already"},
      {"1 " + kKeyA + "\n2 " + kKeyA + "\n3 " + kKeyA + "\n", StatusCode::kResourceExhausted,
       "keys:3: more than 2 keys"},
  };
  for (const BadKeyFile& test : cases) {
    FixedKeyRing<2> ring;
    const HostResult<std::size_t> load = ParseKeyFile(test.text, "keys", ring);
    EXPECT_EQ(load.status().code(), test.code) << test.text;
    EXPECT_EQ(load.message(), test.message) << test.text;
    EXPECT_EQ(load.message().find('\n'), std::string::npos);
  }
}

class KeyFileOnDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "edgesgd_keys_" + std::to_string(::getpid());
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void Write(const std::string& text, mode_t mode) {
    std::ofstream(path_) << text;
    ASSERT_EQ(::chmod(path_.c_str(), mode), 0);
  }
  std::string path_;
};

TEST_F(KeyFileOnDiskTest, LoadsPrivateFile) {
  Write("5 " + kKeyA + "\n", 0600);
  FixedKeyRing<2> ring;
  const HostResult<std::size_t> load = LoadKeyFile(path_, ring);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(*load, 1u);
  EXPECT_NE(ring.Find(5), nullptr);
}

TEST_F(KeyFileOnDiskTest, RefusesAFileOthersCanAccess) {
  for (const mode_t mode : {0644u, 0640u, 0604u, 0660u, 0710u}) {
    Write("5 " + kKeyA + "\n", mode);
    FixedKeyRing<2> ring;
    const HostResult<std::size_t> load = LoadKeyFile(path_, ring);
    EXPECT_EQ(load.status().code(), StatusCode::kFailedPrecondition) << std::oct << mode;
    char text[8];
    std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode));
    EXPECT_EQ(load.message(), "key file " + path_ + " is accessible by group or others (mode " +
                                  text + "): run chmod 600 " + path_ +
                                  " (and make new keys if others read it)");
    EXPECT_EQ(ring.Find(5), nullptr) << "a refused file's keys must not be loaded";
  }
}

TEST_F(KeyFileOnDiskTest, ErrorsNameTheFile) {
  FixedKeyRing<2> ring;
  const HostResult<std::size_t> missing = LoadKeyFile(path_ + ".missing", ring);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(),
            "cannot open key file " + path_ + ".missing: No such file or directory");
  const HostResult<std::size_t> directory = LoadKeyFile(::testing::TempDir(), ring);
  EXPECT_EQ(directory.status().code(), StatusCode::kUnavailable);

  Write("5 " + kKeyA + "\nbad line\n", 0600);
  const HostResult<std::size_t> bad = LoadKeyFile(path_, ring);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(bad.message(), path_ + ":2: device id must be a decimal number, got 'bad'");
}

// The shared file `edgesgd keygen` writes, which a worker's one-key ring cannot hold whole.
TEST_F(KeyFileOnDiskTest, LoadDeviceKeyTakesOneLineOfAFileOfMany) {
  Write("# edgesgd keys\n1 " + kKeyA + "\n7 " + kKeyB + "\n9 " + kKeyC + "\n", 0600);
  FixedKeyRing<1> ring;
  EXPECT_EQ(LoadKeyFile(path_, ring).status().code(), StatusCode::kResourceExhausted);
  ring.Clear();
  const HostResult<std::size_t> load = LoadDeviceKey(path_, 7, ring);
  ASSERT_TRUE(load.ok()) << load.message();
  EXPECT_EQ(*load, 1u);
  EXPECT_EQ(ring.size(), 1u);
  ASSERT_NE(ring.Find(7), nullptr);
  EXPECT_EQ(testing::Hex(ring.Find(7)->key), kKeyB);
  // Its own file's single line serves the device as well.
  Write("9 " + kKeyC + "\n", 0600);
  FixedKeyRing<1> own;
  ASSERT_TRUE(LoadDeviceKey(path_, 9, own).ok());
  EXPECT_EQ(testing::Hex(own.Find(9)->key), kKeyC);
}

TEST_F(KeyFileOnDiskTest, LoadDeviceKeyChecksEveryLine) {
  Write("1 " + kKeyA + "\n7 " + kKeyB + "\n8 " + kKeyC.substr(1) + "\n", 0600);
  FixedKeyRing<1> ring;
  const HostResult<std::size_t> load = LoadDeviceKey(path_, 7, ring);
  EXPECT_EQ(load.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(load.message(), path_ + ":3: key must be 64 hex digits, got 63 characters");
}

TEST_F(KeyFileOnDiskTest, LoadDeviceKeyNamesAMissingDevice) {
  Write("1 " + kKeyA + "\n2 " + kKeyB + "\n", 0600);
  FixedKeyRing<1> ring;
  const HostResult<std::size_t> load = LoadDeviceKey(path_, 7, ring);
  EXPECT_EQ(load.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load.message(), "key file " + path_ + " has no key for device 7");
  EXPECT_EQ(ring.size(), 0u);
  // Told apart from a missing file.
  EXPECT_EQ(LoadDeviceKey(path_ + ".missing", 7, ring).status().code(), StatusCode::kNotFound);
}

TEST_F(KeyFileOnDiskTest, LoadDeviceKeyRefusesTheDeviceTwice) {
  Write("7 " + kKeyA + "\n1 " + kKeyB + "\n7 " + kKeyC + "\n", 0600);
  FixedKeyRing<1> ring;  // full after the first line: the second must still read as a duplicate
  const HostResult<std::size_t> load = LoadDeviceKey(path_, 7, ring);
  EXPECT_EQ(load.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(load.message(), path_ + ":3: device 7 has a key already");
}

TEST_F(KeyFileOnDiskTest, LoadDeviceKeyRefusesAFileOthersCanAccess) {
  Write("5 " + kKeyA + "\n", 0640);
  FixedKeyRing<1> ring;
  const HostResult<std::size_t> load = LoadDeviceKey(path_, 5, ring);
  EXPECT_EQ(load.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(load.message(), "key file " + path_ +
                                " is accessible by group or others (mode 0640): run chmod 600 " +
                                path_ + " (and make new keys if others read it)");
  EXPECT_EQ(ring.Find(5), nullptr);
}

TEST(KeyRingTest, DecodeKeyHexTakesExactly64HexDigitsOfEitherCase) {
  std::array<std::byte, kKeyBytes> key{};
  ASSERT_TRUE(DecodeKeyHex(kKeyA, key));
  EXPECT_EQ(key[0], std::byte{0x00});
  EXPECT_EQ(key[5], std::byte{0x55});
  EXPECT_EQ(key[10], std::byte{0xaa});
  EXPECT_EQ(key[31], std::byte{0xff});  // from upper-case digits
  std::string not_hex = kKeyA;
  not_hex[0] = 'g';
  std::string blank = kKeyA;
  blank[63] = ' ';
  for (const std::string& bad : {kKeyA.substr(1), kKeyA + "0", not_hex, blank, std::string()}) {
    key.fill(std::byte{1});
    EXPECT_FALSE(DecodeKeyHex(bad, key)) << bad;
    EXPECT_EQ(key, (std::array<std::byte, kKeyBytes>{})) << "not zeroized after " << bad;
  }
}

TEST(KeyRingTest, AddFindClear) {
  FixedKeyRing<2> ring;
  EXPECT_EQ(ring.capacity(), 2u);
  EXPECT_EQ(ring.Add(kNoDevice, testing::TestKey(1)), Status::InvalidArgument());
  ASSERT_TRUE(ring.Add(1, testing::TestKey(1)).ok());
  EXPECT_EQ(ring.Add(1, testing::TestKey(2)).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(ring.Add(2, testing::TestKey(2)).ok());
  EXPECT_EQ(ring.Add(3, testing::TestKey(3)), Status::ResourceExhausted());
  ASSERT_NE(ring.Find(2), nullptr);
  EXPECT_EQ(ring.Find(2)->key, testing::TestKey(2));
  ring.Clear();
  EXPECT_EQ(ring.size(), 0u);
  EXPECT_EQ(ring.Find(1), nullptr);
}

}  // namespace
}  // namespace edgesgd::auth
