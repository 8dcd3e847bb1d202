// The golden vectors on a Cortex-M4F: encodes every codec case of tests/golden/codec_golden.h
// and every frame of tests/golden/frame_golden.h with the Cortex-M build of core and wire, and
// compares the bytes with the same expectations the x86-64, aarch64 and armhf test suites check
// (the tables are shared, not copied). Prints each mismatch with the bytes it produced, then
// "EDGESGD-MCU PASS" and exit 0 only if every case matched.

#include <cstddef>
#include <iterator>
#include <span>
#include <string_view>

#include "edgesgd/platform/log.h"
#include "edgesgd/wire/frame_builder.h"
#include "golden/codec_golden.h"
#include "golden/frame_golden.h"
#include "mcu_checks.h"
#include "semihosting.h"

namespace edgesgd {
namespace {

using platform::Log;
using platform::LogLevel;

golden::CaseBuffers g_case_buffers;
golden::FrameBuffers g_frame_buffers;
mcu_test::Checks g_checks;

// Counts one case; logs what it produced when that differs from the expected bytes.
void CheckCase(const char* what, const char* name, std::string_view actual_hex, bool matches) {
  if (g_checks.Expect(matches, what)) return;
  Log(LogLevel::kError, "  %s: got %.*s", name, static_cast<int>(actual_hex.size()),
      actual_hex.data());
}

bool CheckEncoded(const char* what, const char* name, Status status) {
  if (g_checks.ExpectOk(status, what)) return true;
  Log(LogLevel::kError, "  %s could not be encoded", name);
  return false;
}

void CheckFrame(const char* what, const char* name, const Result<std::span<const std::byte>>& frame,
                std::string_view expected_hex) {
  if (!CheckEncoded(what, name, frame.status())) return;
  const bool matches = golden::BytesMatchHex(frame.value(), expected_hex);
  const std::size_t length = matches ? 0 : golden::ToHex(frame.value(), g_frame_buffers.hex);
  CheckCase(what, name, std::string_view(g_frame_buffers.hex.data(), length), matches);
}

void CheckCodecPayloads() {
  for (const golden::CodecCase& golden : golden::kCodecCases) {
    const Result<std::size_t> length = golden::EncodeCase(golden, g_case_buffers);
    if (!CheckEncoded("payload", golden.name, length.status())) continue;
    const std::string_view actual(g_case_buffers.hex.data(), length.value());
    CheckCase("payload", golden.name, actual, actual == golden.payload_hex);
  }
}

void CheckFrames() {
  wire::FrameBuilder builder(g_frame_buffers.builder);
  CheckFrame("frame", "heartbeat", golden::EncodeHeartbeat(builder), golden::kHeartbeatFrameHex);
  for (const golden::FrameCase& frame : golden::kSmallUpdateFrames) {
    CheckFrame("small update frame", frame.name, golden::EncodeSmallUpdate(builder, frame),
               frame.frame_hex);
  }
  for (std::size_t i = 0; i < std::size(golden::kCodecCases); ++i) {
    CheckFrame("update frame", golden::kCodecCases[i].name,
               golden::EncodeCodecUpdate(builder, i, g_case_buffers),
               golden::kCodecUpdateFrameHex[i]);
  }
}

int Run() {
  CheckCodecPayloads();
  CheckFrames();
  if (!g_checks.Report("golden cases")) return 1;
  Log(LogLevel::kInfo, "%d golden cases (codec payloads and wire frames) match",
      g_checks.checked());
  platform::internal::ReportPass();
  return 0;
}

}  // namespace
}  // namespace edgesgd

int main() { return edgesgd::Run(); }
