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
  std::string detail;
  ASSERT_TRUE(WriteFileAtomically(path, Bytes("first"), detail).ok()) << detail;
  ASSERT_TRUE(WriteFileAtomically(path, Bytes("second, longer"), detail).ok()) << detail;
  std::vector<std::byte> read;
  ASSERT_TRUE(ReadWholeFile(path, read, detail).ok()) << detail;
  EXPECT_EQ(Text(read), "second, longer");
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
  std::string detail;
  ASSERT_TRUE(WriteFileAtomically(path, Bytes("model"), detail).ok()) << detail;
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
  std::string detail;
  const Status status = WriteFileAtomically(occupied.string(), Bytes("model"), detail);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(detail.find(occupied.string()), std::string::npos) << detail;
  EXPECT_EQ(Entries(), std::vector<std::string>{"run.ckpt"});

  const std::string missing = (directory_ / "no-such-dir" / "run.ckpt").string();
  detail.clear();
  EXPECT_EQ(WriteFileAtomically(missing, Bytes("model"), detail).code(), StatusCode::kUnavailable);
  EXPECT_NE(detail.find("no-such-dir"), std::string::npos) << detail;
}

}  // namespace
}  // namespace edgesgd::tcp::internal
