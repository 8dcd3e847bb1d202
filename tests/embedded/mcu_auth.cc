// Authentication on a Cortex-M4F: mbed TLS's HMAC-SHA256 as compiled for the board from Debian's
// source (transport/auth/bare_metal), and the connection records a device's serial line carries.
// Checks RFC 4231's HMAC-SHA256 vectors, then plays both ends of one connection: the hellos, a
// record each way, and the refusal of an altered, a replayed and a foreign record. Two
// connections' digest states come from the static pool, and nothing touches a heap (nm checks
// the image). Prints each failure, then "EDGESGD-MCU PASS" and exit 0 only if all held.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/hmac_sha256.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/platform/log.h"
#include "edgesgd_mbedtls_pool.h"
#include "mcu_checks.h"
#include "semihosting.h"

namespace edgesgd {
namespace {

using platform::Log;
using platform::LogLevel;

mcu_test::Checks g_checks;

std::span<const std::byte> Text(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// Tags are as long as keys, so the key decoder reads the expected ones.
static_assert(auth::kTagBytes == auth::kKeyBytes);
bool EqualsHex(std::span<const std::byte, auth::kTagBytes> tag, std::string_view hex) {
  std::array<std::byte, auth::kKeyBytes> expected{};
  return auth::DecodeKeyHex(hex, expected) && std::equal(tag.begin(), tag.end(), expected.begin());
}

// RFC 4231, test cases 2 (a short key) and 6 (a key longer than the block, hashed first).
void CheckHmacVectors() {
  auth::HmacSha256 mac;
  g_checks.Expect(mac.Init().ok(), "HMAC state from the static pool");
  std::array<std::byte, auth::kTagBytes> tag{};
  g_checks.Expect(
      mac.SetKey(Text("Jefe")).ok() &&
          mac.Mac({Text("what do ya want "), Text("for nothing?")}, tag).ok() &&
          EqualsHex(tag, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
      "RFC 4231 case 2");
  std::array<std::byte, 131> long_key{};
  long_key.fill(std::byte{0xaa});
  g_checks.Expect(
      mac.SetKey(long_key).ok() &&
          mac.Mac({Text("Test Using Larger Than Block-Size Key - Hash Key First")}, tag).ok() &&
          EqualsHex(tag, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
      "RFC 4231 case 6");
}

constexpr std::uint32_t kDevice = 4;
constexpr std::size_t kMaxPayload = 256;

void CheckConnection() {
  std::array<std::byte, auth::kKeyBytes> key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::byte>(i * 7 + 1);
  auth::FixedKeyRing<1> keys;
  g_checks.Expect(keys.Add(kDevice, key).ok(), "key ring");
  auth::ConnectionAuth device;
  auth::ConnectionAuth gateway;
  g_checks.Expect(device.Init(kMaxPayload).ok() && gateway.Init(kMaxPayload).ok(),
                  "two connections' states from the static pool");

  std::array<std::byte, auth::kNonceBytes> device_nonce{};
  std::array<std::byte, auth::kNonceBytes> gateway_nonce{};
  device_nonce.fill(std::byte{1});
  gateway_nonce.fill(std::byte{2});
  std::array<std::byte, auth::kInitiatorHelloBytes> hello{};
  std::array<std::byte, auth::kResponderHelloBytes> answer{};
  g_checks.Expect(device.StartInitiator(keys, kDevice, device_nonce, hello).ok() &&
                      gateway.StartResponder(keys, hello, gateway_nonce, answer).ok() &&
                      device.AcceptResponderHello(answer).ok() && device.established(),
                  "hellos");

  // A record each way, sealed around a frame that stays put on the device's side.
  std::array<std::byte, 40> frame{};
  frame.fill(std::byte{0x5a});
  std::array<std::byte, auth::kRecordHeaderBytes> header{};
  std::array<std::byte, auth::kTagBytes> tag{};
  std::array<std::byte, auth::RecordBytes(kMaxPayload)> record{};
  g_checks.Expect(device.SealDetached(frame, header, tag).ok(), "seal a frame in place");
  std::copy(header.begin(), header.end(), record.begin());
  std::copy(frame.begin(), frame.end(), record.begin() + header.size());
  std::copy(tag.begin(), tag.end(), record.begin() + header.size() + frame.size());
  const std::span<const std::byte> sealed = std::span(record).first(auth::RecordBytes(40));
  const Result<std::span<const std::byte>> opened = gateway.Open(sealed);
  g_checks.Expect(opened.ok() && opened->size() == frame.size() && (*opened)[39] == std::byte{0x5a},
                  "open the device's record");

  std::array<std::byte, auth::RecordBytes(kMaxPayload)> reply_storage{};
  const Result<std::span<const std::byte>> reply = gateway.Seal(frame, reply_storage);
  g_checks.Expect(reply.ok(), "seal a reply");
  if (!reply.ok()) return;
  std::array<std::byte, auth::RecordBytes(40)> replay{};
  std::copy(reply->begin(), reply->end(), replay.begin());
  g_checks.Expect(device.Open(*reply).ok(), "open the gateway's record");
  g_checks.Expect(
      !device.Open(replay).ok() && device.last_reject() == auth::RejectReason::kReplayed,
      "a replayed record is refused");

  // A fresh connection, with fresh nonces, for each further refusal: a refused record ends its
  // connection.
  std::uint8_t connection = 1;
  const auto reconnect = [&] {
    device.Reset();
    gateway.Reset();
    ++connection;
    device_nonce[0] = static_cast<std::byte>(connection);
    gateway_nonce[0] = static_cast<std::byte>(connection);
    return device.StartInitiator(keys, kDevice, device_nonce, hello).ok() &&
           gateway.StartResponder(keys, hello, gateway_nonce, answer).ok() &&
           device.AcceptResponderHello(answer).ok();
  };
  g_checks.Expect(reconnect(), "a second connection");
  const Result<std::span<const std::byte>> fresh = gateway.Seal(frame, reply_storage);
  g_checks.Expect(fresh.ok(), "seal in the second connection");
  if (!fresh.ok()) return;
  std::array<std::byte, auth::RecordBytes(40)> altered{};
  std::copy(fresh->begin(), fresh->end(), altered.begin());
  altered[auth::kRecordHeaderBytes + 3] ^= std::byte{0x01};
  g_checks.Expect(!device.Open(altered).ok() && device.last_reject() == auth::RejectReason::kBadTag,
                  "an altered record is refused");
  g_checks.Expect(reconnect(), "a third connection");
  g_checks.Expect(!device.Open(replay).ok() && device.last_reject() == auth::RejectReason::kBadTag,
                  "a record of an earlier connection is refused");
}

int Run() {
  CheckHmacVectors();
  CheckConnection();
  if (!g_checks.Report("authentication checks")) {
    return 1;
  }
  Log(LogLevel::kInfo, "%d authentication checks hold (mbed TLS HMAC-SHA256, static pool of %u B)",
      g_checks.checked(), static_cast<unsigned>(mbedtls_pool::kPoolBytes));
  platform::internal::ReportPass();
  return 0;
}

}  // namespace
}  // namespace edgesgd

int main() { return edgesgd::Run(); }
