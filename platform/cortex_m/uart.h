#pragma once

// A polled driver for the CMSDK APB UART (Arm Cortex-M System Design Kit, DDI0479), the UART of
// the MPS2 FPGA images and of qemu's mps2 machines: a one-byte transmit and a one-byte receive
// buffer, 8N1, no FIFO, no flow control. Neither call blocks: ReadAvailable takes what has
// arrived, WriteSome hands over what the transmitter accepts, so a main loop can interleave the
// port with a protocol and its timers. Interrupts stay disabled in the UART.
//
// On real hardware a byte that arrives while the previous one is unread is lost (the overrun is
// counted); a device must poll at least once per byte time (87 us at 115200 baud). qemu's model
// instead holds the line back until the byte is read, so nothing is lost there.
//
// Internal to the cortex_m backend and the images that talk over a UART; not installed.

#include <cstddef>
#include <cstdint>
#include <span>

namespace edgesgd::platform::internal {

// Base addresses on the MPS2 AN385/AN386/AN500 images; qemu connects its i-th -serial to UART i.
inline constexpr std::uintptr_t kMps2Uart0Base = 0x40004000;
inline constexpr std::uintptr_t kMps2Uart1Base = 0x40005000;
// The UARTs' APB clock on those images (and in qemu's model of them).
inline constexpr std::uint32_t kMps2UartClockHz = 25'000'000;

struct UartCounters {
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t rx_overruns = 0;  // times a received byte was lost (the receive buffer was full)
};

class CmsdkUart {
 public:
  explicit constexpr CmsdkUart(std::uintptr_t base) : base_(base) {}

  // Programs the baud rate (clock_hz / baud, at least 16 as the UART requires), clears any
  // overrun left from before and enables the transmitter and receiver with interrupts off.
  // Returns false (and leaves the UART untouched) for a rate the divider cannot express.
  bool Enable(std::uint32_t baud, std::uint32_t clock_hz = kMps2UartClockHz);

  // Copies received bytes into `out` until it is full or nothing more has arrived; returns how
  // many. Notes a receive overrun in counters().
  std::size_t ReadAvailable(std::span<std::byte> out);

  // Hands bytes of `bytes` to the transmitter while it accepts them; returns how many it took
  // (0 while the previous byte is still going out).
  std::size_t WriteSome(std::span<const std::byte> bytes);

  const UartCounters& counters() const { return counters_; }

 private:
  std::uintptr_t base_;
  UartCounters counters_;
};

}  // namespace edgesgd::platform::internal
