// The smallest useful device image: one protocol::WorkerSession (top_k + error feedback) with
// core and the wire layer, and nothing else of edgesgd. It registers one codec (top_k), so no
// other codec's encoder or decoder is linked; its flash is the figure behind the target "core +
// wire + worker session + one codec within 48 KiB at -Os" (the image checks it).
//
// A device needs a link to a server; here the server's side is played by the image itself in
// the plainest way the wire layer allows: it encodes the Welcome, each round's ModelBroadcast
// (the model copied into the frame's payload) and the final Leave with a FrameBuilder, decodes
// each Update with DecodeFrame and applies it with the codec's DecodeAdd (x -= C(p), the mean of
// one worker). No ServerSession is linked, so
// the image holds what a worker device holds, plus a frame encoder and decoder it has anyway.
// The worker trains the quadratic f(x) = |x - t|^2 / 2 (gradient x - t) with t drawn from
// Philox; it passes if the distance to t falls by kRequiredFactor and the flash fits the budget.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "edgesgd/core/arena.h"
#include "edgesgd/core/codec_registry.h"
#include "edgesgd/core/random.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/protocol/run_config.h"
#include "edgesgd/protocol/worker_session.h"
#include "edgesgd/wire/frame_builder.h"
#include "edgesgd/wire/frame_decoder.h"
#include "memory_usage.h"
#include "verdict.h"

namespace edgesgd::mcu {
namespace {

using platform::Log;
using platform::LogLevel;
using protocol::RunConfig;
using protocol::WorkerSession;

constexpr std::size_t kDimension = 512;
constexpr std::uint32_t kRounds = 60;
constexpr float kRequiredFactor = 1000.0f;
constexpr std::size_t kFlashBudgetBytes = 48 * 1024;

// The one codec this device runs.
constexpr auto kCodecOps = MakeCodecOps<TopKCodec>();
constexpr CodecRegistry kCodecs(kCodecOps);

constexpr RunConfig MakeConfig() {
  RunConfig config;
  config.layout = TensorLayout::Single(kDimension).value();
  config.codec = TopKParams{.k_ratio = 0.1f};
  config.feedback = FeedbackParams{.kind = FeedbackKind::kEf,
                                   .detach = 0.0f,
                                   .learning_rate = 0.1f,
                                   .momentum = 0.0f,
                                   .weight_decay = 0.0f,
                                   .local_steps = 1};
  config.rounds = kRounds;
  config.seed = 99;
  return config;
}
constexpr RunConfig kConfig = MakeConfig();

constexpr std::size_t kWorkerArenaBytes = WorkerSession::ArenaBytes(kConfig);
static_assert(kWorkerArenaBytes > 0, "the run configuration is invalid");
alignas(kArenaAlignment) std::array<std::byte, kWorkerArenaBytes> g_worker_arena;

// The server's side: the model, a builder for its frames, and a receive buffer for an Update.
constexpr std::size_t kServerBuilderBytes =
    wire::FrameBuilderBytes(protocol::ModelCodec(), kConfig.layout);
alignas(kArenaAlignment) std::array<std::byte, kServerBuilderBytes> g_server_builder;
alignas(wire::kFrameAlignment) std::array<std::byte, protocol::UpdateFrameBytes(kConfig)>
    g_update_frame;
std::array<float, kDimension> g_model;
std::array<float, kDimension> g_target;
// Constructed at start-up rather than statically initialised: a session's initial state is ~2 KiB
// of mostly non-zero fields, which as a global would be stored in flash as its initial image.
std::optional<WorkerSession> g_session;

Status QuadraticGradient(void*, std::span<const float> point, std::uint32_t, std::uint32_t,
                         std::span<float> gradient) {
  for (std::size_t i = 0; i < point.size(); ++i) gradient[i] = point[i] - g_target[i];
  return Status::Ok();
}

float DistanceToTarget() {
  float sum = 0.0f;
  for (std::size_t i = 0; i < kDimension; ++i) {
    const float diff = g_model[i] - g_target[i];
    sum += diff * diff;
  }
  return std::sqrt(sum);
}

// Hands `frame` to the worker and returns the Update it answers with, copied into
// g_update_frame (empty if it sent none).
Result<std::span<const std::byte>> Exchange(std::span<const std::byte> frame,
                                            protocol::TimeNs now) {
  WorkerSession& worker = *g_session;
  worker.OnFrame(protocol::kServerPeer, frame, now);
  std::span<const std::byte> update;
  protocol::OutgoingFrame out;
  while (worker.PollFrame(out)) {
    if (out.work_samples == 0) continue;  // Join re-sends and heartbeats
    if (out.bytes.size() > g_update_frame.size()) return Status::OutOfRange();
    std::copy(out.bytes.begin(), out.bytes.end(), g_update_frame.begin());
    update = std::span<const std::byte>(g_update_frame).first(out.bytes.size());
  }
  return update;
}

Status Train(std::size_t& update_bytes) {
  Arena arena(g_worker_arena);
  WorkerSession& worker = g_session.emplace();
  const Status init =
      worker.Init(arena, {.device_id = 1, .gradient = &QuadraticGradient, .codecs = &kCodecs});
  if (!init.ok()) return init;
  worker.Start(0);
  protocol::OutgoingFrame join;
  if (!worker.PollFrame(join)) return Status::Internal();

  wire::FrameBuilder server(g_server_builder);
  EDGESGD_TRY_ASSIGN(std::span<const std::byte> welcome,
                     server.EncodeWelcome({.sender = 0, .round = 0, .sequence = 0},
                                          protocol::ToWelcomeInfo(kConfig, 1, 1)));
  EDGESGD_TRY(Exchange(welcome, 1).status());
  if (!worker.configured()) return Status::Internal();

  for (std::uint32_t round = 0; round < kRounds; ++round) {
    const wire::FrameHeader header{.sender = 0, .round = round, .sequence = round + 1};
    EDGESGD_TRY_ASSIGN(const PayloadSpans model,
                       server.BeginPayloadFrame(header,
                                                wire::PayloadMessage::ModelBroadcast(
                                                    {.content = wire::BroadcastContent::kModel,
                                                     .participants = 1}),
                                                protocol::ModelCodec(), kConfig.layout));
    std::copy(g_model.begin(), g_model.end(), model.values.begin());
    EDGESGD_TRY_ASSIGN(std::span<const std::byte> broadcast, server.FinishPayloadFrame());
    EDGESGD_TRY_ASSIGN(const std::span<const std::byte> update, Exchange(broadcast, 2 + round));
    if (update.empty()) return Status::Internal();
    update_bytes = update.size();
    EDGESGD_TRY_ASSIGN(const wire::FrameView view, wire::DecodeFrame(update));
    if (view.kind != wire::MessageKind::kUpdate) return Status::DataLoss();
    // x -= C(p): top_k decodes without scratch.
    EDGESGD_TRY_ASSIGN(const CodecParams params,
                       ParamsForPayload(kConfig.codec, view.payload.codec, view.payload.layout,
                                        view.payload.header));
    EDGESGD_TRY(kCodecs.DecodeAdd(params, kConfig.layout, {kConfig.seed, round, 1},
                                  view.payload.view, -1.0f, g_model, {}));
    if (round % 10 == 0 || round + 1 == kRounds) {
      Log(LogLevel::kInfo, "round %2u distance %.6f", static_cast<unsigned>(round),
          static_cast<double>(DistanceToTarget()));
    }
  }
  EDGESGD_TRY_ASSIGN(std::span<const std::byte> leave,
                     server.EncodeLeave({.sender = 0, .round = kRounds, .sequence = kRounds + 1},
                                        {wire::LeaveReason::kDone}));
  EDGESGD_TRY(Exchange(leave, 2 + kRounds).status());
  return worker.Finished() ? Status::Ok() : Status::Internal();
}

int Run() {
  CounterRng rng(kConfig.seed, 0, 0, StreamId(RandomPurpose::kUser));
  for (float& t : g_target) t = 2.0f * rng.NextFloat() - 1.0f;
  const float start = DistanceToTarget();
  std::size_t update_bytes = 0;
  if (const Status status = Train(update_bytes); !status.ok()) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: training failed: %s", status.reason());
    return 1;
  }
  const float end = DistanceToTarget();
  Log(LogLevel::kInfo, "arena %zu B, update %zu B, model frame %zu B",
      kWorkerArenaBytes, update_bytes, wire::MaxFrameBytes(protocol::ModelCodec(), kConfig.layout));
  platform::internal::LogMemoryUse();
  const std::size_t flash = platform::internal::FlashBytes();
  Log(LogLevel::kInfo, "distance %.4f -> %.6f (%.0fx, need %.0fx); flash %zu B of %zu B budget",
      static_cast<double>(start), static_cast<double>(end), static_cast<double>(start / end),
      static_cast<double>(kRequiredFactor), flash, kFlashBudgetBytes);
  return Verdict(start / end >= kRequiredFactor && flash <= kFlashBudgetBytes,
                 "no convergence, or over the flash budget");
}

}  // namespace
}  // namespace edgesgd::mcu

int main() { return edgesgd::mcu::Run(); }
