#include "edgesgd/auth/connection_auth.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace edgesgd::auth {
namespace {

constexpr char kKeyLabel[] = "edgesgd-auth-v1";  // 15 bytes without the terminator
constexpr std::uint8_t kPurposeInitiatorToResponder = 1;
constexpr std::uint8_t kPurposeResponderToInitiator = 2;
constexpr std::uint8_t kPurposeConfirmation = 3;

void StoreU32(std::byte* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}
void StoreU64(std::byte* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}
std::uint32_t LoadU32(const std::byte* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value |= std::uint32_t{std::to_integer<std::uint8_t>(in[i])} << (8 * i);
  return value;
}
std::uint64_t LoadU64(const std::byte* in) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i)
    value |= std::uint64_t{std::to_integer<std::uint8_t>(in[i])} << (8 * i);
  return value;
}

// Writes the 16-byte hello prefix shared by both hellos.
void WriteHelloPrefix(std::span<std::byte> hello, std::uint8_t kind, std::uint32_t device) {
  std::fill(hello.begin(), hello.begin() + kHelloPrefixBytes, std::byte{0});
  for (std::size_t i = 0; i < kHelloMagic.size(); ++i) hello[i] = std::byte{kHelloMagic[i]};
  hello[4] = std::byte{kAuthVersion};
  hello[5] = std::byte{kind};
  StoreU32(hello.data() + 8, device);
}

// Checks a hello's size and prefix; returns its device id or kNoDevice when malformed.
std::uint32_t ParseHelloPrefix(std::span<const std::byte> hello, std::size_t expected_bytes,
                               std::uint8_t kind) {
  if (hello.size() != expected_bytes) return kNoDevice;
  for (std::size_t i = 0; i < kHelloMagic.size(); ++i) {
    if (hello[i] != std::byte{kHelloMagic[i]}) return kNoDevice;
  }
  if (hello[4] != std::byte{kAuthVersion} || hello[5] != std::byte{kind}) return kNoDevice;
  const bool padding_zero =
      hello[6] == std::byte{0} && hello[7] == std::byte{0} && LoadU32(hello.data() + 12) == 0;
  return padding_zero ? LoadU32(hello.data() + 8) : kNoDevice;
}

std::span<const std::byte> AsBytes(const char* text, std::size_t size) {
  return std::as_bytes(std::span<const char>(text, size));
}

}  // namespace

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kMalformed:
      return "malformed";
    case RejectReason::kUnknownDevice:
      return "unknown device";
    case RejectReason::kWrongDevice:
      return "wrong device";
    case RejectReason::kBadTag:
      return "bad tag";
    case RejectReason::kReplayed:
      return "replayed or out of sequence";
    case RejectReason::kOversized:
      return "oversized";
    case RejectReason::kTruncated:
      return "truncated";
    case RejectReason::kSequenceExhausted:
      return "sequence exhausted";
  }
  return "unknown";
}

std::uint64_t AuthStats::total_rejected() const {
  std::uint64_t total = 0;
  for (const std::uint64_t count : rejected) total += count;
  return total;
}

void AuthStats::Add(const AuthStats& other) {
  records_sealed += other.records_sealed;
  records_opened += other.records_opened;
  for (std::size_t i = 0; i < rejected.size(); ++i) rejected[i] += other.rejected[i];
}

ConnectionAuth::~ConnectionAuth() { ResetConnection(); }

Status ConnectionAuth::Init(std::size_t max_payload_bytes) {
  if (state_ != State::kUninitialized) return Status::FailedPrecondition("Init was already called");
  if (max_payload_bytes == 0 || max_payload_bytes > kMaxRecordPayloadBytes) {
    return Status::InvalidArgument("max_payload_bytes must be in 1..kMaxRecordPayloadBytes");
  }
  EDGESGD_TRY(send_mac_.Init());
  EDGESGD_TRY(receive_mac_.Init());
  max_payload_bytes_ = max_payload_bytes;
  state_ = State::kIdle;
  return Status::Ok();
}

void ConnectionAuth::ResetConnection() {
  Zeroize(pending_device_key_);
  Zeroize(initiator_nonce_);
  Zeroize(responder_nonce_);
  device_ = kNoDevice;
  send_sequence_ = 0;
  receive_sequence_ = 0;
  send_exhausted_ = false;
  receive_exhausted_ = false;
  last_reject_ = RejectReason::kNone;
  if (state_ != State::kUninitialized) state_ = State::kIdle;
}

Status ConnectionAuth::Reject(RejectReason reason, Status status) {
  Zeroize(pending_device_key_);
  state_ = State::kRejected;
  last_reject_ = reason;
  ++stats_.rejected[static_cast<std::size_t>(reason)];
  return status;
}

Status ConnectionAuth::DeriveKeys(std::span<const std::byte, kKeyBytes> device_key,
                                  std::span<std::byte, kTagBytes> confirmation) {
  std::byte device_bytes[4];
  StoreU32(device_bytes, device_);
  const auto derive = [&](std::uint8_t purpose, std::span<std::byte, kTagBytes> out) {
    const std::byte purpose_byte{purpose};
    return send_mac_.Mac(
        {AsBytes(kKeyLabel, sizeof(kKeyLabel) - 1), std::span<const std::byte>(&purpose_byte, 1),
         device_bytes, initiator_nonce_, responder_nonce_},
        out);
  };
  std::array<std::byte, kTagBytes> initiator_to_responder;
  std::array<std::byte, kTagBytes> responder_to_initiator;
  Status status = send_mac_.SetKey(device_key);
  if (status.ok()) status = derive(kPurposeInitiatorToResponder, initiator_to_responder);
  if (status.ok()) status = derive(kPurposeResponderToInitiator, responder_to_initiator);
  if (status.ok()) status = derive(kPurposeConfirmation, confirmation);
  const bool initiator = role_ == AuthRole::kInitiator;
  if (status.ok()) {
    status = send_mac_.SetKey(initiator ? initiator_to_responder : responder_to_initiator);
  }
  if (status.ok()) {
    status = receive_mac_.SetKey(initiator ? responder_to_initiator : initiator_to_responder);
  }
  Zeroize(initiator_to_responder);
  Zeroize(responder_to_initiator);
  return status;
}

Status ConnectionAuth::StartInitiator(const KeyRing& keys, std::uint32_t device,
                                      std::span<const std::byte, kNonceBytes> nonce,
                                      std::span<std::byte, kInitiatorHelloBytes> hello_out) {
  if (state_ == State::kUninitialized) {
    return Status::FailedPrecondition("Init has not been called");
  }
  ResetConnection();
  const DeviceKey* key = keys.Find(device);
  if (key == nullptr) return Status::NotFound("the key ring has no key for the device");
  role_ = AuthRole::kInitiator;
  device_ = device;
  std::copy(nonce.begin(), nonce.end(), initiator_nonce_.begin());
  std::copy(key->key.begin(), key->key.end(), pending_device_key_.begin());
  WriteHelloPrefix(hello_out, kInitiatorHelloKind, device);
  std::copy(nonce.begin(), nonce.end(), hello_out.begin() + kHelloPrefixBytes);
  state_ = State::kAwaitingResponderHello;
  return Status::Ok();
}

Status ConnectionAuth::AcceptResponderHello(std::span<const std::byte> hello) {
  if (state_ != State::kAwaitingResponderHello) {
    return Status::FailedPrecondition("no responder hello is awaited");
  }
  const std::uint32_t device = ParseHelloPrefix(hello, kResponderHelloBytes, kResponderHelloKind);
  if (device == kNoDevice) {
    return Reject(
        RejectReason::kMalformed,
        Status::DataLoss("the responder hello's size, magic, version, kind or padding is wrong"));
  }
  if (device != device_) {
    return Reject(RejectReason::kWrongDevice,
                  Status::Unauthenticated("the responder hello names another device"));
  }
  const auto nonce = hello.subspan(kHelloPrefixBytes, kNonceBytes);
  std::copy(nonce.begin(), nonce.end(), responder_nonce_.begin());
  std::array<std::byte, kTagBytes> expected_confirmation;
  const Status derived = DeriveKeys(pending_device_key_, expected_confirmation);
  Zeroize(pending_device_key_);
  if (!derived.ok()) {
    state_ = State::kRejected;
    return derived;
  }
  const bool confirmed =
      TagsEqual(expected_confirmation, hello.subspan(kHelloPrefixBytes + kNonceBytes, kTagBytes));
  if (!confirmed) {
    return Reject(RejectReason::kBadTag,
                  Status::Unauthenticated("the responder hello's confirmation tag does not match"));
  }
  state_ = State::kEstablished;
  return Status::Ok();
}

Status ConnectionAuth::StartResponder(const KeyRing& keys,
                                      std::span<const std::byte> initiator_hello,
                                      std::span<const std::byte, kNonceBytes> nonce,
                                      std::span<std::byte, kResponderHelloBytes> hello_out) {
  if (state_ == State::kUninitialized) {
    return Status::FailedPrecondition("Init has not been called");
  }
  ResetConnection();
  role_ = AuthRole::kResponder;
  const std::uint32_t device =
      ParseHelloPrefix(initiator_hello, kInitiatorHelloBytes, kInitiatorHelloKind);
  if (device == kNoDevice) {
    return Reject(
        RejectReason::kMalformed,
        Status::DataLoss("the initiator hello's size, magic, version, kind or padding is wrong"));
  }
  device_ = device;  // named in rejection reports even when it has no key
  const DeviceKey* key = keys.Find(device);
  if (key == nullptr) {
    return Reject(RejectReason::kUnknownDevice,
                  Status::Unauthenticated("the initiator hello names a device without a key"));
  }
  const auto peer_nonce = initiator_hello.subspan(kHelloPrefixBytes, kNonceBytes);
  std::copy(peer_nonce.begin(), peer_nonce.end(), initiator_nonce_.begin());
  std::copy(nonce.begin(), nonce.end(), responder_nonce_.begin());
  WriteHelloPrefix(hello_out, kResponderHelloKind, device);
  std::copy(nonce.begin(), nonce.end(), hello_out.begin() + kHelloPrefixBytes);
  const Status derived =
      DeriveKeys(key->key, hello_out.subspan<kHelloPrefixBytes + kNonceBytes, kTagBytes>());
  if (!derived.ok()) {
    state_ = State::kRejected;
    return derived;
  }
  state_ = State::kEstablished;
  return Status::Ok();
}

Status ConnectionAuth::CheckCanSeal(std::size_t payload_bytes) const {
  if (state_ != State::kEstablished) {
    return Status::FailedPrecondition("the connection is not established");
  }
  // The connection's limit is on what it receives: what it sends is the peer's to judge.
  if (payload_bytes > kMaxRecordPayloadBytes) {
    return Status::OutOfRange("the payload exceeds kMaxRecordPayloadBytes");
  }
  if (send_exhausted_) return Status::ResourceExhausted("the send sequence is used up");
  return Status::Ok();
}

Result<std::span<const std::byte>> ConnectionAuth::Seal(std::span<const std::byte> payload,
                                                        std::span<std::byte> record_storage) {
  EDGESGD_TRY(CheckCanSeal(payload.size()));
  const std::size_t record_bytes = RecordBytes(payload.size());
  if (record_storage.size() < record_bytes) {
    return Status::ResourceExhausted("the record storage is too small");
  }
  const std::span<std::byte> record = record_storage.first(record_bytes);
  const std::span<std::byte> payload_out = record.subspan(kRecordHeaderBytes, payload.size());
  // memmove: the payload may overlap the storage (a frame built at a nearby offset).
  if (payload.data() != payload_out.data() && !payload.empty()) {
    std::memmove(payload_out.data(), payload.data(), payload.size());
  }
  EDGESGD_TRY(SealDetached(payload_out, record.first<kRecordHeaderBytes>(),
                           record.subspan(kRecordHeaderBytes + payload.size()).first<kTagBytes>()));
  return std::span<const std::byte>(record);
}

Status ConnectionAuth::SealDetached(std::span<const std::byte> payload,
                                    std::span<std::byte, kRecordHeaderBytes> header,
                                    std::span<std::byte, kTagBytes> tag) {
  EDGESGD_TRY(CheckCanSeal(payload.size()));
  StoreU32(header.data(), static_cast<std::uint32_t>(payload.size()));
  StoreU32(header.data() + 4, device_);
  StoreU64(header.data() + 8, send_sequence_);
  EDGESGD_TRY(send_mac_.Mac({std::span<const std::byte>(header), payload}, tag));
  if (send_sequence_ == std::numeric_limits<std::uint64_t>::max()) {
    send_exhausted_ = true;
  } else {
    ++send_sequence_;
  }
  ++stats_.records_sealed;
  return Status::Ok();
}

Result<std::size_t> ConnectionAuth::ReadRecordLength(std::span<const std::byte> header) {
  if (state_ != State::kEstablished) {
    return Status::FailedPrecondition("the connection is not established");
  }
  if (header.size() < kRecordHeaderBytes) {
    return Status::DataLoss("fewer bytes than a record header");
  }
  const std::size_t payload_bytes = LoadU32(header.data());
  if (payload_bytes > max_payload_bytes_) {
    return Reject(RejectReason::kOversized,
                  Status::OutOfRange("the record is longer than the connection's limit"));
  }
  if (LoadU32(header.data() + 4) != device_) {
    return Reject(RejectReason::kWrongDevice,
                  Status::Unauthenticated("the record names another device than the connection's"));
  }
  return RecordBytes(payload_bytes);
}

Result<std::span<const std::byte>> ConnectionAuth::Open(std::span<const std::byte> record) {
  if (state_ != State::kEstablished) {
    return Status::FailedPrecondition("the connection is not established");
  }
  if (record.size() < kRecordHeaderBytes) {
    return Reject(RejectReason::kTruncated,
                  Status::DataLoss("the record is shorter than a record header"));
  }
  EDGESGD_TRY_ASSIGN(const std::size_t record_bytes, ReadRecordLength(record));
  if (record.size() < record_bytes) {
    return Reject(RejectReason::kTruncated,
                  Status::DataLoss("the record is shorter than its header announces"));
  }
  if (record.size() > record_bytes) {
    return Reject(RejectReason::kMalformed,
                  Status::DataLoss("the record is longer than its header announces"));
  }
  const std::size_t authenticated_bytes = record_bytes - kTagBytes;
  std::array<std::byte, kTagBytes> expected_tag;
  if (const Status status = receive_mac_.Mac({record.first(authenticated_bytes)}, expected_tag);
      !status.ok()) {
    state_ = State::kRejected;
    return status;
  }
  if (!TagsEqual(expected_tag, record.subspan(authenticated_bytes))) {
    return Reject(RejectReason::kBadTag,
                  Status::Unauthenticated("the record's authentication tag does not match"));
  }
  // Only now, with the header proven authentic, does its sequence number mean anything.
  if (receive_exhausted_) {
    return Reject(RejectReason::kSequenceExhausted,
                  Status::Unauthenticated("a record came after sequence number 2^64 - 1"));
  }
  if (LoadU64(record.data() + 8) != receive_sequence_) {
    return Reject(RejectReason::kReplayed,
                  Status::Unauthenticated("the record is replayed or out of sequence"));
  }
  if (receive_sequence_ == std::numeric_limits<std::uint64_t>::max()) {
    receive_exhausted_ = true;
  } else {
    ++receive_sequence_;
  }
  ++stats_.records_opened;
  return record.subspan(kRecordHeaderBytes, authenticated_bytes - kRecordHeaderBytes);
}

}  // namespace edgesgd::auth
