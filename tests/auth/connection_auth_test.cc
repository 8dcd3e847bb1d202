// ConnectionAuth: hellos, sealing and opening records, and every rejection the threat model in
// connection_auth.h promises — altered bits, wrong keys, unknown devices, replays within and
// across connections, reflection, truncation, oversized records and sequence-number exhaustion.

#include "edgesgd/auth/connection_auth.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "auth/auth_test_util.h"

namespace edgesgd::auth {
namespace {

using testing::Bytes;
using testing::Handshake;
using testing::kTestMaxPayload;
using testing::TestKey;
using testing::TestNonce;

constexpr std::uint32_t kDevice = 7;

class ConnectionAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::uint32_t device : {3u, kDevice, 11u}) {
      ASSERT_TRUE(server_keys_.Add(device, TestKey(device)).ok());
    }
    ASSERT_TRUE(worker_keys_.Add(kDevice, TestKey(kDevice)).ok());
    ASSERT_TRUE(attacker_keys_.Add(kDevice, TestKey(kDevice, /*salt=*/99)).ok());
  }

  // A new initiator/responder pair, established over the hellos with nonces from `seed`.
  void Connect(ConnectionAuth& worker, ConnectionAuth& server, std::uint8_t seed = 1) {
    if (worker.max_payload_bytes() == 0) {
      ASSERT_TRUE(worker.Init(kTestMaxPayload).ok());
    }
    if (server.max_payload_bytes() == 0) {
      ASSERT_TRUE(server.Init(kTestMaxPayload).ok());
    }
    ASSERT_TRUE(Handshake(worker, worker_keys_, server, server_keys_, kDevice, seed));
  }

  // Inits `initiator` and `server`; `initiator`, holding `keys`, writes its hello as `device`
  // (nonces from seed 1).
  static void StartHello(ConnectionAuth& initiator, const KeyRing& keys, std::uint32_t device,
                         ConnectionAuth& server, std::span<std::byte, kInitiatorHelloBytes> hello) {
    ASSERT_TRUE(initiator.Init(kTestMaxPayload).ok());
    ASSERT_TRUE(server.Init(kTestMaxPayload).ok());
    ASSERT_TRUE(initiator.StartInitiator(keys, device, TestNonce(1), hello).ok());
  }

  // StartHello as kDevice, and `server` answers it into `reply` (nonces from seed 2).
  void ExchangeHellos(ConnectionAuth& initiator, const KeyRing& keys, ConnectionAuth& server,
                      std::span<std::byte, kInitiatorHelloBytes> hello,
                      std::span<std::byte, kResponderHelloBytes> reply) {
    ASSERT_NO_FATAL_FAILURE(StartHello(initiator, keys, kDevice, server, hello));
    ASSERT_TRUE(server.StartResponder(server_keys_, hello, TestNonce(2), reply).ok());
  }

  // Whether `receiver` refuses `record` with `status` and `reason`.
  static ::testing::AssertionResult Refuses(ConnectionAuth& receiver,
                                            std::span<const std::byte> record, Status status,
                                            RejectReason reason) {
    const Status opened = receiver.Open(record).status();
    if (opened == status && receiver.last_reject() == reason) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "Open gave " << opened.str() << " (" << RejectReasonName(receiver.last_reject())
           << "), expected " << status.str() << " (" << RejectReasonName(reason) << ")";
  }

  // Seals `payload` on `from` and returns a copy of the record.
  static std::vector<std::byte> SealCopy(ConnectionAuth& from, std::span<const std::byte> payload) {
    std::vector<std::byte> storage(RecordBytes(payload.size()));
    const Result<std::span<const std::byte>> record = from.Seal(payload, storage);
    EXPECT_TRUE(record.ok());
    return storage;
  }

  FixedKeyRing<4> server_keys_;
  FixedKeyRing<1> worker_keys_;
  FixedKeyRing<1> attacker_keys_;
};

TEST_F(ConnectionAuthTest, RoundTripBothDirections) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server);
  EXPECT_EQ(worker.role(), AuthRole::kInitiator);
  EXPECT_EQ(server.role(), AuthRole::kResponder);
  EXPECT_EQ(server.device(), kDevice);
  for (int i = 0; i < 5; ++i) {
    const std::vector<std::byte> up = Bytes("update from worker " + std::to_string(i));
    const std::vector<std::byte> record = SealCopy(worker, up);
    ASSERT_EQ(server.ReadRecordLength(record).value(), record.size());
    const Result<std::span<const std::byte>> opened = server.Open(record);
    ASSERT_TRUE(opened.ok());
    EXPECT_TRUE(std::equal(opened->begin(), opened->end(), up.begin(), up.end()));
    EXPECT_EQ(opened->data(), record.data() + kRecordHeaderBytes);  // a view, no copy

    const std::vector<std::byte> down = Bytes("model broadcast " + std::to_string(i));
    const std::vector<std::byte> down_record = SealCopy(server, down);
    const Result<std::span<const std::byte>> reply = worker.Open(down_record);
    ASSERT_TRUE(reply.ok());
    EXPECT_TRUE(std::equal(reply->begin(), reply->end(), down.begin(), down.end()));
  }
  const std::vector<std::byte> empty_record = SealCopy(worker, {});
  EXPECT_TRUE(server.Open(empty_record).ok());
  EXPECT_EQ(worker.stats().records_sealed, 6u);
  EXPECT_EQ(server.stats().records_opened, 6u);
  EXPECT_EQ(server.stats().total_rejected(), 0u);
}

TEST_F(ConnectionAuthTest, SealsInPlaceAndChecksStorage) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server);
  alignas(8) std::array<std::byte, RecordBytes(64)> storage{};
  const std::span<std::byte> payload = std::span(storage).subspan(kRecordHeaderBytes, 64);
  std::fill(payload.begin(), payload.end(), std::byte{0x5a});
  const Result<std::span<const std::byte>> record = worker.Seal(payload, storage);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->data(), storage.data());
  EXPECT_EQ(record->size(), storage.size());
  EXPECT_TRUE(server.Open(*record).ok());

  std::array<std::byte, RecordBytes(64) - 1> small{};
  EXPECT_EQ(worker.Seal(payload, small).status(), Status::ResourceExhausted());
  EXPECT_TRUE(worker.established());  // the caller's mistakes do not end the connection

  // The limit is the receiver's: a sender may seal more (a server's model broadcast can exceed
  // the updates it accepts), and a receiver with a lower limit rejects it.
  std::vector<std::byte> large(kTestMaxPayload + 1);
  std::vector<std::byte> large_storage(RecordBytes(large.size()));
  ASSERT_TRUE(worker.Seal(large, large_storage).ok());
  EXPECT_TRUE(Refuses(server, large_storage, Status::OutOfRange(), RejectReason::kOversized));
}

// A record sealed around a payload that stays where it is equals the one Seal builds, and
// takes the next sequence number like any other.
TEST_F(ConnectionAuthTest, DetachedSealMatchesSeal) {
  ConnectionAuth worker;
  ConnectionAuth twin;
  ConnectionAuth server;
  ConnectionAuth twin_server;
  Connect(worker, server);
  Connect(twin, twin_server);
  std::vector<std::byte> payload(40);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
  for (int record_index = 0; record_index < 2; ++record_index) {
    alignas(8) std::array<std::byte, RecordBytes(40)> sealed{};
    ASSERT_TRUE(twin.Seal(payload, sealed).ok());
    std::array<std::byte, kRecordHeaderBytes> header{};
    std::array<std::byte, kTagBytes> tag{};
    ASSERT_TRUE(worker.SealDetached(payload, header, tag).ok());
    alignas(8) std::array<std::byte, RecordBytes(40)> joined{};
    std::copy(header.begin(), header.end(), joined.begin());
    std::copy(payload.begin(), payload.end(), joined.begin() + kRecordHeaderBytes);
    std::copy(tag.begin(), tag.end(), joined.begin() + kRecordHeaderBytes + 40);
    EXPECT_TRUE(server.Open(joined).ok());
    // The twins connected with the same nonces, so they hold the same keys.
    EXPECT_EQ(joined, sealed);
  }
  EXPECT_EQ(server.stats().records_opened, 2u);
  ConnectionAuth idle;
  ASSERT_TRUE(idle.Init(kTestMaxPayload).ok());
  std::array<std::byte, kRecordHeaderBytes> header{};
  std::array<std::byte, kTagBytes> tag{};
  EXPECT_EQ(idle.SealDetached(payload, header, tag), Status::FailedPrecondition());
}

// Every single-bit change anywhere in a record — length, device, sequence, payload, tag — is
// rejected, and the payload is never handed out.
TEST_F(ConnectionAuthTest, FlippedBitAnywhereInRecordIsRejected) {
  ConnectionAuth sender;
  ConnectionAuth receiver;
  Connect(sender, receiver);
  const std::vector<std::byte> original =
      SealCopy(sender, Bytes("forty bytes of a frame, more or less..."));
  for (std::size_t bit = 0; bit < original.size() * 8; ++bit) {
    ConnectionAuth worker;
    ConnectionAuth server;
    Connect(worker, server);
    std::vector<std::byte> record =
        SealCopy(worker, Bytes("forty bytes of a frame, more or less..."));
    ASSERT_EQ(record, original);  // same nonces, same keys: same bytes
    record[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    const Result<std::span<const std::byte>> opened = server.Open(record);
    EXPECT_FALSE(opened.ok()) << "bit " << bit;
    EXPECT_TRUE(server.rejected()) << "bit " << bit;
    if (bit >= 8 * 8) {  // sequence, payload or tag: only the tag can tell
      EXPECT_EQ(server.last_reject(), RejectReason::kBadTag) << "bit " << bit;
    } else if (bit >= 4 * 8) {
      EXPECT_EQ(server.last_reject(), RejectReason::kWrongDevice) << "bit " << bit;
    }
  }
}

TEST_F(ConnectionAuthTest, FlippedBitInResponderHelloIsRejected) {
  for (std::size_t bit = 0; bit < kResponderHelloBytes * 8; ++bit) {
    ConnectionAuth worker;
    ConnectionAuth server;
    std::array<std::byte, kInitiatorHelloBytes> hello;
    std::array<std::byte, kResponderHelloBytes> reply;
    ASSERT_NO_FATAL_FAILURE(ExchangeHellos(worker, worker_keys_, server, hello, reply));
    reply[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_FALSE(worker.AcceptResponderHello(reply).ok()) << "bit " << bit;
    EXPECT_TRUE(worker.rejected());
  }
}

// An altered initiator nonce goes unnoticed by the responder (it cannot know), but the two sides
// then derive different keys: the initiator rejects the responder's confirmation, and the
// responder rejects the initiator's records.
TEST_F(ConnectionAuthTest, AlteredInitiatorNonceBreaksTheConnection) {
  ConnectionAuth worker;
  ConnectionAuth server;
  std::array<std::byte, kInitiatorHelloBytes> hello;
  ASSERT_NO_FATAL_FAILURE(StartHello(worker, worker_keys_, kDevice, server, hello));
  hello[kHelloPrefixBytes + 3] ^= std::byte{0x10};
  std::array<std::byte, kResponderHelloBytes> reply;
  ASSERT_TRUE(server.StartResponder(server_keys_, hello, TestNonce(2), reply).ok());
  EXPECT_EQ(worker.AcceptResponderHello(reply), Status::Unauthenticated());
  EXPECT_EQ(worker.last_reject(), RejectReason::kBadTag);
}

// A client without the device's key: it cannot confirm the server's hello, and records it seals
// with the key it has are rejected by the server.
TEST_F(ConnectionAuthTest, WrongKeyIsRejectedBothWays) {
  ConnectionAuth attacker;
  ConnectionAuth server;
  std::array<std::byte, kInitiatorHelloBytes> hello;
  std::array<std::byte, kResponderHelloBytes> reply;
  ASSERT_NO_FATAL_FAILURE(ExchangeHellos(attacker, attacker_keys_, server, hello, reply));
  EXPECT_EQ(attacker.AcceptResponderHello(reply), Status::Unauthenticated());
  EXPECT_EQ(attacker.last_reject(), RejectReason::kBadTag);

  // The attacker derives record keys from its wrong key and the real nonces (as it could by
  // ignoring the confirmation): an accomplice responder with the same wrong key and the
  // server's nonce gives it exactly that state.
  ConnectionAuth accomplice;
  ASSERT_TRUE(accomplice.Init(kTestMaxPayload).ok());
  std::array<std::byte, kResponderHelloBytes> forged_reply;
  ASSERT_TRUE(attacker.StartInitiator(attacker_keys_, kDevice, TestNonce(1), hello).ok());
  ASSERT_TRUE(accomplice.StartResponder(attacker_keys_, hello, TestNonce(2), forged_reply).ok());
  ASSERT_TRUE(attacker.AcceptResponderHello(forged_reply).ok());
  const std::vector<std::byte> forged = SealCopy(attacker, Bytes("join as device 7"));
  EXPECT_TRUE(Refuses(server, forged, Status::Unauthenticated(), RejectReason::kBadTag));
  EXPECT_EQ(server.stats().rejected[static_cast<std::size_t>(RejectReason::kBadTag)], 1u);
}

TEST_F(ConnectionAuthTest, UnknownDeviceIsRejected) {
  ConnectionAuth stranger;
  ConnectionAuth server;
  FixedKeyRing<1> stranger_keys;
  ASSERT_TRUE(stranger_keys.Add(42, TestKey(42)).ok());
  std::array<std::byte, kInitiatorHelloBytes> hello;
  std::array<std::byte, kResponderHelloBytes> reply;
  ASSERT_NO_FATAL_FAILURE(StartHello(stranger, stranger_keys, 42, server, hello));
  EXPECT_EQ(server.StartResponder(server_keys_, hello, TestNonce(2), reply),
            Status::Unauthenticated());
  EXPECT_EQ(server.last_reject(), RejectReason::kUnknownDevice);
  EXPECT_EQ(server.device(), 42u);  // reported in the rejection's log line
  // An initiator cannot start as a device whose key it lacks.
  EXPECT_EQ(stranger.StartInitiator(stranger_keys, kDevice, TestNonce(1), hello),
            Status::NotFound());
}

TEST_F(ConnectionAuthTest, MalformedHellosAreRejected) {
  ConnectionAuth worker;
  ASSERT_TRUE(worker.Init(kTestMaxPayload).ok());
  std::array<std::byte, kInitiatorHelloBytes> valid;
  ASSERT_TRUE(worker.StartInitiator(worker_keys_, kDevice, TestNonce(1), valid).ok());
  std::array<std::byte, kResponderHelloBytes> reply;
  const auto expect_malformed = [&](std::span<const std::byte> hello, const char* what) {
    ConnectionAuth server;
    ASSERT_TRUE(server.Init(kTestMaxPayload).ok());
    EXPECT_EQ(server.StartResponder(server_keys_, hello, TestNonce(2), reply), Status::DataLoss())
        << what;
    EXPECT_EQ(server.last_reject(), RejectReason::kMalformed) << what;
  };
  expect_malformed(std::span(valid).first(kInitiatorHelloBytes - 1), "short");
  std::vector<std::byte> longer(valid.begin(), valid.end());
  longer.push_back(std::byte{0});
  expect_malformed(longer, "long");
  for (const std::size_t offset : {0u, 3u, 4u, 5u, 6u, 7u, 12u, 15u}) {
    auto altered = valid;
    altered[offset] ^= std::byte{1};
    expect_malformed(altered, "altered prefix byte");
  }
  // A responder hello sent where an initiator hello belongs (and vice versa) is malformed.
  ConnectionAuth server;
  ASSERT_TRUE(server.Init(kTestMaxPayload).ok());
  ASSERT_TRUE(server.StartResponder(server_keys_, valid, TestNonce(2), reply).ok());
  expect_malformed(std::span(reply).first(kInitiatorHelloBytes), "responder kind");
  EXPECT_EQ(worker.AcceptResponderHello(valid), Status::DataLoss());
}

TEST_F(ConnectionAuthTest, ReplayWithinConnectionIsRejected) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server);
  const std::vector<std::byte> first = SealCopy(worker, Bytes("round 1 update"));
  const std::vector<std::byte> second = SealCopy(worker, Bytes("round 2 update"));
  ASSERT_TRUE(server.Open(first).ok());
  EXPECT_TRUE(Refuses(server, first, Status::Unauthenticated(), RejectReason::kReplayed));
  EXPECT_EQ(server.Open(second).status(), Status::FailedPrecondition());  // connection is dead
  std::vector<std::byte> storage(64);
  EXPECT_EQ(server.Seal(Bytes("x"), storage).status(), Status::FailedPrecondition());
}

TEST_F(ConnectionAuthTest, ReorderedOrDroppedRecordIsRejected) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server);
  SealCopy(worker, Bytes("one, lost on the way"));
  const std::vector<std::byte> second = SealCopy(worker, Bytes("two"));
  EXPECT_TRUE(Refuses(server, second, Status::Unauthenticated(), RejectReason::kReplayed));
}

// Records captured on one connection fail on another: the responder's fresh nonce changes the
// keys even when the attacker replays the initiator's hello verbatim.
TEST_F(ConnectionAuthTest, ReplayAcrossConnectionsIsRejected) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server, /*seed=*/1);
  std::array<std::byte, kInitiatorHelloBytes> captured_hello;
  ASSERT_TRUE(worker.StartInitiator(worker_keys_, kDevice, TestNonce(1), captured_hello).ok());
  std::array<std::byte, kResponderHelloBytes> reply;
  ASSERT_TRUE(server.StartResponder(server_keys_, captured_hello, TestNonce(50), reply).ok());
  ASSERT_TRUE(worker.AcceptResponderHello(reply).ok());
  const std::vector<std::byte> captured = SealCopy(worker, Bytes("join"));
  ASSERT_TRUE(server.Open(captured).ok());

  // The attacker opens a new connection and replays the hello and the record.
  ConnectionAuth replay_target;
  ASSERT_TRUE(replay_target.Init(kTestMaxPayload).ok());
  ASSERT_TRUE(
      replay_target.StartResponder(server_keys_, captured_hello, TestNonce(51), reply).ok());
  EXPECT_TRUE(Refuses(replay_target, captured, Status::Unauthenticated(), RejectReason::kBadTag));

  // And a record of an unrelated earlier connection of the same device fails the same way.
  ConnectionAuth other_worker;
  ConnectionAuth other_server;
  Connect(other_worker, other_server, /*seed=*/2);
  EXPECT_TRUE(Refuses(other_server, captured, Status::Unauthenticated(), RejectReason::kBadTag));
}

TEST_F(ConnectionAuthTest, ReflectedRecordIsRejected) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server);
  const std::vector<std::byte> own = SealCopy(worker, Bytes("sent to the server"));
  EXPECT_TRUE(Refuses(worker, own, Status::Unauthenticated(), RejectReason::kBadTag));
}

TEST_F(ConnectionAuthTest, TruncatedAndOversizedRecordsAreRejected) {
  const std::vector<std::byte> payload = Bytes("a frame of some length");
  {
    ConnectionAuth worker;
    ConnectionAuth server;
    Connect(worker, server);
    const std::vector<std::byte> record = SealCopy(worker, payload);
    // A partial header is not a rejection from ReadRecordLength: the reader reads on.
    EXPECT_EQ(server.ReadRecordLength(std::span(record).first(kRecordHeaderBytes - 1)).status(),
              Status::DataLoss());
    EXPECT_TRUE(server.established());
    EXPECT_TRUE(Refuses(server, std::span(record).first(record.size() - 1), Status::DataLoss(),
                        RejectReason::kTruncated));
  }
  {
    ConnectionAuth worker;
    ConnectionAuth server;
    Connect(worker, server);
    std::vector<std::byte> record = SealCopy(worker, payload);
    record.push_back(std::byte{0});
    EXPECT_TRUE(Refuses(server, record, Status::DataLoss(), RejectReason::kMalformed));
  }
  for (const std::uint32_t announced : {std::uint32_t{kTestMaxPayload + 1}, 0xFFFFFFFFu}) {
    ConnectionAuth worker;
    ConnectionAuth server;
    Connect(worker, server);
    std::vector<std::byte> record = SealCopy(worker, payload);
    for (int i = 0; i < 4; ++i)
      record[static_cast<std::size_t>(i)] = static_cast<std::byte>(announced >> (8 * i));
    EXPECT_EQ(server.ReadRecordLength(record).status(), Status::OutOfRange());
    EXPECT_EQ(server.last_reject(), RejectReason::kOversized);
    EXPECT_EQ(server.stats().rejected[static_cast<std::size_t>(RejectReason::kOversized)], 1u);
  }
}

// Sequence numbers run to 2^64 - 1 and never wrap: the sender refuses to seal past the end, and
// a receiver that has accepted the last number accepts nothing more, not even a validly tagged
// record numbered 0 again.
TEST_F(ConnectionAuthTest, SequenceNumbersNeverWrap) {
  constexpr std::uint64_t kLast = std::numeric_limits<std::uint64_t>::max();
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server);
  ConnectionAuthTestAccess::SetSendSequence(worker, kLast - 1);
  ConnectionAuthTestAccess::SetReceiveSequence(server, kLast - 1);
  EXPECT_TRUE(server.Open(SealCopy(worker, Bytes("next to last"))).ok());
  EXPECT_TRUE(server.Open(SealCopy(worker, Bytes("last"))).ok());
  std::vector<std::byte> storage(128);
  EXPECT_EQ(worker.Seal(Bytes("one too many"), storage).status(), Status::ResourceExhausted());

  ConnectionAuthTestAccess::SetSendSequence(worker, 0);  // a sender whose counter wrapped
  const std::vector<std::byte> wrapped = SealCopy(worker, Bytes("wrapped"));
  EXPECT_TRUE(
      Refuses(server, wrapped, Status::Unauthenticated(), RejectReason::kSequenceExhausted));
}

TEST_F(ConnectionAuthTest, ObjectsAreReusableAcrossConnections) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server, 1);
  const std::vector<std::byte> first = SealCopy(worker, Bytes("first connection"));
  ASSERT_TRUE(server.Open(first).ok());
  ASSERT_FALSE(server.Open(first).ok());  // replayed: the server's connection is rejected
  ConnectionAuth fresh_server;
  Connect(worker, fresh_server, 3);
  EXPECT_TRUE(fresh_server.Open(SealCopy(worker, Bytes("second connection"))).ok());
  Connect(worker, server, 4);  // a rejected object starts anew with the next connection
  EXPECT_TRUE(server.established());
  EXPECT_EQ(server.last_reject(), RejectReason::kNone);
  EXPECT_TRUE(server.Open(SealCopy(worker, Bytes("third connection"))).ok());
}

TEST_F(ConnectionAuthTest, UsageErrors) {
  ConnectionAuth auth;
  std::array<std::byte, kInitiatorHelloBytes> hello;
  EXPECT_EQ(auth.StartInitiator(worker_keys_, kDevice, TestNonce(1), hello),
            Status::FailedPrecondition());
  EXPECT_EQ(auth.Init(0), Status::InvalidArgument());
  EXPECT_EQ(auth.Init(kMaxRecordPayloadBytes + 1), Status::InvalidArgument());
  ASSERT_TRUE(auth.Init(kTestMaxPayload).ok());
  EXPECT_EQ(auth.Init(kTestMaxPayload), Status::FailedPrecondition());
  std::vector<std::byte> storage(128);
  EXPECT_EQ(auth.Seal(Bytes("x"), storage).status(), Status::FailedPrecondition());
  EXPECT_EQ(auth.Open(storage).status(), Status::FailedPrecondition());
  EXPECT_EQ(auth.AcceptResponderHello(storage), Status::FailedPrecondition());
}

// The key schedule and record layout documented in connection_auth.h and auth_format.h, checked
// against bytes computed independently from that text (Python's hmac module), so another
// implementation can interoperate from the documentation alone.
TEST_F(ConnectionAuthTest, RecordBytesMatchTheDocumentedSchedule) {
  ConnectionAuth worker;
  ConnectionAuth server;
  Connect(worker, server, /*seed=*/1);
  const std::vector<std::byte> record = SealCopy(worker, Bytes("edgesgd"));
  EXPECT_EQ(testing::Hex(record),
            "07000000070000000000000000000000"  // length 7, device 7, sequence 0
            "65646765736764"                    // "edgesgd"
            "cc986fbcc6adbce32b624ddb60c193c1b8d73dde8f375442cc1fc40eece0ca13");  // tag
}

}  // namespace
}  // namespace edgesgd::auth
