#include "edgesgd/platform/clock.h"

#include "registers.h"

// Core clock in Hz, which both cycle sources count. 25 MHz is the M4 clock of the MPS2 FPGA
// images (AN386 among them) and of qemu's mps2 machines; for a board at another frequency set
// the cache variable EDGESGD_CORTEX_M_CORE_HZ (platform/cortex_m/backend.cmake).
#ifndef EDGESGD_CORTEX_M_CORE_HZ
#define EDGESGD_CORTEX_M_CORE_HZ 25000000
#endif

namespace edgesgd::platform {
namespace {

constexpr std::uint64_t kCoreHz = EDGESGD_CORTEX_M_CORE_HZ;
static_assert(kCoreHz > 0 && kCoreHz <= 10'000'000'000ull, "core clock out of range");

// The DWT cycle counter where the core has one. qemu does not model the DWT (its registers read
// as zero), nor do some Cortex-M parts fit one; there the 24-bit SysTick counter, free-running
// over the core clock without interrupts, stands in. The fallback takes SysTick over, so an
// application that needs SysTick for itself must run on a core with a DWT cycle counter.
enum class Source : std::uint8_t { kNone, kDwt, kSysTick };

Source g_source = Source::kNone;
std::uint32_t g_last_count = 0;  // counter value at the previous call
std::uint64_t g_cycles = 0;      // cycles since the first call

Source StartCounter() {
  using internal::Register;
  Register(internal::kDemcr) |= internal::kDemcrTrcena;
  if ((Register(internal::kDwtCtrl) & internal::kDwtCtrlNocyccnt) == 0) {
    Register(internal::kDwtCyccnt) = 0;
    Register(internal::kDwtCtrl) |= internal::kDwtCtrlCyccntena;
    // Reads back only where the counter exists (on qemu the write is ignored).
    if ((Register(internal::kDwtCtrl) & internal::kDwtCtrlCyccntena) != 0) return Source::kDwt;
  }
  Register(internal::kSystCsr) = 0;
  Register(internal::kSystRvr) = internal::kSystMaxReload;
  Register(internal::kSystCvr) = 0;  // any write clears the counter
  Register(internal::kSystCsr) = internal::kSystCsrEnable | internal::kSystCsrClkSource;
  return Source::kSysTick;
}

// The counter as an up-counter (SysTick counts down).
std::uint32_t ReadCounter(Source source) {
  if (source == Source::kDwt) return internal::Register(internal::kDwtCyccnt);
  return internal::kSystMaxReload - internal::Register(internal::kSystCvr);
}

}  // namespace

// Accumulates counter deltas into 64 bits, so wrap-around (every 2^32 cycles with the DWT: 172 s
// at 25 MHz; every 2^24 with SysTick: 0.67 s) is absorbed provided MonotonicNanos runs at least
// once per wrap period. A longer gap under-counts by whole periods but never goes backwards.
std::uint64_t MonotonicNanos() {
  // Interrupts off while the state is read and updated, so an interrupt handler calling this
  // cannot count the same cycles twice.
  std::uint32_t primask;
  asm volatile("mrs %0, primask\n\tcpsid i" : "=r"(primask)::"memory");
  if (g_source == Source::kNone) {
    g_source = StartCounter();
    g_last_count = ReadCounter(g_source);
  }
  const std::uint32_t mask = g_source == Source::kDwt ? 0xFFFFFFFFu : internal::kSystMaxReload;
  const std::uint32_t count = ReadCounter(g_source);
  g_cycles += (count - g_last_count) & mask;
  g_last_count = count;
  const std::uint64_t cycles = g_cycles;
  asm volatile("msr primask, %0" ::"r"(primask) : "memory");
  // Whole seconds and the remainder separately, so cycles * 1e9 cannot overflow.
  return cycles / kCoreHz * 1'000'000'000ull + cycles % kCoreHz * 1'000'000'000ull / kCoreHz;
}

}  // namespace edgesgd::platform
