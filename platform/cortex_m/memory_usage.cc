#include "memory_usage.h"

#include <cstdint>

#include "edgesgd/platform/log.h"

extern "C" {
extern std::uint32_t __edgesgd_ram_start[];
extern std::uint32_t __edgesgd_bss_end[];
extern std::uint32_t __edgesgd_stack_limit[];
extern std::uint32_t __edgesgd_stack_top[];
extern std::uint32_t __edgesgd_data_start[];
extern std::uint32_t __edgesgd_data_end[];
extern const std::uint32_t __edgesgd_data_load[];
extern const std::uint32_t __edgesgd_flash_start[];
}

namespace edgesgd::platform::internal {
namespace {

constexpr std::uint32_t kPaint = 0x5A7AC4EDu;
// Left unpainted below the painting function's frame: its own locals and call overhead.
constexpr std::uintptr_t kPaintMarginBytes = 64;

std::uintptr_t Address(const volatile void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

}  // namespace

void PaintUnusedStack() {
  const std::uintptr_t frame = Address(__builtin_frame_address(0)) - kPaintMarginBytes;
  // Volatile so the loop is neither turned into a memset call nor dropped as dead stores.
  for (volatile std::uint32_t* word = __edgesgd_stack_limit; Address(word) < frame; ++word) {
    *word = kPaint;
  }
}

std::size_t StackPeakBytes() {
  const volatile std::uint32_t* word = __edgesgd_stack_limit;
  while (word < __edgesgd_stack_top && *word == kPaint) ++word;
  return Address(__edgesgd_stack_top) - Address(word);
}

std::size_t StaticRamBytes() { return Address(__edgesgd_bss_end) - Address(__edgesgd_ram_start); }

std::size_t FlashBytes() {
  const std::uintptr_t data_bytes = Address(__edgesgd_data_end) - Address(__edgesgd_data_start);
  return Address(__edgesgd_data_load) + data_bytes - Address(__edgesgd_flash_start);
}

void LogMemoryUse() {
  const std::size_t static_ram = StaticRamBytes();
  const std::size_t stack = StackPeakBytes();
  Log(LogLevel::kInfo, "memory: flash %zu B, static RAM %zu B, stack peak %zu B, RAM %zu B",
      FlashBytes(), static_ram, stack, static_ram + stack);
}

}  // namespace edgesgd::platform::internal
