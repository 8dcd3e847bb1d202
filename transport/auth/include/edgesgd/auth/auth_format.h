#pragma once

// Byte layout of edgesgd's authenticated transport: the hello each side sends when a connection
// opens and the record that carries every wire frame afterwards. All integers little-endian.
//
// Initiator hello (the side that opened the connection), kInitiatorHelloBytes:
//   [0, 4)    magic "EDGA"
//   [4]       version (kAuthVersion)
//   [5]       kind 1 (initiator)
//   [6, 8)    zero
//   [8, 12)   device id: whose pre-shared key authenticates the connection
//   [12, 16)  zero
//   [16, 32)  initiator nonce (fresh from a CSPRNG)
// Responder hello, kResponderHelloBytes: the same first 16 bytes with kind 2 and the device id
// echoed, then
//   [16, 32)  responder nonce (fresh from a CSPRNG)
//   [32, 64)  confirmation tag: proves the responder holds the device's key (see
//             connection_auth.h for every derivation)
// Record, RecordBytes(n) for an n-byte payload:
//   [0, 4)          n, the payload length
//   [4, 8)          device id of the connection
//   [8, 16)         sequence number: 0, 1, 2, ... per direction per connection
//   [16, 16 + n)    payload: one wire frame
//   [16 + n, +32)   tag = HMAC-SHA256(direction key, bytes [0, 16 + n))
// The 16-byte header keeps the payload at the record's alignment, so a record received into
// 8-byte aligned storage hands the frame decoder an aligned frame without a copy.

#include <array>
#include <cstddef>
#include <cstdint>

namespace edgesgd::auth {

inline constexpr std::size_t kKeyBytes = 32;    // pre-shared key per device (HMAC-SHA256 key)
inline constexpr std::size_t kTagBytes = 32;    // full HMAC-SHA256 output, never truncated
inline constexpr std::size_t kNonceBytes = 16;  // 128 bits: a repeat is expected only after ~2^64
inline constexpr std::uint8_t kAuthVersion = 1;
inline constexpr std::array<std::uint8_t, 4> kHelloMagic = {'E', 'D', 'G', 'A'};
inline constexpr std::uint8_t kInitiatorHelloKind = 1;
inline constexpr std::uint8_t kResponderHelloKind = 2;

inline constexpr std::size_t kHelloPrefixBytes = 16;  // magic, version, kind, device, padding
inline constexpr std::size_t kInitiatorHelloBytes = kHelloPrefixBytes + kNonceBytes;
inline constexpr std::size_t kResponderHelloBytes = kHelloPrefixBytes + kNonceBytes + kTagBytes;

inline constexpr std::size_t kRecordHeaderBytes = 16;
inline constexpr std::size_t kRecordOverheadBytes = kRecordHeaderBytes + kTagBytes;

// Largest payload a record can describe (its length field is 32 bits). Connections use a lower
// limit of their own (ConnectionAuth::Init).
inline constexpr std::size_t kMaxRecordPayloadBytes = 0xFFFFFFFFu - kRecordOverheadBytes;

// Bytes of a record carrying `payload_bytes`; 0 above kMaxRecordPayloadBytes.
constexpr std::size_t RecordBytes(std::size_t payload_bytes) {
  return payload_bytes <= kMaxRecordPayloadBytes ? payload_bytes + kRecordOverheadBytes : 0;
}

}  // namespace edgesgd::auth
