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
#include "semihosting.h"

namespace edgesgd {
namespace {

using platform::Log;
using platform::LogLevel;

golden::CaseBuffers g_case_buffers;
golden::FrameBuffers g_frame_buffers;
int g_checked = 0;
int g_failures = 0;

void Fail(const char* what, const char* name, std::string_view actual_hex) {
  ++g_failures;
  Log(LogLevel::kError, "FAIL %s %s: got %.*s", what, name, static_cast<int>(actual_hex.size()),
      actual_hex.data());
}

void FailEncoding(const char* what, const char* name, Status status) {
  ++g_failures;
  Log(LogLevel::kError, "FAIL %s %s: encoding failed: %s", what, name, status.str());
}

void CheckFrame(const char* what, const char* name,
                const Result<std::span<const std::byte>>& frame, std::string_view expected_hex) {
  ++g_checked;
  if (!frame.ok()) return FailEncoding(what, name, frame.status());
  if (golden::BytesMatchHex(frame.value(), expected_hex)) return;
  const std::size_t length = golden::ToHex(frame.value(), g_frame_buffers.hex);
  Fail(what, name, std::string_view(g_frame_buffers.hex.data(), length));
}

void CheckCodecPayloads() {
  for (const golden::CodecCase& golden : golden::kCodecCases) {
    ++g_checked;
    const Result<std::size_t> length = golden::EncodeCase(golden, g_case_buffers);
    if (!length.ok()) {
      FailEncoding("payload", golden.name, length.status());
      continue;
    }
    const std::string_view actual(g_case_buffers.hex.data(), length.value());
    if (actual != golden.payload_hex) Fail("payload", golden.name, actual);
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
  if (g_failures != 0) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: %d of %d golden cases differ", g_failures,
        g_checked);
    return 1;
  }
  Log(LogLevel::kInfo, "%d golden cases (codec payloads and wire frames) match", g_checked);
  platform::internal::ReportPass();
  return 0;
}

}  // namespace
}  // namespace edgesgd

int main() { return edgesgd::Run(); }
