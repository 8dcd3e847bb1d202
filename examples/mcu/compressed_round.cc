#include "compressed_round.h"

#include <algorithm>

#include "edgesgd/platform/clock.h"
#include "edgesgd/platform/log.h"
#include "edgesgd/wire/frame_decoder.h"
#include "memory_usage.h"
#include "verdict.h"

namespace edgesgd::mcu {
namespace {

// x_{t+1} = x_t - C(p) into run.vector, with x_t the gradient point (c = 0, H = 1) and C(p) read
// back from the Update frame as a server would. Not inlined, and the decoded view is used in
// place rather than copied out of its Result: a frame view is 520 B, and the stack is part of
// the RAM budget.
[[gnu::noinline]] Status ApplyFrame(const CompressedRound& run, std::span<const std::byte> frame,
                                    const CodecContext& context) {
  const std::span<const float> synced = run.worker.GradientPoint();
  std::copy(synced.begin(), synced.end(), run.vector.begin());
  const Result<wire::FrameView> view = wire::DecodeFrame(frame);
  if (!view.ok()) return view.status();
  EDGESGD_TRY_ASSIGN(
      const CodecParams params,
      ParamsForPayload(run.codec, view->payload.codec, view->payload.layout, view->payload.header));
  return kRoundCodecs.DecodeAdd(params, run.layout, context, view->payload.view, -1.0f, run.vector,
                                {});
}

// One round; returns the Update frame's size. Not inlined, so its locals occupy the stack only
// while a round runs.
[[gnu::noinline]] Result<std::size_t> RunRound(const CompressedRound& run, std::uint32_t round,
                                               wire::FrameBuilder& builder) {
  EDGESGD_TRY(run.worker.BeginRound(run.vector));  // copies x: the vector is free from here
  CounterRng rng(kRoundSeed, round, 0, StreamId(RandomPurpose::kDataSampling, 1));
  EDGESGD_TRY_ASSIGN(const DatasetView batch,
                     SampleImages(run.train, 0, run.train.size(), run.batch, rng, run.buffers));
  EDGESGD_TRY(run.model.LossAndGradient(run.worker.GradientPoint(), batch, run.vector).status());
  EDGESGD_TRY(run.worker.LocalStep(run.vector));

  const wire::FrameHeader header{.sender = 1, .round = round, .sequence = round};
  EDGESGD_TRY_ASSIGN(const PayloadSpans out,
                     builder.BeginPayloadFrame(
                         header, wire::PayloadMessage::Update({.worker = 1, .samples = run.batch}),
                         run.codec, run.layout));
  const CodecContext context{kRoundSeed, round, 1};
  if (const Result<PayloadShape> shape =
          run.worker.Compress(context, out, std::as_writable_bytes(run.vector));
      !shape.ok()) {
    builder.AbandonPayloadFrame();
    return shape.status();
  }
  EDGESGD_TRY_ASSIGN(const std::span<const std::byte> frame, builder.FinishPayloadFrame());
  EDGESGD_TRY(ApplyFrame(run, frame, context));
  return frame.size();
}

}  // namespace

Status TrainRounds(const CompressedRound& run, std::uint32_t rounds, std::uint32_t log_every,
                   const ImageSlice& test, TrainingRecord& record) {
  using platform::Log;
  using platform::LogLevel;
  Arena arena(run.arena);
  EDGESGD_TRY(
      run.worker.Init(arena, kRoundCodecs, run.layout, run.codec, kRoundFeedback, run.scratch));
  EDGESGD_TRY(run.model.Init(run.spec, arena));
  arena.Seal();
  EDGESGD_TRY(run.model.InitParameters(kRoundSeed, run.vector));
  const ImageSlice loss_images = run.train.First(kLossImages);
  EDGESGD_TRY_ASSIGN(record.first,
                     EvaluateImages(run.model, run.vector, loss_images, run.buffers));
  record.last = record.first;
  Log(LogLevel::kInfo, "round %4u  train loss %.4f", 0u, static_cast<double>(record.first.loss));
  wire::FrameBuilder builder(run.builder_storage);
  for (std::uint32_t round = 0; round < rounds; ++round) {
    // Read every round: the SysTick fallback wraps every 0.67 s.
    const std::uint64_t start = platform::MonotonicNanos();
    EDGESGD_TRY_ASSIGN(record.frame_bytes, RunRound(run, round, builder));
    record.train_ns += platform::MonotonicNanos() - start;
    if ((round + 1) % log_every != 0) continue;
    EDGESGD_TRY_ASSIGN(record.last,
                       EvaluateImages(run.model, run.vector, loss_images, run.buffers));
    Log(LogLevel::kInfo, "round %4u  train loss %.4f", static_cast<unsigned>(round + 1),
        static_cast<double>(record.last.loss));
  }
  EDGESGD_TRY_ASSIGN(const Evaluation held_out,
                     EvaluateImages(run.model, run.vector, test, run.buffers));
  record.last.accuracy = held_out.accuracy;
  return Status::Ok();
}

int ReportTraining(const CompressedRound& run, const Status& trained, const TrainingRecord& record,
                   std::uint32_t rounds, const TrainingTargets& targets) {
  using platform::Log;
  using platform::LogLevel;
  if (!trained.ok()) {
    Log(LogLevel::kError, "EDGESGD-MCU FAIL: training failed: %s", trained.reason());
    return 1;
  }
  Log(LogLevel::kInfo, "update frame %zu B (dense would be %zu B)", record.frame_bytes,
      wire::MaxFrameBytes(IdentityParams{}, run.layout));
  const double train_ms = static_cast<double>(record.train_ns) / 1e6;
  Log(LogLevel::kInfo,
      "time: %.3f ms per training sample, %.1f ms per round (emulated: qemu's SysTick follows "
      "the host clock)",
      train_ms / (static_cast<double>(rounds) * run.batch), train_ms / rounds);
  platform::internal::LogMemoryUse();
  const std::size_t static_ram = platform::internal::StaticRamBytes();
  const std::size_t ram = static_ram + platform::internal::StackPeakBytes();
  const std::size_t unplanned = static_ram - std::min(static_ram, targets.plan_bytes);
  Log(LogLevel::kInfo, "RAM %zu B: %s the %zu B target (static beyond the plan: %zu B)", ram,
      ram <= targets.ram_bytes ? "within" : "above", targets.ram_bytes, unplanned);
  const float chance = 1.0f / static_cast<float>(kImageClasses);
  const float loss_factor = record.first.loss / record.last.loss;
  Log(LogLevel::kInfo,
      "train loss %.4f -> %.4f (%.2fx lower, need %.1fx); held-out accuracy %.3f (need %.2f)",
      static_cast<double>(record.first.loss), static_cast<double>(record.last.loss),
      static_cast<double>(loss_factor), static_cast<double>(targets.loss_factor),
      static_cast<double>(record.last.accuracy),
      static_cast<double>(chance + targets.accuracy_margin));
  return Verdict(ram <= targets.ram_bytes && loss_factor >= targets.loss_factor &&
                     record.last.accuracy >= chance + targets.accuracy_margin &&
                     unplanned <= targets.unplanned_budget_bytes,
                 "RAM, training or the memory plan missed its target");
}

}  // namespace edgesgd::mcu
