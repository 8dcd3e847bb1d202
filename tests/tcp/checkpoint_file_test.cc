// The server's checkpoint files: written whole through a temporary file that nobody else could
// have prepared (a symbolic link at a predictable name is neither followed nor overwritten),
// readable by the server's user only, and on failure leaving no temporary file behind.

#include "checkpoint_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace edgesgd::tcp::internal {
namespace {

namespace fs = std::filesystem;

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::path(::testing::TempDir()) /
                 ("checkpoint_file_" + std::string(::testing::UnitTest::GetInstance()
                                                        ->current_test_info()
                                                        ->name()));
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::directory_iterator(directory_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  fs::path directory_;
};

std::vector<std::byte> Bytes(const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) bytes[i] = static_cast<std::byte>(text[i]);
  return bytes;
}

std::string Text(const std::vector<std::byte>& bytes) {
  std::string text(bytes.size(), '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) text[i] = static_cast<char>(bytes[i]);
  return text;
}

TEST_F(CheckpointFileTest, WritesWholeFileOwnerOnlyAndLeavesNoTemporary) {
  const std::string path = (directory_ / "run.ckpt").string();
  const HostResult<> first = WriteFileAtomically(path, Bytes("first"));
  ASSERT_TRUE(first.ok()) << first.message();
  const HostResult<> second = WriteFileAtomically(path, Bytes("second, longer"));
  ASSERT_TRUE(second.ok()) << second.message();
  const HostResult<std::vector<std::byte>> read = ReadWholeFile(path);
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(Text(*read), "second, longer");
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(Entries(), std::vector<std::string>{"run.ckpt"});
}

TEST_F(CheckpointFileTest, SymbolicLinkAtTheOldTemporaryNameIsNotFollowed) {
  const fs::path victim = directory_ / "victim";
  { std::ofstream(victim) << "precious"; }
  const std::string path = (directory_ / "run.ckpt").string();
  fs::create_symlink(victim, path + ".tmp");
  const HostResult<> written = WriteFileAtomically(path, Bytes("model"));
  ASSERT_TRUE(written.ok()) << written.message();
  std::ifstream in(victim);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "precious");
  EXPECT_TRUE(fs::is_symlink(path + ".tmp"));
  EXPECT_FALSE(fs::is_symlink(path));
}

TEST_F(CheckpointFileTest, FailureNamesTheFileAndLeavesNothingBehind) {
  // The target is a directory: the write succeeds, the rename fails.
  const fs::path occupied = directory_ / "run.ckpt";
  fs::create_directory(occupied);
  const HostResult<> renamed = WriteFileAtomically(occupied.string(), Bytes("model"));
  EXPECT_EQ(renamed.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(renamed.message().find(occupied.string()), std::string::npos) << renamed.message();
  EXPECT_EQ(Entries(), std::vector<std::string>{"run.ckpt"});

  const std::string missing = (directory_ / "no-such-dir" / "run.ckpt").string();
  const HostResult<> created = WriteFileAtomically(missing, Bytes("model"));
  EXPECT_EQ(created.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(created.message().find("no-such-dir"), std::string::npos) << created.message();
}

}  // namespace
}  // namespace edgesgd::tcp::internal
