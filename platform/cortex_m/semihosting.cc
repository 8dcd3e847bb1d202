#include "semihosting.h"

namespace edgesgd::platform::internal {
namespace {

// Operation numbers and the exit reason of the ARM semihosting specification (v2).
constexpr std::uint32_t kSysOpen = 0x01;
constexpr std::uint32_t kSysWrite = 0x05;
constexpr std::uint32_t kSysGetCmdline = 0x15;
constexpr std::uint32_t kSysExitExtended = 0x20;
constexpr std::uint32_t kAdpStoppedApplicationExit = 0x20026;
// SYS_OPEN modes for the special file ":tt": "w" is stdout, "a" is stderr.
constexpr std::uint32_t kOpenModeWrite = 4;
constexpr std::uint32_t kOpenModeAppend = 8;

std::int32_t Call(std::uint32_t operation, const void* block) {
  std::int32_t result;
  // r0 and r1 are clobbered, so the compiler keeps both inputs out of them and the two moves
  // cannot overwrite each other.
  asm volatile(
      "mov r0, %[operation]\n\t"
      "mov r1, %[block]\n\t"
      "bkpt 0xAB\n\t"
      "mov %[result], r0"
      : [result] "=r"(result)
      : [operation] "r"(operation), [block] "r"(block)
      : "r0", "r1", "memory");
  return result;
}

// Host handles of stdout and stderr, opened on first use. Single core and no RTOS: no lock.
std::int32_t g_handles[2] = {-1, -1};

std::int32_t Handle(Stream stream) {
  std::int32_t& handle = g_handles[stream == Stream::kStdout ? 0 : 1];
  if (handle < 0) {
    static const char kConsole[] = ":tt";
    const std::uint32_t block[3] = {reinterpret_cast<std::uintptr_t>(kConsole),
                                    stream == Stream::kStdout ? kOpenModeWrite : kOpenModeAppend,
                                    sizeof(kConsole) - 1};
    handle = Call(kSysOpen, block);
  }
  return handle;
}

}  // namespace

void SemihostingWrite(Stream stream, std::string_view text) {
  if (text.empty()) return;
  const std::int32_t handle = Handle(stream);
  if (handle < 0) return;
  const std::uint32_t block[3] = {static_cast<std::uint32_t>(handle),
                                  reinterpret_cast<std::uintptr_t>(text.data()),
                                  static_cast<std::uint32_t>(text.size())};
  Call(kSysWrite, block);
}

void SemihostingWriteDecimal(Stream stream, std::int32_t value) {
  char digits[12];
  std::size_t start = sizeof(digits);
  // Work in the unsigned domain so INT32_MIN does not overflow on negation.
  std::uint32_t magnitude =
      value < 0 ? 0u - static_cast<std::uint32_t>(value) : static_cast<std::uint32_t>(value);
  do {
    digits[--start] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (value < 0) digits[--start] = '-';
  SemihostingWrite(stream, std::string_view(digits + start, sizeof(digits) - start));
}

void SemihostingWriteHex(Stream stream, std::uint32_t value) {
  char text[10] = {'0', 'x'};
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t nibble = (value >> (28 - 4 * i)) & 0xFu;
    text[2 + i] = static_cast<char>(nibble < 10 ? '0' + nibble : 'a' + nibble - 10);
  }
  SemihostingWrite(stream, std::string_view(text, sizeof(text)));
}

void SemihostingExit(int code) {
  const std::uint32_t block[2] = {kAdpStoppedApplicationExit, static_cast<std::uint32_t>(code)};
  Call(kSysExitExtended, block);
  // Only reached when no host handled the call (no debugger): stop here rather than run on.
  while (true) asm volatile("wfi");
}

std::size_t SemihostingCommandLine(std::span<char> buffer) {
  if (buffer.empty()) return 0;
  std::uint32_t block[2] = {reinterpret_cast<std::uintptr_t>(buffer.data()),
                            static_cast<std::uint32_t>(buffer.size())};
  if (Call(kSysGetCmdline, block) != 0 || block[1] >= buffer.size()) {
    buffer[0] = '\0';
    return 0;
  }
  buffer[block[1]] = '\0';
  return block[1];
}

}  // namespace edgesgd::platform::internal
