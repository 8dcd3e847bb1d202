// Fuzz target: the authenticated record layer (transport/auth, ConnectionAuth), both ends of
// one connection, driven by a script (fuzz_scripts.h, "Auth record layer script"): the hellos,
// optionally tampered with, then records sealed by either side and delivered whole, tampered
// with (bit flips, overwritten bytes, truncation, extension), replayed, reordered, reflected to
// their sender, or made up. Invariants:
//   - handshake: the initiator accepts the responder hello if and only if both hellos arrived
//     exactly as sent (and the device has a key);
//   - authenticity: Open(bytes) succeeds if and only if the connection is alive, the handshake
//     was genuine and `bytes` is exactly the next record the other side sealed; the payload it
//     returns is then the one sealed, and lies inside `bytes`;
//   - a rejected connection stays dead: every later Open and Seal fails;
//   - ReadRecordLength of a record the other side sealed gives the record's size.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/key_ring.h"
#include "fuzz/fuzz_scripts.h"
#include "fuzz/fuzz_util.h"

namespace edgesgd::fuzz {
namespace {

using auth::ConnectionAuth;

using Bytes = std::vector<std::byte>;

std::array<std::byte, auth::kKeyBytes> KeyOf(std::uint32_t device) {
  std::array<std::byte, auth::kKeyBytes> key;
  for (std::size_t i = 0; i < key.size(); ++i) {
    key[i] = static_cast<std::byte>(device * 31 + i * 7 + 1);
  }
  return key;
}

// One direction of the connection: what the sender sealed, and how far the receiver got.
struct Direction {
  std::vector<Bytes> records;
  std::vector<Bytes> payloads;
  std::size_t opened = 0;  // records the receiver accepted (always a prefix of `records`)
};

// Bytes in exact-size heap storage (ASan then flags any read past their end).
Bytes Tampered(FuzzInput& in, const Bytes& original) {
  Bytes bytes = original;
  const std::uint8_t count = in.U8() % 5;
  for (std::uint8_t i = 0; i < count; ++i) {
    const auto kind = static_cast<AuthTamper>(in.U8() % kAuthTamperCount);
    const std::uint16_t position = in.U16();
    const std::uint8_t value = in.U8();
    switch (kind) {
      case AuthTamper::kFlipBit:
        if (!bytes.empty())
          bytes[position % bytes.size()] ^= static_cast<std::byte>(1u << (value % 8));
        break;
      case AuthTamper::kSetByte:
        if (!bytes.empty()) bytes[position % bytes.size()] = static_cast<std::byte>(value);
        break;
      case AuthTamper::kTruncate:
        bytes.resize(position % (bytes.size() + 1));
        break;
      case AuthTamper::kAppend:
        bytes.push_back(static_cast<std::byte>(value));
        break;
    }
  }
  return bytes;
}

class AuthHarness {
 public:
  AuthHarness() {
    EDGESGD_FUZZ_CHECK(keys_.Add(1, KeyOf(1)).ok() && keys_.Add(2, KeyOf(2)).ok(),
                       "the harness's keys are accepted");
    EDGESGD_FUZZ_CHECK(
        initiator_.Init(kAuthMaxPayload).ok() && responder_.Init(kAuthMaxPayload).ok(),
        "the harness's connections initialize");
  }

  // The hellos. False when no connection could be established (the script ends).
  bool Handshake(FuzzInput& in) {
    const std::uint32_t device = in.U8() % 4;
    std::array<std::byte, auth::kNonceBytes> initiator_nonce{};
    std::array<std::byte, auth::kNonceBytes> responder_nonce{};
    const std::span<const std::byte> ni = in.Bytes(auth::kNonceBytes);
    std::copy(ni.begin(), ni.end(), initiator_nonce.begin());
    const std::span<const std::byte> nr = in.Bytes(auth::kNonceBytes);
    std::copy(nr.begin(), nr.end(), responder_nonce.begin());
    const std::uint8_t tamper = in.U8();

    std::array<std::byte, auth::kInitiatorHelloBytes> hello{};
    const Status started = initiator_.StartInitiator(keys_, device, initiator_nonce, hello);
    const bool has_key = device == 1 || device == 2;
    EDGESGD_FUZZ_CHECK(started.ok() == has_key, "an initiator starts iff its device has a key");
    if (!has_key) return false;

    Bytes delivered_hello(hello.begin(), hello.end());
    if ((tamper & 1) != 0) {
      const std::uint8_t position = in.U8();
      delivered_hello[position % delivered_hello.size()] ^= static_cast<std::byte>(in.U8());
    }
    const bool hello_genuine =
        std::equal(delivered_hello.begin(), delivered_hello.end(), hello.begin(), hello.end());
    std::array<std::byte, auth::kResponderHelloBytes> reply{};
    const Status responded =
        responder_.StartResponder(keys_, delivered_hello, responder_nonce, reply);
    if (hello_genuine) {
      EDGESGD_FUZZ_CHECK(responded.ok(), "a responder accepts a genuine initiator hello");
    }
    if (responded.ok()) {
      EDGESGD_FUZZ_CHECK(keys_.Find(responder_.device()) != nullptr,
                         "a responder only accepts a device with a key");
    }
    if (!responded.ok()) return false;

    Bytes delivered_reply(reply.begin(), reply.end());
    if ((tamper & 2) != 0) {
      const std::uint8_t position = in.U8();
      delivered_reply[position % delivered_reply.size()] ^= static_cast<std::byte>(in.U8());
    }
    const bool reply_genuine =
        std::equal(delivered_reply.begin(), delivered_reply.end(), reply.begin(), reply.end());
    const Status accepted = initiator_.AcceptResponderHello(delivered_reply);
    genuine_ = hello_genuine && reply_genuine;
    EDGESGD_FUZZ_CHECK(accepted.ok() == genuine_,
                       "the initiator accepts the responder hello iff both hellos are genuine");
    EDGESGD_FUZZ_CHECK(accepted.ok() == initiator_.established(),
                       "an initiator is established iff it accepted the responder hello");
    // The responder is established either way (its peer is proved by its first record).
    return true;
  }

  void Event(FuzzInput& in) {
    const auto op = static_cast<AuthOp>(in.U8() % kAuthOpCount);
    switch (op) {
      case AuthOp::kSealInitiator:
        Seal(in, initiator_, to_responder_);
        break;
      case AuthOp::kSealResponder:
        Seal(in, responder_, to_initiator_);
        break;
      case AuthOp::kDeliverToResponder:
        Deliver(in, to_responder_, responder_);
        break;
      case AuthOp::kDeliverToInitiator:
        Deliver(in, to_initiator_, initiator_);
        break;
      case AuthOp::kForgeToResponder: {
        const std::span<const std::byte> bytes = in.Bytes(in.U16());
        Open(responder_, to_responder_, Bytes(bytes.begin(), bytes.end()));
        break;
      }
      case AuthOp::kForgeToInitiator: {
        const std::span<const std::byte> bytes = in.Bytes(in.U16());
        Open(initiator_, to_initiator_, Bytes(bytes.begin(), bytes.end()));
        break;
      }
      case AuthOp::kReflect: {
        const std::uint8_t which = in.U8();
        if (to_initiator_.records.empty()) break;
        const Bytes& record = to_initiator_.records[which % to_initiator_.records.size()];
        // The responder's own record, back to it: never from the initiator.
        Open(responder_, to_responder_, record);
        break;
      }
      case AuthOp::kLength: {
        const std::uint8_t which = in.U8();
        if (to_responder_.records.empty() || !responder_.established()) break;
        const Bytes& record = to_responder_.records[which % to_responder_.records.size()];
        const Result<std::size_t> length = responder_.ReadRecordLength(record);
        EDGESGD_FUZZ_CHECK(length.ok() && length.value() == record.size(),
                           "ReadRecordLength of a sealed record gives its size");
        break;
      }
    }
  }

 private:
  void Seal(FuzzInput& in, ConnectionAuth& side, Direction& direction) {
    const std::size_t length = in.U16() % (kAuthMaxPayload + 1);
    const std::span<const std::byte> payload = in.Bytes(length);
    const bool alive = side.established();
    Bytes storage(auth::RecordBytes(payload.size()));
    const Result<std::span<const std::byte>> record = side.Seal(payload, storage);
    EDGESGD_FUZZ_CHECK(record.ok() == alive, "an established side seals, any other does not");
    if (!record.ok()) return;
    EDGESGD_FUZZ_CHECK(record.value().size() == auth::RecordBytes(payload.size()),
                       "a record is RecordBytes(payload) long");
    direction.records.emplace_back(record.value().begin(), record.value().end());
    direction.payloads.emplace_back(payload.begin(), payload.end());
  }

  void Deliver(FuzzInput& in, Direction& direction, ConnectionAuth& receiver) {
    const std::uint8_t which = in.U8();
    if (direction.records.empty()) return;
    Open(receiver, direction, Tampered(in, direction.records[which % direction.records.size()]));
  }

  // Opens `bytes` at `receiver`, which expects the records of `direction`, and checks the
  // verdict against what was sealed.
  void Open(ConnectionAuth& receiver, Direction& direction, const Bytes& bytes) {
    const bool alive = receiver.established();
    const bool next_exists = direction.opened < direction.records.size();
    const bool is_next = next_exists && bytes == direction.records[direction.opened];
    const bool expected = alive && genuine_ && is_next;
    const Result<std::span<const std::byte>> payload = receiver.Open(bytes);
    if (payload.ok()) {
      EDGESGD_FUZZ_CHECK(expected, "an accepted record is exactly the next one the peer sealed");
      const Bytes& sealed = direction.payloads[direction.opened];
      EDGESGD_FUZZ_CHECK(payload.value().size() == sealed.size() &&
                             std::equal(sealed.begin(), sealed.end(), payload.value().begin()),
                         "an accepted record's payload is the one sealed");
      EDGESGD_FUZZ_CHECK(sealed.empty() || (payload.value().data() >= bytes.data() &&
                                            payload.value().data() + payload.value().size() <=
                                                bytes.data() + bytes.size()),
                         "the payload is a view into the record");
      ++direction.opened;
    } else {
      EDGESGD_FUZZ_CHECK(!expected, "the next genuine record is accepted");
      EDGESGD_FUZZ_CHECK(!receiver.established(), "a rejection ends the connection");
      // Everything afterwards fails.
      const std::array<std::byte, 1> empty_payload{};
      std::array<std::byte, auth::kRecordOverheadBytes + 1> storage{};
      EDGESGD_FUZZ_CHECK(!receiver.Seal(empty_payload, storage).ok(),
                         "a dead connection seals nothing");
      if (next_exists) {
        EDGESGD_FUZZ_CHECK(!receiver.Open(direction.records[direction.opened]).ok(),
                           "a dead connection opens nothing");
      }
    }
  }

  auth::FixedKeyRing<4> keys_;
  ConnectionAuth initiator_;
  ConnectionAuth responder_;
  bool genuine_ = false;
  Direction to_responder_;  // sealed by the initiator
  Direction to_initiator_;  // sealed by the responder
};

void Run(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  AuthHarness harness;
  if (harness.Handshake(in)) RunScript(in, harness);
}

}  // namespace
}  // namespace edgesgd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  edgesgd::fuzz::Run(data, size);
  return 0;
}
