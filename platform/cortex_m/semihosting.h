#pragma once

// ARM semihosting: the program asks the debugger (or qemu with -semihosting-config enable=on)
// to do I/O for it through `bkpt 0xAB`. This is how the Cortex-M backend prints and exits
// without a UART driver. Without a debugger attached, a semihosting call is a HardFault, so an
// image meant for a bare board needs a UART log backend instead.
//
// Internal to the cortex_m backend (and the smoke image that tests it); not installed.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace edgesgd::platform::internal {

// Process exit codes the backend reports through the emulator. main's return value passes
// through unchanged; these are for ends that main does not choose.
inline constexpr int kExitFatal = 2;  // PlatformFatal (a failed CHECK)
inline constexpr int kExitFault = 3;  // a CPU fault or an unexpected interrupt

enum class Stream : std::uint8_t { kStdout, kStderr };

// Writes `text` to the host's stdout or stderr. Does not allocate; unbuffered.
void SemihostingWrite(Stream stream, std::string_view text);

// Writes `value` in decimal or as 0x-prefixed 8-digit hex. Used on the fatal and fault paths,
// which must not depend on the formatter or on much stack.
void SemihostingWriteDecimal(Stream stream, std::int32_t value);
void SemihostingWriteHex(Stream stream, std::uint32_t value);

// Prints the line by which tests/embedded/run_mcu.sh knows an image passed its checks.
inline void ReportPass() { SemihostingWrite(Stream::kStdout, "EDGESGD-MCU PASS\n"); }

// Ends the program; the emulator exits with `code` (SYS_EXIT_EXTENDED).
[[noreturn]] void SemihostingExit(int code);

// The host-side command line (qemu: the -kernel file name followed by -append's text) into
// `buffer`, NUL-terminated. Returns its length, or 0 when the host provides none.
std::size_t SemihostingCommandLine(std::span<char> buffer);

}  // namespace edgesgd::platform::internal
