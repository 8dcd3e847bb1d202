// Fuzz target: the reliable serial link (edgesgd/serial/link.h) driven by a script from the
// input — bytes arriving from the port, time passing, Sends, partial writes, restarts — against
// a started link. Invariants: Receive always makes progress; a delivered payload fits the
// maximum; everything the link writes is whole, valid frames (a fresh decoder takes each one);
// the link never wants a wake-up in the past it has already been given; Send is refused exactly
// when CanSend says so.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgesgd/serial/link.h"
#include "fuzz/fuzz_input.h"

namespace {

constexpr std::size_t kMaxPayload = 64;
constexpr edgesgd::serial::TimeNs kMs = 1'000'000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using edgesgd::serial::FrameDecoder;
  using edgesgd::serial::Link;
  edgesgd::fuzz::FuzzInput input(data, size);
  std::vector<std::byte> memory(Link::BufferBytes(kMaxPayload));
  Link link;
  EDGESGD_FUZZ_CHECK(link.Init(memory, kMaxPayload, {.retransmit_ns = 5 * kMs, .max_attempts = 4})
                         .ok(),
                     "the link initialises");
  // What the link writes, checked frame by frame with a decoder of its own.
  std::vector<std::byte> check_buffer(edgesgd::serial::MaxEncodedBytes(kMaxPayload + 1));
  FrameDecoder written_frames(check_buffer);
  edgesgd::serial::TimeNs now = 0;
  link.Start(now, input.U32());
  std::vector<std::byte> payload(kMaxPayload + 1);
  while (input.remaining() > 0) {
    switch (input.U8() % 5) {
      case 0: {  // bytes from the port
        std::span<const std::byte> rest = input.Bytes(input.U8());
        while (!rest.empty()) {
          const FrameDecoder::Step step = link.Receive(rest);
          EDGESGD_FUZZ_CHECK(step.consumed > 0 && step.consumed <= rest.size(),
                             "every Receive makes progress within its input");
          EDGESGD_FUZZ_CHECK(!step.delivered || step.frame.size() <= kMaxPayload,
                             "a delivered payload fits the maximum");
          rest = rest.subspan(step.consumed);
        }
        break;
      }
      case 1:  // time passes
        now += input.U8() * kMs;
        if (link.NextWakeup() <= now) link.OnTimer(now);
        EDGESGD_FUZZ_CHECK(link.NextWakeup() > now, "a timer served is not due again at once");
        break;
      case 2: {  // the application sends
        const std::size_t length = input.U8() % (kMaxPayload + 1);
        std::fill(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(length),
                  std::byte{static_cast<std::uint8_t>(length)});
        const bool could = link.CanSend();
        const edgesgd::Status sent =
            link.Send(std::span<const std::byte>(payload).first(length), now);
        EDGESGD_FUZZ_CHECK(sent.ok() == could, "Send takes a frame exactly when CanSend");
        break;
      }
      case 3: {  // the port takes some bytes
        const std::span<const std::byte> out = link.Output();
        const std::size_t n = std::min<std::size_t>(out.size(), input.U8());
        std::span<const std::byte> taken = out.first(n);
        while (!taken.empty()) {
          const FrameDecoder::Step step = written_frames.Push(taken);
          taken = taken.subspan(step.consumed);
        }
        link.Written(n);
        break;
      }
      default:  // a restart of this end
        link.Start(now, input.U32());
        break;
    }
  }
  EDGESGD_FUZZ_CHECK(written_frames.counters().rejected() == 0,
                     "everything the link writes is a valid frame");
  return 0;
}
