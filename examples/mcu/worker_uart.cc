// A federated worker on the microcontroller: one protocol::WorkerSession whose server is reached
// over UART0 (the CMSDK APB UART of the mps2-an386) through serial::SessionLink and a gateway on
// the far end of the line (`edgesgd bridge`), which relays its frames to an `edgesgd server`.
// The worker trains softmax regression on Fashion-MNIST (784 features, 10 classes, 7,850
// parameters: the model of `--task softmax`) on a shard of 28x28 images in flash, with the codec
// and error feedback the server's Welcome names among those registered here (top_k, rand_k,
// random_block, sign). When the server ends the run (its Leave) the image prints a
// summary and "EDGESGD-MCU PASS", and exits through semihosting.
//
// Running it on qemu (7.2), with the UART on a TCP port the gateway connects to (one command):
//
//   qemu-system-arm -M mps2-an386 -nographic -monitor none
//       -semihosting-config enable=on,target=native
//       -serial tcp:127.0.0.1:PORT,server=on,wait=off,nodelay=on
//       -kernel build/cortex-m4/examples/mcu/edgesgd_mcu_worker_uart.elf -append "--id 5"
//
// The first -serial is UART0; with it given, -nographic leaves the serial port alone and
// `-monitor none` keeps the monitor off stdio, where the semihosting console prints (run it with
// stdin from /dev/null, as run_mcu.sh does). wait=off boots at once; bytes written before the
// gateway connects are dropped, and the link sends them again. nodelay=on sends the device's
// bytes at once instead of holding each frame ~40 ms for the gateway's TCP acknowledgement.
// `-append "--id N --key HEX"` sets the device id (default 1; the server must expect it,
// 1..--workers) and its pre-shared key, 64 hex digits: the device's line in the key file the
// server and the bridge load. With a key the line is authenticated (serial/session_link.h) and
// the bridge must hold the same key (`--keys FILE`); without one it carries plain frames, for a
// bridge run with --insecure. On a real board the key would be provisioned into flash; the
// emulated board takes it from its command line. The exit status is 0 after a completed run,
// 1 otherwise.
//
// qemu's UART model hands the guest one byte per I/O loop pass, roughly 15-30 KiB/s, so a dense
// ModelBroadcast (31.5 KB) spends 1-2.5 s on the line: the gateway's link must wait longer than
// that before sending a frame again, or its copies queue up in the socket ahead of every later
// frame. `edgesgd bridge` adds each frame's time at --serial-bytes-per-s (11,520 by default,
// 115200 baud) to its wait, which covers it.
//
// The link's nonce and the authentication's boot nonce must differ from every previous boot's:
// a repeated one would let a recorded answer from the gateway be replayed. The emulated board has
// no random number generator, so its launcher stands in for one: `--entropy HEX` (32 bytes, fresh
// per boot: the launcher draws them from the host's random source) seeds both, mixed with the
// device id and the clock when the gateway is first heard. Without it the image falls back to
// the clock alone, which repeats under qemu -icount (every boot then runs the same instructions),
// and says so. A real board takes the entropy from its TRNG (or a boot counter kept in flash).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "edgesgd/auth/connection_auth.h"
#include "edgesgd/auth/key_ring.h"
#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/data/dataset.h"
#include "edgesgd/core/model/softmax_regression.h"
#include "edgesgd/core/random.h"
#include "edgesgd/platform/clock.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/serial/session_link.h"
#include "fashion_shard.h"
#include "memory_usage.h"
#include "semihosting.h"
#include "softmax_constants.h"
#include "uart.h"
#include "verdict.h"

namespace edgesgd::mcu {
namespace {

using platform::Log;
using platform::LogLevel;
using protocol::RunConfig;
using protocol::TimeNs;
using protocol::WorkerSession;

constexpr ModelSpec kSpec = SoftmaxRegressionSpec(kShardFeatures, kShardClasses);
// As a constant, so the buffers below are sized at compile time; a run whose Welcome names
// another layout is refused by the gradient callback.
constexpr TensorLayout kLayout = SoftmaxRegressionLayout(kSpec);

// The codecs this device runs; the server refuses a run with any other (the Join lists them).
constexpr auto kCodecOps = MakeCodecOps<TopKCodec, RandKCodec, RandomBlockCodec, SignCodec>();
constexpr CodecRegistry kCodecs(kCodecOps);

// The runs the device is sized for: each registered codec at a generous ratio (k = 10% of the
// coordinates, blocks of a tenth) under error feedback with every buffer it can hold (momentum,
// DEF's local model and a delta for several local steps), with either downlink. The Join
// advertises what the arena holds, so the server refuses a run beyond it before it starts.
constexpr RunConfig EnvelopeConfig(const CodecParams& codec, protocol::DownlinkKind downlink) {
  RunConfig config;
  config.layout = kLayout;
  config.codec = codec;
  config.feedback = FeedbackParams{.kind = FeedbackKind::kDef,
                                   .detach = 0.3f,
                                   .learning_rate = 0.05f,
                                   .momentum = 0.9f,
                                   .weight_decay = 0.0f,
                                   .local_steps = 2};
  config.downlink = downlink;
  return config;
}
constexpr CodecParams kEnvelopeCodecs[] = {TopKParams{.k_ratio = 0.1f},
                                           RandKParams{.k_ratio = 0.1f},
                                           RandomBlockParams{.block_ratio = 10}, SignParams{}};

// The largest of f(config) over the envelope, or 0 if any configuration cannot be sized.
template <typename F>
constexpr std::size_t EnvelopeMax(F f) {
  std::size_t most = 0;
  for (const CodecParams& codec : kEnvelopeCodecs) {
    for (const auto downlink :
         {protocol::DownlinkKind::kModel, protocol::DownlinkKind::kAggregate}) {
      const std::size_t bytes = f(EnvelopeConfig(codec, downlink));
      if (bytes == 0) return 0;
      most = std::max(most, bytes);
    }
  }
  return most;
}

constexpr std::size_t kWorkerArenaBytes =
    EnvelopeMax([](const RunConfig& config) { return WorkerSession::ArenaBytes(config); });
static_assert(kWorkerArenaBytes > 0, "an envelope configuration is invalid");
// The link carries whole session frames: the dense ModelBroadcast (7,850 floats) is the largest.
constexpr std::size_t kMaxFrameBytes = EnvelopeMax([](const RunConfig& config) {
  return std::max(protocol::BroadcastFrameBytes(config), protocol::UpdateFrameBytes(config));
});
static_assert(kMaxFrameBytes > 0, "an envelope configuration is invalid");
constexpr std::size_t kLinkBytes = serial::SessionLink::BufferBytes(kMaxFrameBytes);

constexpr std::uint32_t kBaud = 115200;
// A frame is sent again if unacknowledged this long after it was queued. The gateway's
// acknowledgement may wait behind a whole broadcast it is writing (31.5 KB: 2.7 s at 115200
// baud), so a shorter time would mostly re-send into a busy line; a second keeps recovery from a
// damaged frame quick, and exceeds the time the largest update takes to go out (asserted).
constexpr serial::LinkOptions kLinkOptions{.retransmit_ns = 1'000'000'000, .max_attempts = 25};
constexpr std::size_t kMaxUpdateBytes =
    EnvelopeMax([](const RunConfig& config) { return protocol::UpdateFrameBytes(config); });
static_assert(serial::MaxEncodedBytes(kMaxUpdateBytes + 1) * 10 * 1'000'000'000ull / kBaud <
                  kLinkOptions.retransmit_ns,
              "the largest update takes too long on the line for the retransmission time");
constexpr std::uint32_t kDefaultDeviceId = 1;
constexpr TimeNs kJoinRetryNs = 1'000'000'000;
// Well inside the server's default idle timeout (30 s), even behind a few large frames.
constexpr TimeNs kHeartbeatNs = 5'000'000'000;
// How long the link may take to deliver the session's last frames once it finished.
constexpr TimeNs kDrainNs = 10'000'000'000;
constexpr std::size_t kFlashBudgetBytes = 64 * 1024;  // beyond the shard

// Mini-batch rows converted to floats at a time. A larger batch is computed in chunks whose
// gradients are averaged, so any --batch the server picks works in this much RAM.
constexpr std::size_t kChunkRows = 16;

alignas(kArenaAlignment) std::array<std::byte, kWorkerArenaBytes> g_worker_arena;
std::array<std::byte, kLinkBytes> g_link_memory;
std::array<float, kChunkRows * kShardFeatures> g_batch_features;
std::array<std::uint8_t, kChunkRows> g_batch_labels;
std::array<float, kLayout.dimension()> g_chunk_gradient;
std::array<float, SoftmaxRegression::ScratchFloats(kSpec)> g_model_scratch;
// Constructed at start-up, not statically initialised: their mostly non-zero initial state would
// otherwise be stored in flash as .data.
std::optional<WorkerSession> g_worker;
std::optional<serial::SessionLink> g_link;
std::optional<auth::ConnectionAuth> g_line_auth;
auth::FixedKeyRing<1> g_key;

// The loss gradient of a mini-batch of the shard at `point`: batch t of round r is drawn with
// the conventional private stream CounterRng(seed, r, t, kDataSampling / worker index), the same
// draws a host worker (`edgesgd worker`) makes on its shard.
Status ShardGradient(void*, std::span<const float> point, std::uint32_t round,
                     std::uint32_t local_step, std::span<float> gradient) {
  const WorkerSession& worker = *g_worker;
  const RunConfig& config = worker.config();
  if (config.layout != kLayout) {
    return Status::InvalidArgument("the run's model is not 784x10 softmax regression");
  }
  CounterRng rng(config.seed, round, local_step,
                 StreamId(RandomPurpose::kDataSampling, worker.id() - 1));
  const BatchBuffers buffers{g_batch_features, g_batch_labels, {}};
  const std::size_t batch = config.batch;
  for (std::size_t done = 0; done < batch;) {
    const std::size_t rows = std::min(kChunkRows, batch - done);
    // The whole batch in one chunk goes straight into `gradient`; otherwise each chunk's mean
    // is weighted by its share of the batch.
    const bool whole = rows == batch;
    const std::span<float> target = whole ? gradient : std::span<float>(g_chunk_gradient);
    EDGESGD_TRY_ASSIGN(const DatasetView view, SampleBatch(kFashionShard, {}, rows, rng, buffers));
    EDGESGD_TRY_ASSIGN(const float loss, SoftmaxRegression::LossAndGradient(
                                             kSpec, point, view, target, g_model_scratch));
    if (!std::isfinite(loss)) return Status::DataLoss("the loss is not finite");
    if (!whole) {
      const float weight = static_cast<float>(rows) / static_cast<float>(batch);
      for (std::size_t i = 0; i < gradient.size(); ++i) {
        gradient[i] = (done == 0 ? 0.0f : gradient[i]) + weight * target[i];
      }
    }
    done += rows;
    // Keeps the clock's 24-bit SysTick fallback from wrapping unseen during a long batch.
    (void)platform::MonotonicNanos();
  }
  return Status::Ok();
}

// The semihosting command line: "--id N" (or "--id=N"), "--key HEX" and "--entropy HEX".
struct CommandLine {
  std::uint32_t device_id = kDefaultDeviceId;  // 0: malformed
  bool has_key = false;
  bool key_valid = false;
  std::array<std::byte, auth::kKeyBytes> key{};
  bool has_entropy = false;
  bool entropy_valid = false;
  std::array<std::byte, auth::kKeyBytes> entropy{};
};

// The text after `flag` and its separator, or null without the flag. A plain scan: strstr would
// link a kilobyte of newlib for this one search.
const char* FlagValue(std::string_view text, std::string_view flag) {
  const std::size_t at = text.find(flag);
  if (at == std::string_view::npos) return nullptr;
  const char* value = text.data() + at + flag.size();
  while (*value == ' ' || *value == '=') ++value;
  return value;
}

CommandLine ReadCommandLine() {
  CommandLine result;
  // Room for the -kernel path (qemu passes it first) and every flag with its 64 hex digits.
  std::array<char, 512> line{};
  if (platform::internal::SemihostingCommandLine(line) == 0) return result;
  const std::string_view text(line.data());
  if (const char* at = FlagValue(text, "--id"); at != nullptr) {
    std::uint64_t id = 0;
    const char* digit = at;
    for (; *digit >= '0' && *digit <= '9' && id < wire::kUnassignedDevice; ++digit) {
      id = id * 10 + static_cast<std::uint64_t>(*digit - '0');
    }
    const bool valid =
        digit != at && (*digit == '\0' || *digit == ' ') && id >= 1 && id < wire::kUnassignedDevice;
    result.device_id = valid ? static_cast<std::uint32_t>(id) : 0;
  }
  // 64 hex digits up to the next blank: a key, or the launcher's entropy.
  const auto read_hex = [&text](std::string_view flag, bool& given,
                                std::array<std::byte, auth::kKeyBytes>& out) {
    const char* at = FlagValue(text, flag);
    if (at == nullptr) return true;
    std::size_t length = 0;
    while (at[length] != '\0' && at[length] != ' ') ++length;
    given = true;
    return auth::DecodeKeyHex(std::string_view(at, length), out);
  };
  result.key_valid = read_hex("--key", result.has_key, result.key);
  result.entropy_valid = read_hex("--entropy", result.has_entropy, result.entropy);
  return result;
}

// Nonces that differ between boots: the launcher's entropy (all zero without it), the device id
// and the clock at the first received byte, mixed so that neighbouring counts give unrelated
// nonces. The first is the link's; the authentication's 16 bytes follow.
struct BootNonces {
  std::uint32_t link = 0;
  std::array<std::byte, auth::kNonceBytes> auth{};
};

BootNonces DrawBootNonces(const std::array<std::byte, auth::kKeyBytes>& entropy,
                          std::uint32_t device_id, TimeNs first_byte_ns) {
  std::uint64_t state = (std::uint64_t{device_id} << 32) ^ first_byte_ns;
  for (std::size_t i = 0; i < entropy.size(); i += 8) {
    std::uint64_t word = 0;
    for (std::size_t b = 0; b < 8; ++b)
      word |= std::uint64_t{std::to_integer<std::uint8_t>(entropy[i + b])} << (8 * b);
    state = SplitMix64(state) ^ word;
  }
  BootNonces nonces;
  nonces.link = static_cast<std::uint32_t>(SplitMix64(state));
  for (std::size_t i = 0; i < nonces.auth.size(); i += 8) {
    const std::uint64_t word = SplitMix64(state);
    for (std::size_t b = 0; b < 8; ++b) {
      nonces.auth[i + b] = static_cast<std::byte>((word >> (8 * b)) & 0xFFu);
    }
  }
  return nonces;
}

const char* LeaveReasonName(wire::LeaveReason reason) {
  switch (reason) {
    case wire::LeaveReason::kDone:
      return "done";
    case wire::LeaveReason::kShutdown:
      return "shutdown";
    case wire::LeaveReason::kFailure:
      return "failure";
    case wire::LeaveReason::kLowPower:
      return "low power";
    case wire::LeaveReason::kRefusedRun:
      return "refused run";
  }
  return "unknown";
}

unsigned long long Count(std::uint64_t value) { return static_cast<unsigned long long>(value); }

void LogSummary(const platform::internal::CmsdkUart& uart, TimeNs elapsed_ns) {
  const WorkerSession& worker = *g_worker;
  const protocol::WorkerCounters& w = worker.counters();
  const serial::SessionLinkCounters& s = g_link->counters();
  const serial::LinkCounters& l = g_link->link().counters();
  const serial::DecoderCounters& d = g_link->link().decoder_counters();
  const platform::internal::UartCounters& u = uart.counters();
  Log(LogLevel::kInfo, "worker %u: rounds trained %llu (updates re-sent %llu), %.1f s",
      static_cast<unsigned>(worker.id()), Count(w.updates_sent), Count(w.updates_resent),
      static_cast<double>(elapsed_ns) * 1e-9);
  Log(LogLevel::kInfo,
      "session: frames received %llu, sent %llu; joins %llu, heartbeats %llu, resyncs %llu; "
      "malformed %llu, unexpected %llu, stale %llu, bad payloads %llu, gradient errors %llu, "
      "encode errors %llu",
      Count(w.frames_received), Count(w.frames_sent), Count(w.joins_sent), Count(w.heartbeats_sent),
      Count(w.resyncs), Count(w.malformed), Count(w.unexpected), Count(w.stale_broadcasts),
      Count(w.bad_payloads), Count(w.gradient_errors), Count(w.encode_errors));
  Log(LogLevel::kInfo,
      "link: frames sent %llu, received %llu, too large %llu, misrouted %llu; link restarts "
      "%llu, peer restarts %llu, failed authentication %llu; retransmissions %llu, duplicates "
      "%llu, abandoned %llu, unknown %llu",
      Count(s.frames_sent), Count(s.frames_received), Count(s.frames_too_large),
      Count(s.frames_misrouted), Count(s.link_restarts), Count(s.peer_restarts),
      Count(s.auth_rejected), Count(l.retransmissions), Count(l.duplicates), Count(l.abandoned),
      Count(l.unknown));
  Log(LogLevel::kInfo,
      "decoder: frames %llu, rejected %llu (crc %llu, stuffing %llu, short %llu, oversized "
      "%llu), bytes dropped %llu",
      Count(d.frames), Count(d.rejected()), Count(d.crc_errors), Count(d.stuffing_errors),
      Count(d.short_frames), Count(d.oversized), Count(d.bytes_dropped));
  Log(LogLevel::kInfo, "uart: bytes read %llu, written %llu, rx overruns %llu", Count(u.bytes_read),
      Count(u.bytes_written), Count(u.rx_overruns));
}

int Run() {
  CommandLine command = ReadCommandLine();
  const std::uint32_t device_id = command.device_id;
  if (device_id == 0) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: --id takes a device id from 1");
    return 1;
  }
  if (command.has_key && !command.key_valid) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: --key takes 64 hex digits");
    return 1;
  }
  if (command.has_entropy && !command.entropy_valid) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: --entropy takes 64 hex digits, not all zero");
    return 1;
  }
  if (!command.has_entropy) {
    Log(LogLevel::kWarning,
        "no --entropy: boot nonces from the clock alone (they repeat under "
        "qemu -icount)");
  }
  platform::internal::CmsdkUart uart(platform::internal::kMps2Uart0Base);
  if (!uart.Enable(kBaud)) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: UART0 cannot run at %u baud",
        static_cast<unsigned>(kBaud));
    return 1;
  }
  Arena arena(g_worker_arena);
  WorkerSession& worker = g_worker.emplace();
  Status status = worker.Init(arena, {.device_id = device_id,
                                      .gradient = &ShardGradient,
                                      .codecs = &kCodecs,
                                      .join_retry_ns = kJoinRetryNs,
                                      .heartbeat_interval_ns = kHeartbeatNs});
  serial::SessionLink& link = g_link.emplace();
  if (status.ok()) {
    status = link.Init(g_link_memory, kMaxFrameBytes, worker, protocol::kServerPeer, kLinkOptions);
  }
  if (status.ok() && command.has_key) status = g_key.Add(device_id, command.key);
  auth::Zeroize(command.key);
  if (status.ok() && command.has_key) status = g_line_auth.emplace().Init(kMaxFrameBytes);
  if (!status.ok()) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: set-up: %s", status.reason());
    return 1;
  }
  Log(LogLevel::kInfo,
      "worker %u: shard of %zu images, arena %zu B, frames up to %zu B; waiting on UART0",
      static_cast<unsigned>(device_id), kFashionShard.num_samples, kWorkerArenaBytes,
      kMaxFrameBytes);

  std::array<std::byte, 64> received;
  std::size_t count = 0;
  while ((count = uart.ReadAvailable(received)) == 0) (void)platform::MonotonicNanos();
  const TimeNs start = platform::MonotonicNanos();
  BootNonces nonces = DrawBootNonces(command.entropy, device_id, start);
  auth::Zeroize(command.entropy);
  if (g_line_auth) {
    status = link.EnableAuthentication(*g_line_auth, g_key, device_id, nonces.auth);
    auth::Zeroize(nonces.auth);
    if (!status.ok()) {
      Log(LogLevel::kError, "EDGESGD-MCU FAIL: authentication: %s", status.reason());
      return 1;
    }
  }
  Log(LogLevel::kInfo, "gateway heard; link nonce 0x%08x; line %s",
      static_cast<unsigned>(nonces.link), g_line_auth ? "authenticated" : "in clear");
  link.Start(start, nonces.link);
  link.Receive(std::span(received).first(count), start);

  // Polled: the UART holds one byte each way, the link one frame; gradients are computed inside
  // Receive when a broadcast completes. The loop spins instead of sleeping in WFI, which would
  // need the UART's and a timer's interrupts; a battery-powered board would sleep here.
  TimeNs now = start;
  TimeNs finished_at = protocol::kNever;
  while (!link.Finished()) {
    now = platform::MonotonicNanos();
    // The session's result is settled once it finishes: a gateway gone before taking the last
    // frames must not keep the device running for ever.
    if (worker.Finished() && finished_at == protocol::kNever) finished_at = now;
    if (finished_at != protocol::kNever && now - finished_at > kDrainNs) {
      Log(LogLevel::kWarning, "the link did not drain within %u s of the end",
          static_cast<unsigned>(kDrainNs / 1'000'000'000));
      break;
    }
    count = uart.ReadAvailable(received);
    if (count > 0) link.Receive(std::span(received).first(count), now);
    const std::span<const std::byte> output = link.Output();
    if (!output.empty()) {
      const std::size_t written = uart.WriteSome(output);
      if (written > 0) link.Written(written, now);
    }
    if (now >= link.NextWakeup()) link.OnTimer(now);
  }

  LogSummary(uart, now - start);
  platform::internal::LogMemoryUse();
  const std::size_t shard_bytes = kFashionShard.feature_bytes.size() + kFashionShard.labels.size();
  const std::size_t flash = platform::internal::FlashBytes() - shard_bytes;
  Log(LogLevel::kInfo, "flash beyond the %zu B shard: %zu B of %zu B budget", shard_bytes, flash,
      kFlashBudgetBytes);
  if (!worker.status().ok()) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: the worker stopped: %s", worker.failure_reason());
    return 1;
  }
  Log(LogLevel::kInfo, "server's Leave: %s", LeaveReasonName(worker.leave_reason()));
  return Verdict(worker.leave_reason() == wire::LeaveReason::kDone &&
                     worker.counters().updates_sent != 0 && flash <= kFlashBudgetBytes,
                 "the run did not complete, or over the flash budget");
}

}  // namespace
}  // namespace edgesgd::mcu

int main() { return edgesgd::mcu::Run(); }
