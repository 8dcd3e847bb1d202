#include "edgesgd/core/arena.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace edgesgd {
namespace {

TEST(ArenaTest, AllocatesAlignedZeroedSpansAndReportsUsage) {
  alignas(kArenaAlignment) std::byte storage[256];
  for (auto& b : storage) b = std::byte{0xAB};
  Arena arena{std::span<std::byte>(storage)};
  EXPECT_EQ(arena.capacity_bytes(), 256u);

  auto floats = arena.Allocate<float>(3);
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ(floats->size(), 3u);
  for (float f : *floats) EXPECT_EQ(f, 0.0f);
  EXPECT_EQ(arena.used_bytes(), ArenaBytesFor<float>(3));
  EXPECT_EQ(arena.used_bytes(), 16u);

  auto words = arena.Allocate<std::uint64_t>(5);
  ASSERT_TRUE(words.ok());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(words->data()) % kArenaAlignment, 0u);
  EXPECT_EQ(arena.used_bytes(), 16u + 48u);
}

TEST(ArenaTest, AlignsAMisalignedStorageStart) {
  alignas(kArenaAlignment) std::byte storage[64];
  Arena arena{std::span<std::byte>(storage).subspan(3)};
  EXPECT_EQ(arena.capacity_bytes(), 64u - kArenaAlignment);
  auto bytes = arena.AllocateBytes(1);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(bytes->data()) % kArenaAlignment, 0u);
}

TEST(ArenaTest, RefusesWhenFullOrSealed) {
  alignas(kArenaAlignment) std::byte storage[64];
  Arena arena{std::span<std::byte>(storage)};
  EXPECT_EQ(arena.Allocate<float>(17).status(), Status::ResourceExhausted());
  EXPECT_EQ(arena.Allocate<float>(SIZE_MAX / 2).status(), Status::ResourceExhausted());
  ASSERT_TRUE(arena.Allocate<float>(16).ok());
  EXPECT_EQ(arena.Allocate<float>(1).status(), Status::ResourceExhausted());

  Arena other{std::span<std::byte>(storage)};
  other.Seal();
  EXPECT_TRUE(other.sealed());
  EXPECT_EQ(other.Allocate<float>(1).status(), Status::FailedPrecondition());
}

TEST(ArenaTest, EmptyStorageHasNoCapacity) {
  Arena arena;
  EXPECT_EQ(arena.capacity_bytes(), 0u);
  EXPECT_EQ(arena.AllocateBytes(1).status(), Status::ResourceExhausted());
  EXPECT_TRUE(arena.AllocateBytes(0).ok());
}

}  // namespace
}  // namespace edgesgd
