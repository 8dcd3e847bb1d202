// Secure aggregation's server takes all its storage at Init: a whole round without drop-outs —
// every phase, the reconstruction of the self-mask seeds and the unmasking of the sum — never
// allocates, and neither does a device's last phase. A device's key agreement does allocate
// inside mbed TLS's bignums (through calloc), which the counter must see for the count of the
// server's calls to mean anything.

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "alloc/allocation_counter.h"
#include "edgesgd/secagg/client.h"
#include "edgesgd/secagg/server.h"
#include "secagg/secagg_test_util.h"

namespace edgesgd::secagg {
namespace {

template <typename Body>
std::size_t AllocationsDuring(Body&& body) {
  const std::size_t before = edgesgd::testing::HeapAllocationCount();
  body();
  return edgesgd::testing::HeapAllocationCount() - before;
}

TEST(SecAggSteadyStateTest, ServerRoundsAndUnmaskingDoNotAllocate) {
  constexpr std::uint32_t kDevices = 6;
  constexpr std::uint32_t kWords = 512;
  testing::Arenas arenas;
  Server server;
  ASSERT_TRUE(arenas.Init(server, ServerLimits{kDevices, kDevices - 1, kWords}).ok());
  std::vector<Client> clients(kDevices);
  std::vector<std::uint32_t> ids(kDevices);
  for (std::uint32_t i = 0; i < kDevices; ++i) {
    ids[i] = 10 + i;
    ASSERT_TRUE(arenas.Init(clients[i], ClientLimits{kDevices - 1, 2}).ok());
  }
  std::vector<RosterEntry> roster(kDevices - 1);
  std::vector<SealedShares> sealed(kDevices - 1);
  std::vector<std::uint32_t> words(kWords), survivors(kDevices - 1);
  std::vector<RevealedShare> revealed(kDevices);
  std::size_t server_allocations = 0;
  std::size_t unmask_allocations = 0;
  std::size_t device_allocations = 0;

  for (std::uint64_t round = 1; round <= 3; ++round) {
    const RoundPlan plan{round, 4, 0, 7, kWords};
    server_allocations += AllocationsDuring([&] { ASSERT_TRUE(server.Start(plan, ids).ok()); });
    for (std::uint32_t i = 0; i < kDevices; ++i) {
      KeyAdvertisement keys;
      Key entropy{};
      entropy[0] = static_cast<std::byte>(i);
      entropy[1] = static_cast<std::byte>(round);
      device_allocations += AllocationsDuring(
          [&] { ASSERT_TRUE(clients[i].Start(round, ids[i], entropy, keys).ok()); });
      server_allocations +=
          AllocationsDuring([&] { ASSERT_TRUE(server.AddKeys(ids[i], keys).ok()); });
    }
    server_allocations += AllocationsDuring([&] { ASSERT_TRUE(server.CloseKeys().ok()); });
    for (std::uint32_t i = 0; i < kDevices; ++i) {
      std::uint32_t point = 0;
      std::size_t count = 0;
      server_allocations +=
          AllocationsDuring([&] { count = server.RosterFor(ids[i], point, roster).value(); });
      Digest commitment;
      const std::size_t written =
          clients[i]
              .ShareKeys(plan.threshold, point, {roster.data(), count}, commitment, sealed)
              .value();
      server_allocations += AllocationsDuring([&] {
        ASSERT_TRUE(server.AddShares(ids[i], commitment, {sealed.data(), written}).ok());
      });
    }
    server_allocations += AllocationsDuring([&] { ASSERT_TRUE(server.CloseShares().ok()); });
    for (std::uint32_t i = 0; i < kDevices; ++i) {
      std::size_t count = 0;
      server_allocations +=
          AllocationsDuring([&] { count = server.SharesFor(ids[i], sealed).value(); });
      ASSERT_TRUE(clients[i].ReceiveShares({sealed.data(), count}).ok());
      std::fill(words.begin(), words.end(), i);
      ASSERT_TRUE(clients[i].MaskInput(words).ok());
      server_allocations +=
          AllocationsDuring([&] { ASSERT_TRUE(server.AddMaskedInput(ids[i], words).ok()); });
    }
    server_allocations += AllocationsDuring([&] { ASSERT_TRUE(server.CloseInputs().ok()); });
    for (std::uint32_t i = 0; i < kDevices; ++i) {
      std::size_t count = 0;
      std::size_t written = 0;
      server_allocations +=
          AllocationsDuring([&] { count = server.SurvivorsFor(ids[i], survivors).value(); });
      unmask_allocations += AllocationsDuring([&] {
        written = clients[i].Unmask({survivors.data(), count}, revealed).value();
      });
      server_allocations += AllocationsDuring([&] {
        ASSERT_TRUE(server.AddUnmasking(ids[i], {revealed.data(), written}).ok());
      });
    }
    server_allocations += AllocationsDuring([&] { ASSERT_TRUE(server.Finish().ok()); });
    // 0 + 1 + ... + 5 per word.
    EXPECT_EQ(server.sum()[0], 15u);
  }
  EXPECT_EQ(server_allocations, 0u);
  EXPECT_EQ(unmask_allocations, 0u);
  if (edgesgd::testing::CountsMallocCalls()) {
    EXPECT_GT(device_allocations, 0u);
  }
}

}  // namespace
}  // namespace edgesgd::secagg
