// Zero heap allocation in steady state for authenticated records: after Init and the hellos,
// sealing and opening thousands of records (and starting new connections on the same objects)
// never calls operator new or malloc. mbed TLS allocates through calloc, which the counter
// interposes outside AddressSanitizer builds.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <vector>

#include "alloc/allocation_counter.h"
#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/key_ring.h"

namespace edgesgd::auth {
namespace {

constexpr std::size_t kPayloadBytes = 1024;
constexpr int kRecords = 2000;
constexpr int kReconnects = 20;

std::array<std::byte, kKeyBytes> Key() {
  std::array<std::byte, kKeyBytes> key;
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::byte>(i * 5 + 3);
  return key;
}

std::array<std::byte, kNonceBytes> Nonce(int connection, int side) {
  std::array<std::byte, kNonceBytes> nonce{};
  nonce[0] = static_cast<std::byte>(connection);
  nonce[1] = static_cast<std::byte>(side);
  return nonce;
}

TEST(AuthSteadyStateTest, SealOpenAndReconnectDoNotAllocate) {
  FixedKeyRing<4> keys;
  ASSERT_TRUE(keys.Add(1, Key()).ok());
  ConnectionAuth worker;
  ConnectionAuth server;
  const std::size_t before_init = testing::HeapAllocationCount();
  ASSERT_TRUE(worker.Init(kPayloadBytes).ok());
  ASSERT_TRUE(server.Init(kPayloadBytes).ok());
  // Init is where the digest states are allocated (mbed TLS's calloc); seeing it counted shows
  // the counter observes them, which it cannot where AddressSanitizer owns malloc.
  if (testing::CountsMallocCalls()) {
    EXPECT_GT(testing::HeapAllocationCount(), before_init);
  }
  std::vector<std::byte> payload(kPayloadBytes, std::byte{0x42});
  std::vector<std::byte> up(RecordBytes(kPayloadBytes));
  std::vector<std::byte> down(RecordBytes(kPayloadBytes));

  const std::size_t before = testing::HeapAllocationCount();
  std::size_t opened_bytes = 0;
  for (int connection = 0; connection < kReconnects; ++connection) {
    std::array<std::byte, kInitiatorHelloBytes> hello;
    std::array<std::byte, kResponderHelloBytes> reply;
    ASSERT_TRUE(worker.StartInitiator(keys, 1, Nonce(connection, 0), hello).ok());
    ASSERT_TRUE(server.StartResponder(keys, hello, Nonce(connection, 1), reply).ok());
    ASSERT_TRUE(worker.AcceptResponderHello(reply).ok());
    for (int i = 0; i < kRecords / kReconnects; ++i) {
      payload[0] = static_cast<std::byte>(i);
      const Result<std::span<const std::byte>> sealed = worker.Seal(payload, up);
      ASSERT_TRUE(sealed.ok());
      const Result<std::span<const std::byte>> opened = server.Open(*sealed);
      ASSERT_TRUE(opened.ok());
      opened_bytes += opened->size();
      const Result<std::span<const std::byte>> answer = server.Seal(*opened, down);
      ASSERT_TRUE(answer.ok());
      ASSERT_TRUE(worker.Open(*answer).ok());
    }
  }
  EXPECT_EQ(testing::HeapAllocationCount(), before);
  EXPECT_EQ(opened_bytes, std::size_t{kRecords} * kPayloadBytes);
}

}  // namespace
}  // namespace edgesgd::auth
