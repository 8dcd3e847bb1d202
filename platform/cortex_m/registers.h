#pragma once

// Memory-mapped registers of the ARMv7-M System Control Space used by the cortex_m backend
// (ARMv7-M Architecture Reference Manual, B3.2 and C1.8). Internal to the backend.

#include <cstdint>

namespace edgesgd::platform::internal {

inline volatile std::uint32_t& Register(std::uintptr_t address) {
  return *reinterpret_cast<volatile std::uint32_t*>(address);
}

inline constexpr std::uintptr_t kCpacr = 0xE000ED88;  // coprocessor access (FPU = CP10, CP11)
inline constexpr std::uintptr_t kCfsr = 0xE000ED28;   // configurable fault status
inline constexpr std::uintptr_t kHfsr = 0xE000ED2C;   // HardFault status
inline constexpr std::uintptr_t kMmfar = 0xE000ED34;  // MemManage fault address
inline constexpr std::uintptr_t kBfar = 0xE000ED38;   // BusFault address
inline constexpr std::uintptr_t kDemcr = 0xE000EDFC;  // debug exception and monitor control
inline constexpr std::uintptr_t kDwtCtrl = 0xE0001000;
inline constexpr std::uintptr_t kDwtCyccnt = 0xE0001004;

inline constexpr std::uintptr_t kSystCsr = 0xE000E010;  // SysTick control and status
inline constexpr std::uintptr_t kSystRvr = 0xE000E014;  // SysTick reload value
inline constexpr std::uintptr_t kSystCvr = 0xE000E018;  // SysTick current value (counts down)

inline constexpr std::uint32_t kDemcrTrcena = 1u << 24;      // powers the DWT
inline constexpr std::uint32_t kDwtCtrlCyccntena = 1u << 0;  // starts the cycle counter
inline constexpr std::uint32_t kDwtCtrlNocyccnt = 1u << 25;  // set: no cycle counter fitted
inline constexpr std::uint32_t kSystCsrEnable = 1u << 0;
inline constexpr std::uint32_t kSystCsrClkSource = 1u << 2;  // count the core clock
inline constexpr std::uint32_t kSystMaxReload = 0x00FFFFFF;  // 24-bit counter

}  // namespace edgesgd::platform::internal
