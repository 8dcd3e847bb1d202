// Reset and exception entry for Cortex-M4F images linked with -nostartfiles and
// mps2_an386.ld (or a board's script defining the same symbols). Replaces crt0, crti/crtn and
// crtbegin/crtend: vector table, FPU enable, .data/.bss set-up, C++ static constructors, main,
// and exit through semihosting with main's return value.
//
// Every fault and every interrupt without a handler prints what happened and exits with
// kExitFault, so a crash under the emulator ends the run with a message instead of hanging CI.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "registers.h"
#include "semihosting.h"
#include "memory_usage.h"

// Symbols of the linker script. Arrays of unknown size, so the compiler assumes nothing about
// the extent of the memory behind them (a scalar would make the memcpy below look out of bounds).
extern "C" {
extern std::byte __edgesgd_stack_top[];
extern const std::byte __edgesgd_data_load[];
extern std::byte __edgesgd_data_start[];
extern std::byte __edgesgd_data_end[];
extern std::byte __edgesgd_bss_start[];
extern std::byte __edgesgd_bss_end[];
using InitFunction = void (*)();
extern const InitFunction __preinit_array_start[];
extern const InitFunction __preinit_array_end[];
extern const InitFunction __init_array_start[];
extern const InitFunction __init_array_end[];
}

// The application's main, under another C++ name: ISO C++ forbids calling ::main.
extern "C" int EdgesgdApplicationMain() __asm__("main");

// newlib's rdimon sets up its semihosting file handles here; its stdio and exit(n) work only
// after this call. Weak, so images linked without rdimon (nosys.specs) still link.
extern "C" void initialise_monitor_handles() __attribute__((weak));

namespace edgesgd::platform::internal {
namespace {

const char* ExceptionName(std::uint32_t number) {
  switch (number) {
    case 2:
      return "NMI";
    case 3:
      return "HardFault";
    case 4:
      return "MemManage";
    case 5:
      return "BusFault";
    case 6:
      return "UsageFault";
    case 11:
      return "SVCall";
    case 12:
      return "DebugMonitor";
    case 14:
      return "PendSV";
    case 15:
      return "SysTick";
    default:
      return number >= 16 ? "unhandled IRQ" : "reserved exception";
  }
}

void WriteField(const char* name, std::uint32_t value) {
  SemihostingWrite(Stream::kStderr, name);
  SemihostingWriteHex(Stream::kStderr, value);
}

[[noreturn]] void ReportFault(const std::uint32_t* frame) {
  std::uint32_t ipsr;
  asm volatile("mrs %0, ipsr" : "=r"(ipsr));
  const std::uint32_t number = ipsr & 0x1FFu;
  SemihostingWrite(Stream::kStderr, "edgesgd: fault: ");
  SemihostingWrite(Stream::kStderr, ExceptionName(number));
  SemihostingWrite(Stream::kStderr, " (exception ");
  SemihostingWriteDecimal(Stream::kStderr, static_cast<std::int32_t>(number));
  SemihostingWrite(Stream::kStderr, ")");
  if (frame != nullptr) {
    WriteField(" pc=", frame[6]);
    WriteField(" lr=", frame[5]);
  }
  WriteField(" cfsr=", Register(kCfsr));
  WriteField(" hfsr=", Register(kHfsr));
  WriteField(" mmfar=", Register(kMmfar));
  WriteField(" bfar=", Register(kBfar));
  SemihostingWrite(Stream::kStderr, "\n");
  SemihostingExit(kExitFault);
}

}  // namespace
}  // namespace edgesgd::platform::internal

extern "C" {

// Continues Reset_Handler once the FPU is on: from here on the compiler may use float registers.
[[noreturn, gnu::used]] void EdgesgdResetContinue() {
  // .data from its load address in flash, .bss zeroed: both before any C++ code reads a global.
  const std::size_t data_bytes =
      static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(__edgesgd_data_end) -
                               reinterpret_cast<std::uintptr_t>(__edgesgd_data_start));
  std::memcpy(__edgesgd_data_start, __edgesgd_data_load, data_bytes);
  const std::size_t bss_bytes =
      static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(__edgesgd_bss_end) -
                               reinterpret_cast<std::uintptr_t>(__edgesgd_bss_start));
  std::memset(__edgesgd_bss_start, 0, bss_bytes);

  // Before anything deeper than this frame runs, so StackPeakBytes sees every later use.
  edgesgd::platform::internal::PaintUnusedStack();
  if (initialise_monitor_handles != nullptr) initialise_monitor_handles();

  // Static constructors, in the order the linker script collected them.
  for (const InitFunction* f = __preinit_array_start; f != __preinit_array_end; ++f) (*f)();
  for (const InitFunction* f = __init_array_start; f != __init_array_end; ++f) (*f)();

  // Static destructors never run: a device does not exit, and under the emulator the exit code
  // is all that matters. stdio users should fflush before returning.
  edgesgd::platform::internal::SemihostingExit(EdgesgdApplicationMain());
}

// The reset vector. The FPU (CP10/CP11 full access in CPACR) must be enabled before the first
// floating-point instruction, and with -mfloat-abi=hard the compiler may place one anywhere in
// compiled code, so this part is assembly only.
[[noreturn, gnu::naked]] void Reset_Handler() {
  asm volatile(
      "ldr r0, =0xE000ED88\n\t"
      "ldr r1, [r0]\n\t"
      "orr r1, r1, #(0xF << 20)\n\t"
      "str r1, [r0]\n\t"
      "dsb\n\t"
      "isb\n\t"
      "b EdgesgdResetContinue\n\t"
      ".ltorg");
}

// Reports a fault. `frame` is the exception stack frame (r0-r3, r12, lr, pc, xPSR), or null when
// the stack pointer was outside RAM and reading it would fault again.
[[noreturn, gnu::used]] void EdgesgdFaultReport(const std::uint32_t* frame) {
  edgesgd::platform::internal::ReportFault(frame);
}

// Entry of every fault and unexpected interrupt. Picks the stack the hardware pushed the frame
// on (EXC_RETURN bit 2: process or main stack) and checks it lies in RAM before handing it on;
// naked, so no prologue touches a possibly broken stack first.
[[gnu::naked]] void EdgesgdFaultHandler() {
  asm volatile(
      "tst lr, #4\n\t"
      "ite eq\n\t"
      "mrseq r0, msp\n\t"
      "mrsne r0, psp\n\t"
      "ldr r1, =__edgesgd_ram_start\n\t"
      "cmp r0, r1\n\t"
      "blo 1f\n\t"
      "ldr r1, =__edgesgd_stack_top - 32\n\t"
      "cmp r0, r1\n\t"
      "bls 2f\n\t"
      "1:\n\t"
      "movs r0, #0\n\t"
      // Continue on a known-good stack: the frame was not trustworthy, so neither is sp.
      "ldr r1, =__edgesgd_stack_top\n\t"
      "mov sp, r1\n\t"
      "2:\n\t"
      "b EdgesgdFaultReport\n\t"
      ".ltorg");
}

// Handlers an application may override (CMSIS names); by default each reports and exits.
void NMI_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void HardFault_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void MemManage_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void BusFault_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void UsageFault_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void SVC_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void DebugMon_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void PendSV_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void SysTick_Handler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));
void EdgesgdIrqHandler() noexcept __attribute__((weak, alias("EdgesgdFaultHandler")));

// What the crt files would have provided. __dso_handle identifies this image to __cxa_atexit;
// _init/_fini are called by newlib's __libc_init_array/__libc_fini_array if anything links them.
void* __dso_handle = nullptr;
void _init() {}
void _fini() {}

// Static destructors are never run (see EdgesgdResetContinue), so registering them is a no-op.
// Defining it here also keeps newlib's version out, which may allocate when its table is full.
int __cxa_atexit(void (*)(void*), void*, void*) { return 0; }

}  // extern "C"

namespace edgesgd::platform::internal {

// 16 system exceptions, then the external interrupts. qemu's mps2-an386 wires 32 (the CMSDK
// UARTs, timers, GPIO and Ethernet); all go to the reporting handler unless an application
// defines EdgesgdIrqHandler.
inline constexpr std::size_t kExternalInterrupts = 32;
using Handler = void (*)();

struct VectorTable {
  const void* initial_stack;
  Handler system[15];
  Handler external[kExternalInterrupts];
};

constexpr VectorTable MakeVectorTable() {
  VectorTable table{__edgesgd_stack_top,
                    {Reset_Handler, NMI_Handler, HardFault_Handler, MemManage_Handler,
                     BusFault_Handler, UsageFault_Handler, nullptr, nullptr, nullptr, nullptr,
                     SVC_Handler, DebugMon_Handler, nullptr, PendSV_Handler, SysTick_Handler},
                    {}};
  for (Handler& handler : table.external) handler = EdgesgdIrqHandler;
  return table;
}

}  // namespace edgesgd::platform::internal

// Placed at the start of flash by the linker script: the core reads the initial stack pointer
// and the reset vector from here. constinit: it must be data in flash, never built at run time.
extern "C" [[gnu::used,
             gnu::section(".isr_vector")]] constinit const edgesgd::platform::internal::VectorTable
    g_edgesgd_vector_table = edgesgd::platform::internal::MakeVectorTable();
