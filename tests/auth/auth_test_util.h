#pragma once

// Helpers shared by the auth tests: byte strings, hex, keys and an established connection pair.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/key_ring.h"

namespace edgesgd::auth {

// Reaches the sequence counters, to test their end without sealing 2^64 records.
class ConnectionAuthTestAccess {
 public:
  static void SetSendSequence(ConnectionAuth& auth, std::uint64_t next) {
    auth.send_sequence_ = next;
    auth.send_exhausted_ = false;
  }
  static void SetReceiveSequence(ConnectionAuth& auth, std::uint64_t next) {
    auth.receive_sequence_ = next;
    auth.receive_exhausted_ = false;
  }
};

namespace testing {

inline std::vector<std::byte> Bytes(std::string_view text) {
  const auto bytes = std::as_bytes(std::span<const char>(text.data(), text.size()));
  return std::vector<std::byte>(bytes.begin(), bytes.end());
}

inline std::string Hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const std::byte b : bytes) {
    const auto value = std::to_integer<unsigned>(b);
    hex += kDigits[value >> 4];
    hex += kDigits[value & 15];
  }
  return hex;
}

// A deterministic key for `device` (tests only; real keys come from a CSPRNG).
inline std::array<std::byte, kKeyBytes> TestKey(std::uint32_t device, std::uint8_t salt = 0) {
  std::array<std::byte, kKeyBytes> key;
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    key[i] = static_cast<std::byte>(device * 31 + i * 7 + salt + 1);
  }
  return key;
}

inline std::array<std::byte, kNonceBytes> TestNonce(std::uint8_t seed) {
  std::array<std::byte, kNonceBytes> nonce;
  for (std::size_t i = 0; i < kNonceBytes; ++i) nonce[i] = static_cast<std::byte>(seed * 17 + i);
  return nonce;
}

inline constexpr std::size_t kTestMaxPayload = 4096;

// Runs the hellos between a fresh initiator (as `device`, keys from `initiator_keys`) and a
// fresh responder (keys from `responder_keys`), with nonces from `nonce_seed`. Returns whether
// both ended established.
inline bool Handshake(ConnectionAuth& initiator, const KeyRing& initiator_keys,
                      ConnectionAuth& responder, const KeyRing& responder_keys,
                      std::uint32_t device, std::uint8_t nonce_seed) {
  std::array<std::byte, kInitiatorHelloBytes> hello;
  std::array<std::byte, kResponderHelloBytes> reply;
  const auto initiator_nonce = TestNonce(nonce_seed);
  const auto responder_nonce = TestNonce(static_cast<std::uint8_t>(nonce_seed + 100));
  if (!initiator.StartInitiator(initiator_keys, device, initiator_nonce, hello).ok()) return false;
  if (!responder.StartResponder(responder_keys, hello, responder_nonce, reply).ok()) return false;
  return initiator.AcceptResponderHello(reply).ok() && initiator.established() &&
         responder.established();
}

}  // namespace testing
}  // namespace edgesgd::auth
