#pragma once

// Per-connection frame authentication, sans-I/O: hellos and records in and out as bytes, the
// caller owns the socket, the buffers and the random source.
//
// Threat model. An attacker on the network can read, drop, delay, reorder, replay, alter and
// inject bytes, and can open connections of its own. It does not know the pre-shared key of any
// device it has not compromised. What this layer guarantees, per connection:
//   - Origin and integrity: every accepted record was sealed, byte for byte (header and payload),
//     by a holder of the key of the device the connection is for.
//   - No replay, reordering or deletion inside a connection: each direction's records carry
//     sequence numbers 0, 1, 2, ...; anything but the next one is rejected.
//   - No replay across connections or directions: record keys are derived from the device key,
//     both sides' fresh nonces and the direction, so a record captured from another connection,
//     or sent back to its sender, fails its tag.
//   - Mutual key confirmation: the responder's hello carries a tag only a key holder can make,
//     and the initiator's first record proves the initiator.
// What it does not do:
//   - Confidentiality: payloads travel in clear (gradients and models are not secret in the
//     deployments edgesgd targets; the optional TLS mode is for those that need it).
//   - Denial of service: an attacker can always cut a connection; the driver closes a
//     connection on the first rejected record and other connections carry on.
//   - Compromised devices: a device's key authenticates anything its holder sends, and a node
//     holding other devices' keys (a server, a gossip peer) can impersonate them. Rounds and
//     membership are checked by the protocol sessions above this layer.
//   - Key compromise recovery: a leaked device key lets its holder forge that device's records
//     on any later connection until the key file is changed on both ends.
//
// Key schedule, with K the pre-shared key of the device d the initiator names in its hello,
// Ni/Nr the initiator's/responder's nonces and label = "edgesgd-auth-v1" (15 bytes):
//   key(purpose) = HMAC-SHA256(K, label || purpose (1 byte) || d (u32 LE) || Ni || Nr)
//   initiator -> responder record key: key(1); responder -> initiator: key(2);
//   responder hello confirmation tag: key(3).
// Record tag = HMAC-SHA256(direction key, record header || payload) (layout in auth_format.h).
//
// Memory: Init() allocates two small mbed TLS digest states; afterwards nothing here allocates,
// whatever the number of connections served by Reset()/Start...() on the same object.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "edgesgd/auth/auth_format.h"
#include "edgesgd/auth/hmac_sha256.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/core/result.h"

namespace edgesgd::auth {

// Why a hello or record from the peer was rejected. After a rejection the connection is dead:
// every further call fails with kFailedPrecondition until the next Start...().
enum class RejectReason : std::uint8_t {
  kNone = 0,
  kMalformed,          // a hello that is not one, or a record whose size disagrees with its header
  kUnknownDevice,      // the initiator names a device without a key in the ring
  kWrongDevice,        // a record or responder hello names another device than the connection's
  kBadTag,             // tag mismatch: altered, forged, wrong key, or from another connection
  kReplayed,           // a valid tag with a sequence number other than the next: replayed,
                       // reordered or preceded by a deleted record
  kOversized,          // a record longer than the connection's limit
  kTruncated,          // fewer bytes than the header announces
  kSequenceExhausted,  // a record after sequence number 2^64 - 1 was used
};
inline constexpr std::size_t kRejectReasonCount = 9;

// Short lower-case description for log lines, e.g. "bad tag". Never null.
const char* RejectReasonName(RejectReason reason);

// Counts of one connection, or summed over connections with Add().
struct AuthStats {
  std::uint64_t records_sealed = 0;
  std::uint64_t records_opened = 0;
  std::array<std::uint64_t, kRejectReasonCount> rejected{};  // indexed by RejectReason

  std::uint64_t total_rejected() const;
  void Add(const AuthStats& other);
};

enum class AuthRole : std::uint8_t { kInitiator, kResponder };

// The authentication state of one connection (either side). Reusable: Start...() begins a new
// connection and forgets the previous one's keys.
class ConnectionAuth {
 public:
  ConnectionAuth() = default;
  ~ConnectionAuth();  // zeroizes derived keys
  ConnectionAuth(const ConnectionAuth&) = delete;
  ConnectionAuth& operator=(const ConnectionAuth&) = delete;
  ConnectionAuth(ConnectionAuth&&) noexcept = default;
  ConnectionAuth& operator=(ConnectionAuth&&) noexcept = default;

  // Allocates the digest states and sets the largest payload a received record may carry (size
  // receive buffers with RecordBytes(max_payload_bytes)); what this side sends is limited by
  // the peer's own setting instead. Once per object.
  // Errors: kInvalidArgument if max_payload_bytes is 0 or above kMaxRecordPayloadBytes;
  // kFailedPrecondition on a second call; kResourceExhausted/kInternal from HmacSha256::Init.
  Status Init(std::size_t max_payload_bytes);

  // Initiator, step 1: begins a connection authenticated with `device`'s key from `keys` and
  // writes the initiator hello to `hello_out`. `nonce` must be fresh from a CSPRNG
  // (platform::FillRandomBytes). Does not allocate.
  // Errors: kFailedPrecondition before Init; kNotFound if `keys` has no key for `device`.
  Status StartInitiator(const KeyRing& keys, std::uint32_t device,
                        std::span<const std::byte, kNonceBytes> nonce,
                        std::span<std::byte, kInitiatorHelloBytes> hello_out);

  // Initiator, step 2: checks the responder hello; records flow afterwards.
  // Errors (the connection is rejected; see last_reject()): kDataLoss (kMalformed: wrong size,
  // magic, version, kind or padding); kUnauthenticated (kWrongDevice; kBadTag: the responder
  // does not hold this device's key). kFailedPrecondition if not waiting for a responder hello.
  Status AcceptResponderHello(std::span<const std::byte> hello);

  // Responder: checks the initiator hello, looks its device up in `keys`, writes the responder
  // hello to `hello_out`; records flow afterwards. `nonce` as for StartInitiator.
  // Errors (rejected): kDataLoss (kMalformed); kUnauthenticated (kUnknownDevice).
  // kFailedPrecondition before Init.
  Status StartResponder(const KeyRing& keys, std::span<const std::byte> initiator_hello,
                        std::span<const std::byte, kNonceBytes> nonce,
                        std::span<std::byte, kResponderHelloBytes> hello_out);

  // Seals `payload` into `record_storage` and returns the record (its first
  // RecordBytes(payload.size()) bytes). The payload is copied to offset kRecordHeaderBytes
  // unless it is already there (build frames in place to avoid the copy). Does not allocate.
  // Errors: kFailedPrecondition unless established; kOutOfRange if the payload exceeds
  // kMaxRecordPayloadBytes; kResourceExhausted if `record_storage` is too small or the send sequence is used up
  // (reconnect); kInternal if mbed TLS fails.
  Result<std::span<const std::byte>> Seal(std::span<const std::byte> payload,
                                          std::span<std::byte> record_storage);

  // As Seal, for a payload that stays where it is (one frame written to several connections):
  // writes the record's header to `header` and its tag to `tag`; the record is the three
  // written back to back (header, payload, tag). Does not allocate. Errors as Seal's, except
  // that no storage can be too small.
  Status SealDetached(std::span<const std::byte> payload,
                      std::span<std::byte, kRecordHeaderBytes> header,
                      std::span<std::byte, kTagBytes> tag);

  // Reads a record header (its first kRecordHeaderBytes) and returns the whole record's length:
  // how many bytes a stream reader must collect before Open(). Checks the length limit and the
  // device; the tag and the sequence number are checked by Open().
  // Errors (rejected): kOutOfRange (kOversized), kUnauthenticated (kWrongDevice); kDataLoss if
  // `header` is shorter than a header (not a rejection: read more). kFailedPrecondition
  // unless established.
  Result<std::size_t> ReadRecordLength(std::span<const std::byte> header);

  // Checks `record` (exactly one record) and returns its payload, a view into `record`: header
  // sanity, then the tag (constant-time), then the sequence number. Does not allocate.
  // Errors (rejected): kDataLoss (kTruncated, kMalformed), kOutOfRange (kOversized),
  // kUnauthenticated (kWrongDevice, kBadTag, kReplayed, kSequenceExhausted).
  // kFailedPrecondition unless established.
  Result<std::span<const std::byte>> Open(std::span<const std::byte> record);

  // Ends the current connection: zeroizes its keys and nonces; established() is false until the
  // next Start...(). Keeps Init's state and the stats.
  void Reset() { ResetConnection(); }

  bool established() const { return state_ == State::kEstablished; }
  bool rejected() const { return state_ == State::kRejected; }
  AuthRole role() const { return role_; }
  // The device the connection authenticates as (the one its hello named), or kNoDevice.
  std::uint32_t device() const { return device_; }
  std::size_t max_payload_bytes() const { return max_payload_bytes_; }
  // The reason of the rejection that ended this connection (kNone if none).
  RejectReason last_reject() const { return last_reject_; }
  const AuthStats& stats() const { return stats_; }

 private:
  friend class ConnectionAuthTestAccess;  // tests: sequence numbers near 2^64

  enum class State : std::uint8_t {
    kUninitialized,
    kIdle,
    kAwaitingResponderHello,
    kEstablished,
    kRejected
  };

  Status Reject(RejectReason reason, Status status);
  void ResetConnection();
  // Why a payload of `payload_bytes` cannot be sealed now (Seal's errors), or Ok.
  Status CheckCanSeal(std::size_t payload_bytes) const;
  // Derives both record keys (and the confirmation tag) from `device_key` and the nonces.
  Status DeriveKeys(std::span<const std::byte, kKeyBytes> device_key,
                    std::span<std::byte, kTagBytes> confirmation);

  HmacSha256 send_mac_;
  HmacSha256 receive_mac_;
  std::size_t max_payload_bytes_ = 0;
  State state_ = State::kUninitialized;
  AuthRole role_ = AuthRole::kInitiator;
  std::uint32_t device_ = kNoDevice;
  std::array<std::byte, kNonceBytes> initiator_nonce_{};
  std::array<std::byte, kNonceBytes> responder_nonce_{};
  std::array<std::byte, kKeyBytes> pending_device_key_{};  // initiator, until the responder hello
  std::uint64_t send_sequence_ = 0;                        // next to send
  std::uint64_t receive_sequence_ = 0;                     // next expected
  bool send_exhausted_ = false;                            // sequence 2^64 - 1 was sent
  bool receive_exhausted_ = false;                         // sequence 2^64 - 1 was received
  RejectReason last_reject_ = RejectReason::kNone;
  AuthStats stats_;
};

}  // namespace edgesgd::auth
