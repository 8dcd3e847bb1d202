// Steady-state encoding and decoding never touch the heap: this binary replaces the global
// allocation functions with counting ones and requires zero calls across many rounds.

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <vector>

#include "core/test_util.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"

namespace {
std::atomic<std::size_t> g_heap_allocations{0};

void* CountedAllocate(std::size_t size) {
  g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
  void* pointer = std::malloc(size == 0 ? 1 : size);
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}
}  // namespace

// Replacements for the whole wire_tests binary. malloc/free underneath, so AddressSanitizer
// still pairs every allocation with its release.
void* operator new(std::size_t size) { return CountedAllocate(size); }
void* operator new[](std::size_t size) { return CountedAllocate(size); }
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete[](void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { std::free(pointer); }

namespace edgesgd::wire {
namespace {

TEST(WireNoHeap, SteadyStateRoundsDoNotAllocate) {
  const std::uint64_t sizes[] = {300, 45, 1};
  const TensorLayout layout = TensorLayout::FromSizes(sizes).value();
  std::vector<float> input(layout.dimension());
  for (std::size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<float>(i % 11) - 5.0f;
  }
  std::vector<float> accumulator(layout.dimension(), 0.0f);
  std::vector<std::uint64_t> scratch_words(8192);
  std::vector<std::uint64_t> builder_words(8192);
  const std::span<std::byte> scratch = std::as_writable_bytes(std::span(scratch_words));
  FrameBuilder builder(std::as_writable_bytes(std::span(builder_words)));
  WelcomeInfo welcome;
  welcome.layout = layout;
  welcome.codec = SignParams{};
  const std::vector<CodecParams> codecs = test_util::EveryCodec(
      {.k_ratio = 0.05f, .block_ratio = 16, .qsgd_levels = 15, .qsgd_bucket = 64});

  // Counted from here on: setup above may allocate (test scaffolding), the rounds may not.
  const std::size_t before = g_heap_allocations.load();
  int failures = 0;
  for (std::uint32_t round = 0; round < 100; ++round) {
    for (const CodecParams& params : codecs) {
      const CodecContext context{.seed = 3, .round = round, .worker = 1};
      const auto frame = builder.EncodePayloadFrame(
          {.sender = 1, .round = round, .sequence = round * 10 + CodecIdOf(params)},
          PayloadMessage::Update({.worker = 1, .samples = 64}), AllCodecs(), params, layout,
          context, input, scratch);
      if (!frame.ok()) {
        ++failures;
        continue;
      }
      const auto view = DecodeFrame(*frame);
      if (!view.ok()) {
        ++failures;
        continue;
      }
      const EncodedPayload& payload = view->payload;
      const Result<CodecParams> decode_params =
          ParamsForPayload(params, payload.codec, payload.layout, payload.header);
      if (!decode_params.ok() || !AllCodecs()
                                      .DecodeAdd(decode_params.value(), layout, context,
                                                 payload.view, 0.5f, accumulator, scratch)
                                      .ok()) {
        ++failures;
      }
    }
    const auto heartbeat = builder.EncodeHeartbeat({.sender = 1}, {round, round});
    failures += (heartbeat.ok() && DecodeFrame(*heartbeat).ok()) ? 0 : 1;
    const auto welcome_frame = builder.EncodeWelcome({.sender = 0}, welcome);
    failures += (welcome_frame.ok() && DecodeFrame(*welcome_frame).ok()) ? 0 : 1;
    const auto error = builder.EncodeError({.sender = 0}, {StatusCode::kUnavailable, "gone"});
    failures += (error.ok() && DecodeFrame(*error).ok()) ? 0 : 1;
  }
  const std::size_t allocations = g_heap_allocations.load() - before;
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(allocations, 0u);
}

}  // namespace
}  // namespace edgesgd::wire
