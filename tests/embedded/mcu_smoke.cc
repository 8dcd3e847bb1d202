// Bare-metal smoke test of edgesgd::core on a Cortex-M4F, run under
// `qemu-system-arm -M mps2-an386` by run_mcu.sh. Proves that the core links without a heap, that
// startup (FPU, .data/.bss, static constructors) works, and that a few computations give the same
// answers as on the host. Prints "EDGESGD-MCU PASS" and returns 0, or names each failed check and
// returns 1.
//
// The host command line (qemu -append) selects a self-test of the failure paths instead:
//   --fault  a bus fault: must print "edgesgd: fault:" and exit 3, not hang
//   --fatal  a failed EDGESGD_CHECK: must print "edgesgd: fatal:" and exit 2

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/check.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/eigen.h"
#include "edgesgd/core/random.h"
#include "edgesgd/platform/clock.h"
#include "edgesgd/platform/log.h"
#include "format.h"
#include "semihosting.h"

namespace edgesgd {
namespace {

using platform::Log;
using platform::LogLevel;

int g_failures = 0;

void Expect(bool condition, const char* what, int line) {
  if (!condition) {
    ++g_failures;
    Log(LogLevel::kError, "FAIL line %d: %s", line, what);
  }
}
#define SMOKE_EXPECT(condition) Expect((condition), #condition, __LINE__)

// Inputs read through volatile so the computations happen on the target at run time instead of
// being folded by the (x86-64-independent, but still host-side) compiler.
template <typename T>
T Opaque(T value) {
  volatile T copy = value;
  return copy;
}

// A static constructor: fails the run if startup skipped the init arrays.
struct InitProbe {
  InitProbe() : value(Opaque(0x5EEDu)) {}
  unsigned value;
};
InitProbe g_init_probe;
// Must come from .data (copied from flash by startup), not .bss.
std::uint32_t g_data_probe = 0xC0FFEE;

void CheckStartup() {
  SMOKE_EXPECT(g_init_probe.value == 0x5EEDu);
  SMOKE_EXPECT(g_data_probe == 0xC0FFEE);
}

// Random123's known-answer vectors for philox4x32_10 (as in tests/core/random_test.cc).
void CheckPhilox() {
  const PhiloxBlock zero = Philox4x32_10({Opaque(0u), 0, 0, 0}, {0, 0});
  SMOKE_EXPECT((zero == PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  const std::uint32_t ones = Opaque(0xffffffffu);
  SMOKE_EXPECT((Philox4x32_10({ones, ones, ones, ones}, {ones, ones}) ==
                PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  SMOKE_EXPECT((Philox4x32_10({Opaque(0x243f6a88u), 0x85a308d3, 0x13198a2e, 0x03707344},
                              {0xa4093822, 0x299f31d0}) ==
                PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  CounterRng rng(Opaque(std::uint64_t{42}), 7, 1, StreamId(RandomPurpose::kBlockStart));
  const PhiloxBlock first =
      Philox4x32_10({7, 1, StreamId(RandomPurpose::kBlockStart), 0}, KeyFromSeed(42));
  for (std::uint32_t word : first) SMOKE_EXPECT(rng.NextU32() == word);
}

alignas(kArenaAlignment) std::byte g_arena_storage[256];

void CheckArena() {
  Arena arena(g_arena_storage);
  Result<std::span<float>> floats = arena.Allocate<float>(10);
  SMOKE_EXPECT(floats.ok());
  if (!floats.ok()) return;
  SMOKE_EXPECT(floats.value().size() == 10);
  SMOKE_EXPECT(reinterpret_cast<std::uintptr_t>(floats.value().data()) % kArenaAlignment == 0);
  SMOKE_EXPECT(floats.value()[9] == 0.0f);
  SMOKE_EXPECT(arena.used_bytes() == ArenaBytesFor<float>(10));
  SMOKE_EXPECT(arena.Allocate<std::uint32_t>(1000).status() == Status::ResourceExhausted());
  arena.Seal();
  SMOKE_EXPECT(arena.Allocate<std::uint32_t>(1).status() == Status::FailedPrecondition());
}

// The identity codec through a registry of the one codec the image uses, with buffers sized at
// compile time from the codec's exact payload shape: the pattern an MCU application uses.
constexpr std::size_t kDimension = 8;
constexpr CodecParams kIdentityParams = IdentityParams{};
constexpr auto kIdentityOps = MakeCodecOps<IdentityCodec>();
constexpr CodecRegistry kIdentityOnly(kIdentityOps);
constexpr std::size_t kIdentityBytes =
    MaxEncodedBytes(kIdentityParams, TensorLayout::Single(kDimension).value());
static_assert(kIdentityBytes == 4 * kDimension);

void CheckIdentityCodec() {
  const Result<TensorLayout> layout = TensorLayout::Single(Opaque(kDimension));
  SMOKE_EXPECT(layout.ok());
  if (!layout.ok()) return;
  const Result<PayloadShape> shape = EncodedShape(kIdentityParams, layout.value());
  SMOKE_EXPECT(shape.ok() && shape.value().values == kDimension);

  std::array<float, kDimension> input;
  for (std::size_t i = 0; i < kDimension; ++i) input[i] = Opaque(0.25f * static_cast<float>(i));
  input[3] = -1.5f;
  std::array<float, kIdentityBytes / sizeof(float)> values{};
  const PayloadSpans out{.indices = {}, .values = values, .words = {}, .scales = {}};
  const CodecContext context{.seed = 7, .round = 3, .worker = 1};
  SMOKE_EXPECT(kIdentityOnly.Encode(kIdentityParams, layout.value(), context, input, out, {}).ok());

  std::array<float, kDimension> accumulator;
  accumulator.fill(1.0f);
  const PayloadView payload(out, shape.value());
  SMOKE_EXPECT(kIdentityOnly
                   .DecodeAdd(kIdentityParams, layout.value(), context, payload, 0.5f,
                              accumulator, {})
                   .ok());
  // Exact: every value is a small multiple of a power of two.
  for (std::size_t i = 0; i < kDimension; ++i) {
    SMOKE_EXPECT(accumulator[i] == 1.0f + 0.5f * input[i]);
  }
  // A truncated payload is bad data, so a Status, never a crash.
  const PayloadView truncated({}, std::span<const float>(values).first(kDimension - 1), {}, {});
  SMOKE_EXPECT(kIdentityOnly
                   .DecodeAdd(kIdentityParams, layout.value(), context, truncated, 1.0f,
                              accumulator, {})
                   .code() == StatusCode::kDataLoss);
}

// Eigen through a Map over static memory with EIGEN_NO_MALLOC: also exercises the FPU.
void CheckEigen() {
  std::array<float, kDimension> data;
  for (std::size_t i = 0; i < kDimension; ++i) data[i] = Opaque(static_cast<float>(i + 1));
  const ConstVectorMap x(data.data(), static_cast<Eigen::Index>(data.size()));
  SMOKE_EXPECT(x.dot(x) == 204.0f);  // 1 + 4 + ... + 64
  SMOKE_EXPECT(x.maxCoeff() == 8.0f);
}

// The log backend's formatter (it replaces newlib's vsnprintf, which links malloc).
void CheckFormat() {
  char text[64];
  const std::size_t length =
      platform::internal::Format(text, "%s=%u %.2f|%5d|%-4x|%03d|%g", "k", Opaque(42u),
                                 static_cast<double>(Opaque(3.14159f)), -7, 0xabu, 5, 0.0001);
  const std::string_view expected = "k=42 3.14|   -7|ab  |005|0.0001";
  SMOKE_EXPECT(std::string_view(text, length) == expected);
  SMOKE_EXPECT(platform::internal::Format(std::span<char>(text, 4), "%s", "truncated") == 3);
}

void CheckClock(std::uint64_t start_ns) {
  const std::uint64_t now_ns = platform::MonotonicNanos();
  SMOKE_EXPECT(now_ns >= start_ns);
  Log(LogLevel::kInfo, "checks took %llu ns (MonotonicNanos)",
      static_cast<unsigned long long>(now_ns - start_ns));
}

bool HasArgument(std::string_view command_line, std::string_view argument) {
  return command_line.find(argument) != std::string_view::npos;
}

// The build compiles the codecs EDGESGD_CODECS names (the Cortex-M default leaves qsgd out): the
// others keep their ids, but no name, id or Welcome words make their parameters.
void CheckCodecsLeftOutOfTheBuild() {
  static_assert(kCodecInBuild<TopKCodec> && !kCodecInBuild<QsgdCodec>);
  static_assert(kBuiltCodecCount < kCodecCount);
  SMOKE_EXPECT(DefaultCodecParams("top_k").ok());
  SMOKE_EXPECT(DefaultCodecParams(QsgdCodec::kName).status() == Status::NotFound());
  SMOKE_EXPECT(DefaultCodecParams(Opaque(kCodecId<QsgdCodec>)).status() == Status::NotFound());
  const std::array<std::uint32_t, 8> words{};
  SMOKE_EXPECT(ParamsFromWords(Opaque(kCodecId<QsgdCodec>), words).status() == Status::NotFound());
  SMOKE_EXPECT(CodecName(Opaque(kCodecId<QsgdCodec>)) == "unknown");
}

int Run() {
  char command_line_buffer[128];
  const std::string_view command_line(
      command_line_buffer, platform::internal::SemihostingCommandLine(command_line_buffer));
  if (HasArgument(command_line, "--fault")) {
    Log(LogLevel::kInfo, "reading unmapped memory: expect a fault report and exit code 3");
    return static_cast<int>(*reinterpret_cast<volatile std::uint32_t*>(0xF0000000u));
  }
  if (HasArgument(command_line, "--fatal")) {
    Log(LogLevel::kInfo, "failing a CHECK: expect a fatal report and exit code 2");
    EDGESGD_CHECK(Opaque(1) == 2);
  }

  if (HasArgument(command_line, "--left-out-codec")) {
    Log(LogLevel::kInfo, "visiting qsgd, which this build leaves out: expect exit code 2");
    const CodecParams qsgd = QsgdParams{};
    const Result<TensorLayout> layout = TensorLayout::Single(Opaque(std::size_t{8}));
    return static_cast<int>(CodecScratchBytes(qsgd, layout.value()));
  }

  const std::uint64_t start_ns = platform::MonotonicNanos();
  CheckStartup();
  CheckPhilox();
  CheckArena();
  CheckIdentityCodec();
  CheckCodecsLeftOutOfTheBuild();
  CheckEigen();
  CheckFormat();
  CheckClock(start_ns);

  if (g_failures != 0) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: %d check(s) failed", g_failures);
    return 1;
  }
  // Written raw, without the log prefix, as the marker run_mcu.sh looks for.
  platform::internal::ReportPass();
  return 0;
}

}  // namespace
}  // namespace edgesgd

int main() { return edgesgd::Run(); }
