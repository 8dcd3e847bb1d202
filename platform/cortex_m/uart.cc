#include "uart.h"

#include "registers.h"

namespace edgesgd::platform::internal {
namespace {

// Register offsets and bits of the CMSDK APB UART (DDI0479C, 4.3).
constexpr std::uintptr_t kData = 0x00;
constexpr std::uintptr_t kState = 0x04;
constexpr std::uintptr_t kCtrl = 0x08;
constexpr std::uintptr_t kIntClear = 0x0C;  // INTSTATUS when read
constexpr std::uintptr_t kBaudDiv = 0x10;

constexpr std::uint32_t kStateTxFull = 1u << 0;
constexpr std::uint32_t kStateRxFull = 1u << 1;
constexpr std::uint32_t kStateTxOverrun = 1u << 2;  // write 1 to clear
constexpr std::uint32_t kStateRxOverrun = 1u << 3;  // write 1 to clear
constexpr std::uint32_t kCtrlTxEnable = 1u << 0;
constexpr std::uint32_t kCtrlRxEnable = 1u << 1;
constexpr std::uint32_t kIntAll = 0xFu;  // TX, RX, TX overrun, RX overrun
constexpr std::uint32_t kMinBaudDiv = 16;
constexpr std::uint32_t kMaxBaudDiv = 0xFFFFF;  // 20-bit field

}  // namespace

bool CmsdkUart::Enable(std::uint32_t baud, std::uint32_t clock_hz) {
  if (baud == 0) return false;
  const std::uint32_t divider = clock_hz / baud;
  if (divider < kMinBaudDiv || divider > kMaxBaudDiv) return false;
  Register(base_ + kCtrl) = 0;
  Register(base_ + kBaudDiv) = divider;
  Register(base_ + kState) = kStateTxOverrun | kStateRxOverrun;
  Register(base_ + kIntClear) = kIntAll;
  Register(base_ + kCtrl) = kCtrlTxEnable | kCtrlRxEnable;
  return true;
}

std::size_t CmsdkUart::ReadAvailable(std::span<std::byte> out) {
  std::size_t count = 0;
  while (count < out.size()) {
    const std::uint32_t state = Register(base_ + kState);
    if ((state & kStateRxOverrun) != 0) {
      ++counters_.rx_overruns;
      Register(base_ + kState) = kStateRxOverrun;
    }
    if ((state & kStateRxFull) == 0) break;
    out[count++] = static_cast<std::byte>(Register(base_ + kData) & 0xFFu);
  }
  counters_.bytes_read += count;
  return count;
}

std::size_t CmsdkUart::WriteSome(std::span<const std::byte> bytes) {
  std::size_t count = 0;
  while (count < bytes.size() && (Register(base_ + kState) & kStateTxFull) == 0) {
    Register(base_ + kData) = std::to_integer<std::uint32_t>(bytes[count++]);
  }
  counters_.bytes_written += count;
  return count;
}

}  // namespace edgesgd::platform::internal
